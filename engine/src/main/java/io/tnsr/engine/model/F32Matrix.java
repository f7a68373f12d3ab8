package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;

/**
 * F32 weights: 4 bytes per element, row r at byte r * cols * 4. Decode is bound by memory bandwidth (every
 * byte read once per token): {@link #matvec} streams 4 rows at once so 4 independent FMA chains hide latency.
 */
final class F32Matrix extends WeightMatrix {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    F32Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
    }

    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    private FloatVector load(int row, int c) {
        return FloatVector.fromByteBuffer(F, data, (row * cols + c) * 4, LE);
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        int r = 0;
        for (; r + 4 <= rows; r += 4) {
            FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
            int c = 0;
            for (int bound = F.loopBound(cols); c < bound; c += L) {
                FloatVector xv = FloatVector.fromArray(F, x, xo + c);
                a0 = load(r, c).fma(xv, a0);
                a1 = load(r + 1, c).fma(xv, a1);
                a2 = load(r + 2, c).fma(xv, a2);
                a3 = load(r + 3, c).fma(xv, a3);
            }
            out[oo + r] = tail(sum(a0), r, x, xo, c);
            out[oo + r + 1] = tail(sum(a1), r + 1, x, xo, c);
            out[oo + r + 2] = tail(sum(a2), r + 2, x, xo, c);
            out[oo + r + 3] = tail(sum(a3), r + 3, x, xo, c);
        }
        matvecRowsFrom(r, x, xo, out, oo);
    }

    private float tail(float s, int row, float[] x, int xo, int c) {
        for (int base = row * cols * 4; c < cols; c++) {
            s += data.getFloat(base + c * 4) * x[xo + c];
        }
        return s;
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            load(row, c).intoArray(dst, off + c);
        }
        for (int base = row * cols * 4; c < cols; c++) {
            dst[off + c] = data.getFloat(base + c * 4);
        }
    }
}
