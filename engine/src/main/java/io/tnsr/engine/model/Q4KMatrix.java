package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;

/**
 * Q4_K weights (ggml block_q4_K): super-blocks of 256 elements, 144 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qs: 128 bytes]}. Sub-block s (32 elements, s in [0, 8)) has a
 * 6-bit scale sc and min m packed in {@code scales} (see {@link #packedScale}); its element l is
 * {@code d * sc * q - dmin * m} with q the low (s even) or high (s odd) nibble of qs[32 * (s / 2) + l].
 */
final class Q4KMatrix extends WeightMatrix {
    private static final int QK = 256;
    private static final int BYTES = 144;
    private final int blocks; // per row

    Q4KMatrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data, GgmlType.Q4_K);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q4_K;
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

    /** Elements [e, e + L) of the super-block at {@code bb} given sub-block e / 32's scale and min. */
    private static FloatVector chunk(byte[] qs, int bb, int e, FloatVector scale, FloatVector min) {
        int s = e >> 5;
        return Blocks.nibbles(qs, bb + 16 + (s >> 1) * 32 + (e & 31), (s & 1) * 4, 0).mul(scale).sub(min);
    }

    private static FloatVector scale(byte[] qs, int bb, float d, int s) {
        return FloatVector.broadcast(F, d * packedScale(qs, bb + 4, s));
    }

    private static FloatVector min(byte[] qs, int bb, float dmin, int s) {
        return FloatVector.broadcast(F, dmin * packedScale(qs, bb + 4, s + 8));
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        byte[] qs = rowBytes;
        for (int r = 0; r < rows; r++) {
            copyRow(r, qs);
            FloatVector a = FloatVector.zero(F);
            FloatVector b = a;
            for (int k = 0; k < blocks; k++) { // one induction variable: a counted loop C2 unrolls
                int bb = k * BYTES;
                float d = Blocks.half(qs, bb);
                float dmin = Blocks.half(qs, bb + 2);
                for (int s = 0; s < 8; s++) {
                    FloatVector sc = scale(qs, bb, d, s);
                    FloatVector mn = min(qs, bb, dmin, s);
                    for (int e = s * 32, xk = xo + k * QK; e < s * 32 + 32; e += 2 * L) { // e: even chunk, e + L: odd
                        a = chunk(qs, bb, e, sc, mn).fma(FloatVector.fromArray(F, x, xk + e), a);
                        b = chunk(qs, bb, e + L, sc, mn).fma(FloatVector.fromArray(F, x, xk + e + L), b);
                    }
                }
            }
            out[oo + r] = sum(a, b);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        byte[] qs = rowBytes;
        copyRow(row, qs);
        for (int b = 0; b < blocks; b++) {
            int bb = b * BYTES;
            float d = Blocks.half(qs, bb);
            float dmin = Blocks.half(qs, bb + 2);
            for (int s = 0; s < 8; s++) {
                FloatVector sc = scale(qs, bb, d, s);
                FloatVector mn = min(qs, bb, dmin, s);
                for (int e = s * 32; e < s * 32 + 32; e += L) {
                    chunk(qs, bb, e, sc, mn).intoArray(dst, off + b * QK + e);
                }
            }
        }
    }
}
