package io.tnsr.engine.model;

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
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_PREFERRED;
    /** Half as many bits as a float vector: the same number of lanes, as shorts. */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(F.vectorBitSize() / 2));
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final int TOKEN_BLOCK = 4;

    F16Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
    }

    @Override
    public GgmlType type() {
        return GgmlType.F16;
    }

    private FloatVector load(int byteOffset) {
        ShortVector h = ShortVector.fromByteBuffer(S, data, byteOffset, LE);
        return Float16.toFloat((IntVector) h.convertShape(VectorOperators.S2I, I, 0));
    }

    private float scalar(int byteOffset) {
        return Float16.toFloat(data.getShort(byteOffset));
    }

    @Override
    public void matmul(float[] x, int xOff, int n, float[] out, int outOff) {
        for (int r = 0; r < rows; r++) {
            int rowByte = r * cols * 2;
            int t = 0;
            for (; t + TOKEN_BLOCK <= n; t += TOKEN_BLOCK) {
                dot4(rowByte, x, xOff + t * cols, out, outOff + t * rows + r);
            }
            for (; t < n; t++) {
                out[outOff + t * rows + r] = dot1(rowByte, x, xOff + t * cols);
            }
        }
    }

    private float dot1(int rowByte, float[] x, int xo) {
        int c = 0;
        float sum = 0f;
        if (cols >= F.length()) {
            FloatVector acc = FloatVector.zero(F);
            for (int bound = F.loopBound(cols); c < bound; c += F.length()) {
                acc = load(rowByte + c * 2).fma(FloatVector.fromArray(F, x, xo + c), acc);
            }
            sum = acc.reduceLanes(VectorOperators.ADD);
        }
        for (; c < cols; c++) {
            sum += scalar(rowByte + c * 2) * x[xo + c];
        }
        return sum;
    }

    private void dot4(int rowByte, float[] x, int xo, float[] out, int oo) {
        int c = 0;
        float s0 = 0f;
        float s1 = 0f;
        float s2 = 0f;
        float s3 = 0f;
        if (cols >= F.length()) {
            FloatVector a0 = FloatVector.zero(F);
            FloatVector a1 = a0;
            FloatVector a2 = a0;
            FloatVector a3 = a0;
            for (int bound = F.loopBound(cols); c < bound; c += F.length()) {
                FloatVector w = load(rowByte + c * 2);
                a0 = w.fma(FloatVector.fromArray(F, x, xo + c), a0);
                a1 = w.fma(FloatVector.fromArray(F, x, xo + cols + c), a1);
                a2 = w.fma(FloatVector.fromArray(F, x, xo + 2 * cols + c), a2);
                a3 = w.fma(FloatVector.fromArray(F, x, xo + 3 * cols + c), a3);
            }
            s0 = a0.reduceLanes(VectorOperators.ADD);
            s1 = a1.reduceLanes(VectorOperators.ADD);
            s2 = a2.reduceLanes(VectorOperators.ADD);
            s3 = a3.reduceLanes(VectorOperators.ADD);
        }
        for (; c < cols; c++) {
            float w = scalar(rowByte + c * 2);
            s0 += w * x[xo + c];
            s1 += w * x[xo + cols + c];
            s2 += w * x[xo + 2 * cols + c];
            s3 += w * x[xo + 3 * cols + c];
        }
        out[oo] = s0;
        out[oo + rows] = s1;
        out[oo + 2 * rows] = s2;
        out[oo + 3 * rows] = s3;
    }

    @Override
    public void readRow(int row, float[] out, int off) {
        int base = row * cols * 2;
        for (int c = 0; c < cols; c++) {
            out[off + c] = scalar(base + c * 2);
        }
    }
}
