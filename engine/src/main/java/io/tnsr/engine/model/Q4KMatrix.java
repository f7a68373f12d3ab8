package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;

/**
 * Q4_K weights (ggml block_q4_K): super-blocks of 256 elements, 144 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qs: 128 bytes]}. Sub-block s (32 elements, s in [0, 8)) has a
 * 6-bit scale sc and min m packed in {@code scales} (see {@link #packedScale}); its element l is
 * {@code d * sc * q - dmin * m} with q the low (s even) or high (s odd) nibble of qs[32 * (s / 2) + l].
 *
 * <p>Repacked at load ({@link #repack}): the 128 bytes of nibbles of each super-block as they are
 * ({@link #quants}), and per sub-block the float products {@code d * sc} ({@link #scales}) and {@code dmin * m}
 * ({@link #mins}), so the kernels never unpack a 6-bit field: every 32 bytes of quants are 64 elements, the low
 * nibbles sub-block 2p and the high nibbles sub-block 2p + 1, each value {@code q * scale - min}.
 */
final class Q4KMatrix extends PackedMatrix {
    private static final int QK = 256;
    private static final int BYTES = 144;
    private static final int SUB = 32; // elements per sub-block (one scale and min)
    Q4KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, GgmlType.Q4_K, packed, SUB, SUB / 2, true); // units: sub-blocks
    }

    /**
     * 6-bit field {@code k} (0..15: scales of sub-blocks 0..7, then their mins) of the 12 packed bytes at
     * {@code sb}: fields 0-3 and 8-11 are the low 6 bits of bytes 0-7; fields 4-7 and 12-15 take 4 bits from
     * bytes 8-11 (low nibble for scales, high for mins) and their top 2 bits from the top of bytes 0-7.
     */
    private static int packedScale(byte[] qs, int sb, int k) {
        int s = k & 7;
        int lowByte = (k >> 3) * 4 + s; // where the low 6 bits (s < 4) or the top 2 bits (s >= 4) live
        if (s < 4) {
            return qs[sb + lowByte] & 63;
        }
        int nib = (qs[sb + s + 4] & 0xFF) >> ((k >> 3) * 4) & 0xF;
        return nib | ((qs[sb + lowByte - 4] & 0xFF) >> 6) << 4;
    }

    /** Splits {@code blocks} super-blocks from {@code data} into nibbles and float sub-block scales and mins. */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, QK / 2)];
        float[] scales = new float[Math.multiplyExact(blocks, QK / SUB)];
        float[] mins = new float[scales.length];
        byte[] sb = new byte[16];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, 16);
            float d = Blocks.half(sb, 0);
            float dmin = Blocks.half(sb, 2);
            for (int s = 0; s < QK / SUB; s++) {
                scales[k * (QK / SUB) + s] = d * packedScale(sb, 4, s);
                mins[k * (QK / SUB) + s] = dmin * packedScale(sb, 4, s + 8);
            }
            data.get(k * BYTES + 16, quants, k * (QK / 2), QK / 2);
        }
        return new PackedBlocks(quants, scales, mins);
    }

    /** L elements from the low nibbles of q[off..off+L), times scale, minus min. */
    private static FloatVector low(byte[] q, int off, FloatVector scale, FloatVector min) {
        return values(Blocks.ints(q, off).and(0xF), scale, min);
    }

    /** L elements from the high nibbles of q[off..off+L), times scale, minus min. */
    private static FloatVector high(byte[] q, int off, FloatVector scale, FloatVector min) {
        return values(Blocks.ints(q, off).lanewise(VectorOperators.LSHR, 4).and(0xF), scale, min);
    }

    /*
     * Not Blocks.nibbles (a shift by a parameter, then a bias subtracted): its shift by 0 and subtraction of 0
     * are two vector operations more per chunk, and with them C2 (JDK 17) stopped inlining inside matvec's loop
     * and boxed its vectors (2.5 MB allocated per 2048 x 768 matvec, half the speed).
     */
    private static FloatVector values(IntVector q, FloatVector scale, FloatVector min) {
        return ((FloatVector) q.convert(VectorOperators.I2F, 0)).mul(scale).sub(min);
    }

    /*
     * Both loops walk a row two sub-blocks at a time, p and p + 1 with p even: the 32 bytes from p * 16 hold
     * sub-block p (elements [32p, 32p + 32)) in their low nibbles and p + 1 ([32p + 32, 32p + 64)) in their high
     * ones, so every shift is a constant at its call site (a computed shift was measured 2x slower). The chunks of
     * L elements go even -> a, odd -> b, in column order.
     */

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        byte[] q = quants; // locals: C2 keeps them in registers
        float[] s = scales;
        float[] m = mins;
        for (int r = 0; r < rows; r++) {
            int qr = r * (cols / 2);
            int sr = r * units;
            FloatVector a = FloatVector.zero(F);
            FloatVector b = a;
            for (int p = 0; p < units; p += 2) {
                int qp = qr + p * (SUB / 2);
                int xp = xo + p * SUB;
                FloatVector sl = FloatVector.broadcast(F, s[sr + p]);
                FloatVector ml = FloatVector.broadcast(F, m[sr + p]);
                for (int j = 0; j < SUB; j += 2 * L) {
                    a = low(q, qp + j, sl, ml).fma(FloatVector.fromArray(F, x, xp + j), a);
                    b = low(q, qp + j + L, sl, ml).fma(FloatVector.fromArray(F, x, xp + j + L), b);
                }
                FloatVector sh = FloatVector.broadcast(F, s[sr + p + 1]);
                FloatVector mh = FloatVector.broadcast(F, m[sr + p + 1]);
                for (int j = 0; j < SUB; j += 2 * L) {
                    a = high(q, qp + j, sh, mh).fma(FloatVector.fromArray(F, x, xp + SUB + j), a);
                    b = high(q, qp + j + L, sh, mh).fma(FloatVector.fromArray(F, x, xp + SUB + j + L), b);
                }
            }
            out[oo + r] = sum(a, b);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        byte[] q = quants;
        int qr = row * (cols / 2);
        for (int p = 0, sr = row * units; p < units; p += 2) {
            int qp = qr + p * (SUB / 2);
            int o = off + p * SUB;
            FloatVector sl = FloatVector.broadcast(F, scales[sr + p]);
            FloatVector ml = FloatVector.broadcast(F, mins[sr + p]);
            for (int j = 0; j < SUB; j += L) {
                low(q, qp + j, sl, ml).intoArray(dst, o + j);
            }
            FloatVector sh = FloatVector.broadcast(F, scales[sr + p + 1]);
            FloatVector mh = FloatVector.broadcast(F, mins[sr + p + 1]);
            for (int j = 0; j < SUB; j += L) {
                high(q, qp + j, sh, mh).intoArray(dst, o + SUB + j);
            }
        }
    }
}
