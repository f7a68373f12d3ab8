package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

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

/**
 * F16 weights: halves widened to floats with {@link Float16#toFloat(IntVector)}. Not a speed target: decode
 * runs through the tile ({@link WeightMatrix#matvec}'s default), one row at a time.
 */
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
