package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

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

    /** L elements: low (shift 0) or high (shift 4) nibbles of qs[off..off+L), times scale, minus min. */
    private static FloatVector chunk(byte[] qs, int off, int shift, FloatVector scale, FloatVector min) {
        return Blocks.nibbles(qs, off, shift, 0).mul(scale).sub(min);
    }

    private static FloatVector scale(byte[] qs, int bb, float d, int s) {
        return FloatVector.broadcast(F, d * packedScale(qs, bb + 4, s));
    }

    private static FloatVector min(byte[] qs, int bb, float dmin, int s) {
        return FloatVector.broadcast(F, dmin * packedScale(qs, bb + 4, s + 8));
    }

    /*
     * decodeRow walks a super-block as 4 pairs of sub-blocks (2g: low nibbles of qs[32g..32g+32), 2g + 1: their
     * high nibbles), so every shift is a constant at its call site (measured 2x faster than a computed shift).
     */

    /*
     * One token goes through the tile ({@link WeightMatrix#matvec}'s default: each row decoded into L1 by
     * decodeRow, then dotted). Every in-register loop tried here (per sub-block scales, one loop per chain,
     * scales unpacked first) left C2 (JDK 17) boxing a vector per trip (0.6-2.5 GB/s of garbage) and was no
     * faster (3.3-4.5 vs 3.9 G weights/s on a 1024 x 2048 matrix in L2).
     */

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        byte[] qs = rowBytes;
        copyRow(row, qs);
        for (int k = 0; k < blocks; k++) {
            int bb = k * BYTES;
            float d = Blocks.half(qs, bb);
            float dmin = Blocks.half(qs, bb + 2);
            for (int g = 0; g < 4; g++) {
                int q = bb + 16 + g * 32;
                int o = off + k * QK + g * 64;
                FloatVector sc = scale(qs, bb, d, 2 * g);
                FloatVector mn = min(qs, bb, dmin, 2 * g);
                for (int l = 0; l < 32; l += L) {
                    chunk(qs, q + l, 0, sc, mn).intoArray(dst, o + l);
                }
                sc = scale(qs, bb, d, 2 * g + 1);
                mn = min(qs, bb, dmin, 2 * g + 1);
                for (int l = 0; l < 32; l += L) {
                    chunk(qs, q + l, 4, sc, mn).intoArray(dst, o + 32 + l);
                }
            }
        }
    }
}
