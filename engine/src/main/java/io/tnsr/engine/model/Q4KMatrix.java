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
        super(name, rows, cols, data);
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
    private int packedScale(int sb, int k) {
        int s = k & 7;
        int lowByte = (k >> 3) * 4 + s; // where the low 6 bits (s < 4) or the top 2 bits (s >= 4) live
        if (s < 4) {
            return data.get(sb + lowByte) & 63;
        }
        int nib = (data.get(sb + s + 4) & 0xFF) >> ((k >> 3) * 4) & 0xF;
        return nib | ((data.get(sb + lowByte - 4) & 0xFF) >> 6) << 4;
    }

    /** Elements [e, e + L) of the super-block at {@code bb} given sub-block e / 32's scale and min. */
    private FloatVector chunk(int bb, int e, FloatVector scale, FloatVector min) {
        int s = e >> 5;
        return Blocks.nibbles(data, bb + 16 + (s >> 1) * 32 + (e & 31), (s & 1) * 4, 0).mul(scale).sub(min);
    }

    private FloatVector scale(int bb, float d, int s) {
        return FloatVector.broadcast(F, d * packedScale(bb + 4, s));
    }

    private FloatVector min(int bb, float dmin, int s) {
        return FloatVector.broadcast(F, dmin * packedScale(bb + 4, s + 8));
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        int r = 0;
        int rs = blocks * BYTES; // bytes per row
        for (; r + 4 <= rows; r += 4) {
            FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
            for (int b = 0; b < blocks; b++) {
                int b0 = r * rs + b * BYTES, b1 = b0 + rs, b2 = b1 + rs, b3 = b2 + rs;
                float d0 = Blocks.half(data, b0), d1 = Blocks.half(data, b1), d2 = Blocks.half(data, b2), d3 = Blocks.half(data, b3);
                float m0 = Blocks.half(data, b0 + 2), m1 = Blocks.half(data, b1 + 2), m2 = Blocks.half(data, b2 + 2), m3 = Blocks.half(data, b3 + 2);
                for (int s = 0; s < 8; s++) {
                    FloatVector s0 = scale(b0, d0, s), s1 = scale(b1, d1, s), s2 = scale(b2, d2, s), s3 = scale(b3, d3, s);
                    FloatVector n0 = min(b0, m0, s), n1 = min(b1, m1, s), n2 = min(b2, m2, s), n3 = min(b3, m3, s);
                    for (int e = s * 32; e < s * 32 + 32; e += L) {
                        FloatVector xv = FloatVector.fromArray(F, x, xo + b * QK + e);
                        a0 = chunk(b0, e, s0, n0).fma(xv, a0);
                        a1 = chunk(b1, e, s1, n1).fma(xv, a1);
                        a2 = chunk(b2, e, s2, n2).fma(xv, a2);
                        a3 = chunk(b3, e, s3, n3).fma(xv, a3);
                    }
                }
            }
            out[oo + r] = sum(a0);
            out[oo + r + 1] = sum(a1);
            out[oo + r + 2] = sum(a2);
            out[oo + r + 3] = sum(a3);
        }
        matvecRowsFrom(r, x, xo, out, oo);
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        for (int b = 0; b < blocks; b++) {
            int bb = (row * blocks + b) * BYTES;
            float d = Blocks.half(data, bb);
            float dmin = Blocks.half(data, bb + 2);
            for (int s = 0; s < 8; s++) {
                FloatVector sc = scale(bb, d, s);
                FloatVector mn = min(bb, dmin, s);
                for (int e = s * 32; e < s * 32 + 32; e += L) {
                    chunk(bb, e, sc, mn).intoArray(dst, off + b * QK + e);
                }
            }
        }
    }
}
