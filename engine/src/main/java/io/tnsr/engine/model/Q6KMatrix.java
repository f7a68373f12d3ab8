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
 * Q6_K weights (ggml block_q6_K): super-blocks of 256 elements, 210 bytes each,
 * {@code [ql: 128 bytes][qh: 64 bytes][scales: 16 x int8][d: f16]}. Element e = 128 h + 32 q + l
 * (h in [0, 2), q in [0, 4), l in [0, 32)) is {@code d * scales[e / 16] * (q6 - 32)}, where the 6-bit q6 has
 * its low 4 bits in nibble q / 2 of ql[64 h + 32 (q % 2) + l] and its top 2 bits at bit 2q of qh[32 h + l].
 */
final class Q6KMatrix extends WeightMatrix {
    private static final int QK = 256;
    private static final int BYTES = 210;
    private final int blocks; // per row

    Q6KMatrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q6_K;
    }

    /** Elements [e, e + L) of the super-block at {@code bb}, times their group's scale d * scales[e / 16]. */
    private FloatVector chunk(int bb, int e, FloatVector scale) {
        int h = e >> 7;
        int q = (e >> 5) & 3;
        int l = e & 31;
        IntVector lo = Blocks.ints(data, bb + h * 64 + (q & 1) * 32 + l).lanewise(VectorOperators.LSHR, (q >> 1) * 4).and(0xF);
        IntVector hi = Blocks.ints(data, bb + 128 + h * 32 + l).lanewise(VectorOperators.LSHR, 2 * q).and(3)
                .lanewise(VectorOperators.LSHL, 4);
        return ((FloatVector) lo.or(hi).sub(32).convert(VectorOperators.I2F, 0)).mul(scale);
    }

    /** d * scales[g] of 16-element group g. */
    private FloatVector scale(int bb, float d, int g) {
        return FloatVector.broadcast(F, d * data.get(bb + 192 + g));
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        int r = 0;
        int rs = blocks * BYTES; // bytes per row
        for (; r + 4 <= rows; r += 4) {
            FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
            for (int b = 0; b < blocks; b++) {
                int b0 = r * rs + b * BYTES, b1 = b0 + rs, b2 = b1 + rs, b3 = b2 + rs;
                float d0 = Blocks.half(data, b0 + 208), d1 = Blocks.half(data, b1 + 208);
                float d2 = Blocks.half(data, b2 + 208), d3 = Blocks.half(data, b3 + 208);
                for (int g = 0; g < 16; g++) {
                    FloatVector s0 = scale(b0, d0, g), s1 = scale(b1, d1, g), s2 = scale(b2, d2, g), s3 = scale(b3, d3, g);
                    for (int e = g * 16; e < g * 16 + 16; e += L) {
                        FloatVector xv = FloatVector.fromArray(F, x, xo + b * QK + e);
                        a0 = chunk(b0, e, s0).fma(xv, a0);
                        a1 = chunk(b1, e, s1).fma(xv, a1);
                        a2 = chunk(b2, e, s2).fma(xv, a2);
                        a3 = chunk(b3, e, s3).fma(xv, a3);
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
            float d = Blocks.half(data, bb + 208);
            for (int g = 0; g < 16; g++) {
                FloatVector sc = scale(bb, d, g);
                for (int e = g * 16; e < g * 16 + 16; e += L) {
                    chunk(bb, e, sc).intoArray(dst, off + b * QK + e);
                }
            }
        }
    }
}
