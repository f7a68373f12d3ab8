package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.TileKernels.sum;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import jdk.incubator.vector.FloatVector;

/**
 * F32 weights: 4 bytes per element, row r at byte r * cols * 4. Decode is bound by memory bandwidth (every
 * byte read once per token): {@link #matvec} streams one row at a time, the fastest access pattern measured.
 */
final class F32Matrix extends WeightMatrix {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** The same bytes as floats, for {@link #decodeRow}'s bulk copy. */
    private final FloatBuffer floats;

    F32Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols, data);
        this.floats = data.duplicate().order(LE).asFloatBuffer();
    }

    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    private static FloatVector load(ByteBuffer data, int byteOffset) {
        return FloatVector.fromByteBuffer(F, data, byteOffset, LE);
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        ByteBuffer data = this.data; // a local: C2 then keeps the buffer's fields in registers
        int bound = F.loopBound(cols);
        for (int r = 0; r < rows; r++) {
            FloatVector a = FloatVector.zero(F); // one chain: enough to stream at memory speed
            int rb = r * cols * 4;
            int c = 0;
            for (; c < bound; c += L) {
                a = load(data, rb + c * 4).fma(FloatVector.fromArray(F, x, xo + c), a);
            }
            out[oo + r] = tail(sum(a), r, x, xo, c);
        }
    }

    /** s + the products of columns [c, cols) of a row and x, in column order. */
    private float tail(float s, int row, float[] x, int xo, int c) {
        for (int base = row * cols * 4; c < cols; c++) {
            s += data.getFloat(base + c * 4) * x[xo + c];
        }
        return s;
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        floats.get(row * cols, dst, off, cols); // one bulk copy (memcpy): faster than a vector load/store loop
    }
}
