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
        super(name, rows, cols, data, GgmlType.Q6_K);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q6_K;
    }

    /** Elements [e, e + L) of the super-block at {@code bb}, times their group's scale d * scales[e / 16]. */
    private static FloatVector chunk(byte[] qs, int bb, int e, FloatVector scale) {
        int h = e >> 7;
        int q = (e >> 5) & 3;
        int l = e & 31;
        IntVector lo = Blocks.ints(qs, bb + h * 64 + (q & 1) * 32 + l).lanewise(VectorOperators.LSHR, (q >> 1) * 4).and(0xF);
        IntVector hi = Blocks.ints(qs, bb + 128 + h * 32 + l).lanewise(VectorOperators.LSHR, 2 * q).and(3)
                .lanewise(VectorOperators.LSHL, 4);
        return ((FloatVector) lo.or(hi).sub(32).convert(VectorOperators.I2F, 0)).mul(scale);
    }

    /** d * scales[g] of 16-element group g. */
    private static FloatVector scale(byte[] qs, int bb, float d, int g) {
        return FloatVector.broadcast(F, d * qs[bb + 192 + g]);
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
                float d = Blocks.half(qs, bb + 208);
                for (int e = 0, xk = xo + k * QK; e < QK; e += 2 * L) { // e: even chunk, e + L: odd
                    a = chunk(qs, bb, e, scale(qs, bb, d, e >> 4)).fma(FloatVector.fromArray(F, x, xk + e), a);
                    b = chunk(qs, bb, e + L, scale(qs, bb, d, (e + L) >> 4)).fma(FloatVector.fromArray(F, x, xk + e + L), b);
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
            float d = Blocks.half(qs, bb + 208);
            for (int g = 0; g < 16; g++) {
                FloatVector sc = scale(qs, bb, d, g);
                for (int e = g * 16; e < g * 16 + 16; e += L) {
                    chunk(qs, bb, e, sc).intoArray(dst, off + b * QK + e);
                }
            }
        }
    }
}
