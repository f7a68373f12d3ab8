package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;

/**
 * Q8_0 weights (ggml block_q8_0): blocks of 32 elements, 34 bytes each, {@code [d: f16][qs: 32 x int8]};
 * element i = qs[i] * d. Row r holds blocks [r * cols / 32, (r + 1) * cols / 32).
 */
final class Q8_0Matrix extends WeightMatrix {
    private static final int QK = 32;
    private static final int BYTES = 34;
    private final int blocks; // per row

    Q8_0Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
        this.blocks = cols / QK;
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q8_0;
    }

    /** Elements [j, j + L) of the block at byte {@code bb}, times its scale {@code d}. */
    private FloatVector chunk(int bb, int j, FloatVector d) {
        return Blocks.signedBytes(data, bb + 2 + j).mul(d);
    }

    private FloatVector scale(int bb) {
        return FloatVector.broadcast(F, Blocks.half(data, bb));
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        int r = 0;
        for (; r + 4 <= rows; r += 4) {
            FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
            int rb = r * blocks * BYTES; // block 0 of row r; the next rows follow at blocks * BYTES
            int rs = blocks * BYTES;
            for (int b = 0; b < blocks; b++) {
                int bb = rb + b * BYTES;
                FloatVector d0 = scale(bb), d1 = scale(bb + rs), d2 = scale(bb + 2 * rs), d3 = scale(bb + 3 * rs);
                for (int j = 0; j < QK; j += L) {
                    FloatVector xv = FloatVector.fromArray(F, x, xo + b * QK + j);
                    a0 = chunk(bb, j, d0).fma(xv, a0);
                    a1 = chunk(bb + rs, j, d1).fma(xv, a1);
                    a2 = chunk(bb + 2 * rs, j, d2).fma(xv, a2);
                    a3 = chunk(bb + 3 * rs, j, d3).fma(xv, a3);
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
            FloatVector d = scale(bb);
            for (int j = 0; j < QK; j += L) {
                chunk(bb, j, d).intoArray(dst, off + b * QK + j);
            }
        }
    }
}
