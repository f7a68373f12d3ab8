package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import jdk.incubator.vector.FloatVector;

/**
 * Q4_0 weights (ggml block_q4_0): blocks of 32 elements, 18 bytes each, {@code [d: f16][qs: 16 bytes]};
 * element i &lt; 16 = ((qs[i] &amp; 0xF) - 8) * d, element 16 + i = ((qs[i] &gt;&gt; 4) - 8) * d. Repacked at load
 * into {@link #quants} (the 16 bytes of each block) and {@link #scales} ({@link PackedBlocks}).
 *
 * <p>{@link #matvec} and {@link #decodeRow} repeat the row-major loops of the other packed types on purpose: only
 * {@code chunk} differs, and a loop shared through a virtual or lambda call would not inline it, so every vector
 * would be boxed (the Vector API's pitfall). One final class per type keeps each kernel monomorphic.
 */
final class Q4_0Matrix extends PackedMatrix {
    private static final int QK = 32;
    private static final int PAYLOAD = 16; // quant bytes per block
    Q4_0Matrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, GgmlType.Q4_0, packed, QK, PAYLOAD, false); // units: blocks
    }

    /** Elements [j, j + L) of the block whose quants start at {@code qb} (j &lt; 16: low nibbles, else high), times d. */
    private static FloatVector chunk(byte[] q, int qb, int j, FloatVector d) {
        return Blocks.nibbles(q, qb + (j & 15), (j & 16) >> 2, 8).mul(d);
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        byte[] q = quants; // locals: C2 keeps them in registers
        float[] s = scales;
        for (int r = 0; r < rows; r++) {
            int sr = r * units;
            FloatVector a = FloatVector.zero(F);
            FloatVector b = a;
            int k = 0;
            for (; k + 2 <= units; k += 2) { // two blocks per trip by hand: C2 (JDK 17) unrolls neither this
                int qb = (sr + k) * PAYLOAD;  // loop nor an inner constant-trip one here (measured +20%)
                FloatVector d = FloatVector.broadcast(F, s[sr + k]);
                FloatVector e = FloatVector.broadcast(F, s[sr + k + 1]);
                int xk = xo + k * QK;
                for (int j = 0; j < QK; j += 2 * L) { // chunk j: even (a), j + L: odd (b)
                    a = chunk(q, qb, j, d).fma(FloatVector.fromArray(F, x, xk + j), a);
                    b = chunk(q, qb, j + L, d).fma(FloatVector.fromArray(F, x, xk + j + L), b);
                }
                for (int j = 0; j < QK; j += 2 * L) {
                    a = chunk(q, qb + PAYLOAD, j, e).fma(FloatVector.fromArray(F, x, xk + QK + j), a);
                    b = chunk(q, qb + PAYLOAD, j + L, e).fma(FloatVector.fromArray(F, x, xk + QK + j + L), b);
                }
            }
            for (; k < units; k++) {
                int qb = (sr + k) * PAYLOAD;
                FloatVector d = FloatVector.broadcast(F, s[sr + k]);
                for (int j = 0; j < QK; j += 2 * L) {
                    a = chunk(q, qb, j, d).fma(FloatVector.fromArray(F, x, xo + k * QK + j), a);
                    b = chunk(q, qb, j + L, d).fma(FloatVector.fromArray(F, x, xo + k * QK + j + L), b);
                }
            }
            out[oo + r] = sum(a, b);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        byte[] q = quants;
        for (int b = 0, sr = row * units; b < units; b++) {
            FloatVector d = FloatVector.broadcast(F, scales[sr + b]);
            for (int j = 0; j < QK; j += L) {
                chunk(q, (sr + b) * PAYLOAD, j, d).intoArray(dst, off + b * QK + j);
            }
        }
    }
}
