package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;

/**
 * Q8_0 weights (ggml block_q8_0): blocks of 32 elements, 34 bytes each, {@code [d: f16][qs: 32 x int8]};
 * element i = qs[i] * d. Row r holds blocks [r * cols / 32, (r + 1) * cols / 32), decoded from a copy
 * ({@link #rowBytes}).
 */
final class Q8_0Matrix extends WeightMatrix {
    private static final int QK = 32;
    private static final int BYTES = 34;
    private final int blocks; // per row

    Q8_0Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data, GgmlType.Q8_0);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q8_0;
    }

    /** Elements [j, j + L) of the block at byte {@code bb}, times its scale {@code d}. */
    private static FloatVector chunk(byte[] qs, int bb, int j, FloatVector d) {
        return Blocks.signedBytes(qs, bb + 2 + j).mul(d);
    }

    private static FloatVector scale(byte[] qs, int bb) {
        return FloatVector.broadcast(F, Blocks.half(qs, bb));
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        byte[] qs = rowBytes;
        for (int r = 0; r < rows; r++) {
            copyRow(r, qs);
            FloatVector a = FloatVector.zero(F);
            FloatVector b = a;
            int k = 0;
            for (; k + 2 <= blocks; k += 2) { // two blocks per trip by hand: C2 (JDK 17) unrolls neither this
                int bb = k * BYTES;           // loop nor an inner constant-trip one here (measured +20%)
                FloatVector d = scale(qs, bb);
                FloatVector e = scale(qs, bb + BYTES);
                int xk = xo + k * QK;
                for (int j = 0; j < QK; j += 2 * L) { // chunk j: even (a), j + L: odd (b)
                    a = chunk(qs, bb, j, d).fma(FloatVector.fromArray(F, x, xk + j), a);
                    b = chunk(qs, bb, j + L, d).fma(FloatVector.fromArray(F, x, xk + j + L), b);
                }
                for (int j = 0; j < QK; j += 2 * L) {
                    a = chunk(qs, bb + BYTES, j, e).fma(FloatVector.fromArray(F, x, xk + QK + j), a);
                    b = chunk(qs, bb + BYTES, j + L, e).fma(FloatVector.fromArray(F, x, xk + QK + j + L), b);
                }
            }
            for (; k < blocks; k++) {
                int bb = k * BYTES;
                FloatVector d = scale(qs, bb);
                for (int j = 0; j < QK; j += 2 * L) {
                    a = chunk(qs, bb, j, d).fma(FloatVector.fromArray(F, x, xo + k * QK + j), a);
                    b = chunk(qs, bb, j + L, d).fma(FloatVector.fromArray(F, x, xo + k * QK + j + L), b);
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
            FloatVector d = scale(qs, bb);
            for (int j = 0; j < QK; j += L) {
                chunk(qs, bb, j, d).intoArray(dst, off + b * QK + j);
            }
        }
    }
}
