package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/** F16 weights: halves widened to floats in registers ({@link Float16#toFloat(IntVector)}), then FMA. */
final class F16Matrix extends WeightMatrix {
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_PREFERRED;
    /** Half as many bits as a float vector: the same number of lanes, as shorts. */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(F.vectorBitSize() / 2));
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    F16Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
    }

    @Override
    public GgmlType type() {
        return GgmlType.F16;
    }

    /** Columns [c, c + L) of a row. */
    private FloatVector load(int row, int c) {
        ShortVector h = ShortVector.fromByteBuffer(S, data, (row * cols + c) * 2, LE);
        return Float16.toFloat((IntVector) h.convertShape(VectorOperators.S2I, I, 0));
    }

    private float scalar(int row, int c) {
        return Float16.toFloat(data.getShort((row * cols + c) * 2));
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
        for (; c < cols; c++) {
            s += scalar(row, c) * x[xo + c];
        }
        return s;
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            load(row, c).intoArray(dst, off + c);
        }
        for (; c < cols; c++) {
            dst[off + c] = scalar(row, c);
        }
    }
}
