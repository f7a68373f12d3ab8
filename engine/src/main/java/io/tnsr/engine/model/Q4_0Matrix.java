package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;

/**
 * Q4_0 weights (ggml block_q4_0): blocks of 32 elements, 18 bytes each, {@code [d: f16][qs: 16 bytes]};
 * element i &lt; 16 = ((qs[i] &amp; 0xF) - 8) * d, element 16 + i = ((qs[i] &gt;&gt; 4) - 8) * d.
 *
 * <p>{@link #matvec} and {@link #decodeRow} repeat {@link Q8_0Matrix}'s loops on purpose: only {@code chunk}
 * differs, and a loop shared through a virtual or lambda call would not inline it, so every vector would be
 * boxed (the Vector API's pitfall). One final class per type keeps each kernel monomorphic.
 */
final class Q4_0Matrix extends WeightMatrix {
    private static final int QK = 32;
    private static final int BYTES = 18;
    private final int blocks; // per row

    Q4_0Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data, GgmlType.Q4_0);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q4_0;
    }

    /** Elements [j, j + L) of the block at byte {@code bb} (j &lt; 16: low nibbles, else high), times d. */
    private static FloatVector chunk(byte[] qs, int bb, int j, FloatVector d) {
        return Blocks.nibbles(qs, bb + 2 + (j & 15), (j & 16) >> 2, 8).mul(d);
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
