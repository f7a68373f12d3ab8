package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/** F32 weights: 4 bytes per element. Decode is bound by memory bandwidth: every byte is read once per token. */
final class F32Matrix extends WeightMatrix {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    /** Tokens that share one pass over a weight row. */
    private static final int TOKEN_BLOCK = 4;

    F32Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
    }

    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    @Override
    public void matmul(float[] x, int xOff, int n, float[] out, int outOff) {
        for (int r = 0; r < rows; r++) {
            int rowByte = r * cols * 4;
            int t = 0;
            for (; t + TOKEN_BLOCK <= n; t += TOKEN_BLOCK) {
                dot4(rowByte, x, xOff + t * cols, out, outOff + t * rows + r);
            }
            for (; t < n; t++) {
                out[outOff + t * rows + r] = dot1(rowByte, x, xOff + t * cols);
            }
        }
    }

    /** One row against one token. The summation order here and in {@link #dot4} must stay the same. */
    private float dot1(int rowByte, float[] x, int xo) {
        int c = 0;
        float sum = 0f;
        if (cols >= F.length()) {
            FloatVector acc = FloatVector.zero(F);
            for (int bound = F.loopBound(cols); c < bound; c += F.length()) {
                acc = FloatVector.fromByteBuffer(F, data, rowByte + c * 4, LE).fma(FloatVector.fromArray(F, x, xo + c), acc);
            }
            sum = acc.reduceLanes(VectorOperators.ADD);
        }
        for (; c < cols; c++) {
            sum += data.getFloat(rowByte + c * 4) * x[xo + c];
        }
        return sum;
    }

    /** One row against 4 consecutive tokens: each weight vector is loaded once for the 4. */
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
                FloatVector w = FloatVector.fromByteBuffer(F, data, rowByte + c * 4, LE);
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
            float w = data.getFloat(rowByte + c * 4);
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
        int base = row * cols * 4;
        for (int c = 0; c < cols; c++) {
            out[off + c] = data.getFloat(base + c * 4);
        }
    }
}
