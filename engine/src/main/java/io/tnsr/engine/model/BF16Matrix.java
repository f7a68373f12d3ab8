package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.ShortBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * BF16 weights (bfloat16: the top 16 bits of an F32, so widening is exact), kept at 16 bits on the heap in row
 * panels of P rows like F32's ({@link PanelKernels}), half F32's bytes. Two columns share one int: panel p, column
 * pair k holds {@code [P]} ints, lane i = row p * P + i with column 2k in its low half and column 2k + 1 in its
 * high half (a last odd column's high half zero). One full-width int load then gives two columns of L rows, each
 * widened with one operation: {@code v << 16} (column 2k) and {@code v & 0xFFFF0000} (column 2k + 1), reinterpreted
 * as floats, where loading L halves and widening them (a short-to-int conversion and a shift, as {@link F16Matrix}
 * converts) takes two operations per L weights and half-width loads.
 *
 * <p>Several tokens widen one panel at a time into F32's panel layout and run F32's kernel on it ({@link #group}).
 *
 * <p>Measured (one thread, AVX-512, a shared and noisy host; docs/engine-speed.md): one token, 2048 x 768 in cache
 * 53 us against F32's 92, 4096 x 4096 from memory 1.0 ms against 3.2-4.2 (half the bytes to stream); 2048 x 768 with
 * 128 tokens 165 GFLOP/s against F32's 167, with 8 tokens 97 against 108 (the widening pass per call).
 *
 * <p>Summation order, F32's: per (row, token), {@code acc = fma(w[c], x[c], acc)} over the columns in order from
 * zero, for one token and for any grouping of tokens ({@link #group}), so a BF16 matrix computes what the F32 matrix
 * of the same (widened) values computes, bit for bit.
 */
final class BF16Matrix extends FloatPanelMatrix {
    private static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    private static final int HIGH = 0xFFFF0000;

    /** [panels][pairs][P]: rows p * P + i, columns 2k (low half) and 2k + 1 (high half) at (p * pairs + k) * P + i. */
    private final int[] w;
    /** Column pairs per row: (cols + 1) / 2. */
    private final int pairs;
    /** [cols][P]: one panel widened to floats for the token groups of {@link #group}; one compute thread uses a matrix. */
    private final float[] floats;

    /*
     * Warm-up with short rows, once per JVM, as PanelKernels does and for the reason it gives: a profile whose first
     * calls ran in on-stack-replaced code can compile the one-token kernels' stores as calls that box their accumulators.
     */
    static {
        int pairs = 2;
        int[] w = new int[5 * pairs * P];
        float[] x = new float[2 * pairs];
        float[] out = new float[5 * P];
        for (int i = 0; i < 3000; i++) {
            matvec(w, 0, 5, pairs, 2 * pairs, x, 0, out, 0);
        }
    }

    /** Repacks {@code data}: rows x cols little-endian BF16 values, row-major (the GGUF tensor). */
    BF16Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols);
        this.pairs = (cols + 1) / 2;
        this.floats = new float[cols * P];
        this.w = new int[arrayLength(name, rows, cols, (long) panels * pairs * P)];
        ShortBuffer s = data.duplicate().order(ByteOrder.LITTLE_ENDIAN).asShortBuffer();
        short[] row = new short[cols + 1];
        for (int r = 0; r < rows; r++) {
            s.get(r * cols, row, 0, cols);
            int base = (r / P) * pairs * P + r % P;
            for (int k = 0; k < pairs; k++) {
                w[base + k * P] = (row[2 * k] & 0xFFFF) | row[2 * k + 1] << 16;
            }
        }
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private BF16Matrix(BF16Matrix shared) {
        super(shared.name, shared.rows, shared.cols);
        this.pairs = shared.pairs;
        this.floats = new float[cols * P];
        this.w = shared.w;
    }

    @Override
    PanelMatrix view() {
        return new BF16Matrix(this);
    }

    /** Heap bytes a rows x cols BF16 matrix takes once repacked (its rows rounded up to whole panels, columns to pairs). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * ((cols + 1) / 2) * Integer.BYTES;
    }

    @Override
    public GgmlType type() {
        return GgmlType.BF16;
    }

    /** Column 2k of the pairs at {@code o} (their low halves), as floats. */
    private static FloatVector low(int[] w, int o) {
        return low(IntVector.fromArray(I, w, o));
    }

    /** Column 2k + 1 of the pairs at {@code o} (their high halves), as floats. */
    private static FloatVector high(int[] w, int o) {
        return high(IntVector.fromArray(I, w, o));
    }

    /** The low halves of pairs {@code v}, as floats. */
    private static FloatVector low(IntVector v) {
        return v.lanewise(VectorOperators.LSHL, 16).reinterpretAsFloats();
    }

    /** The high halves of pairs {@code v}, as floats. */
    private static FloatVector high(IntVector v) {
        return v.and(HIGH).reinterpretAsFloats();
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        matvec(w, from * pairs * P, to - from, pairs, cols, x, xo, out, oo + from * P);
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(w, p * pairs * P, pairs * P);
    }

    /**
     * One token over {@code panels} whole panels: two at a time (four FMA chains, two streams), then one. Not four at a
     * time as F32 does: with twice the vector operations per column (a load gives two columns, each widened by one
     * operation), a four-panel kernel went past C2's node budget (NodeCountInliningCutoff) and boxed its vectors,
     * 2.9 MB per 2048 x 768 call at 1/50 the speed. An odd last column of the two-panel groups is a pass of its own
     * (an FMA on the stored sums: the same bits), for the same reason.
     */
    private static void matvec(int[] w, int wo, int panels, int pairs, int cols, float[] x, int xo, float[] out, int oo) {
        int ps = pairs * P;
        int p = 0;
        for (; p + 2 <= panels; p += 2) {
            m2(w, wo + p * ps, pairs, cols, x, xo, out, oo + p * P);
        }
        if (cols % 2 != 0) { // m2 left out an odd last column: its FMA now, the last of each chain
            FloatVector xv = FloatVector.broadcast(F, x[xo + cols - 1]);
            for (int q = 0; q < p; q++) {
                int o = wo + q * ps + (pairs - 1) * P;
                int r = oo + q * P;
                low(w, o).fma(xv, FloatVector.fromArray(F, out, r)).intoArray(out, r);
                low(w, o + L).fma(xv, FloatVector.fromArray(F, out, r + L)).intoArray(out, r + L);
            }
        }
        for (; p < panels; p++) {
            m1(w, wo + p * ps, pairs, cols, x, xo, out, oo + p * P);
        }
    }

    /** Two panels (2P rows) . one token: out[oo..oo+2P). Each int vector is loaded once and gives both its columns. */
    private static void m2(int[] w, int wo, int pairs, int cols, float[] x, int xo, float[] out, int oo) {
        int ps = pairs * P;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        int whole = cols / 2;
        for (int k = 0; k < whole; k++) {
            int o = wo + k * P;
            FloatVector xl = FloatVector.broadcast(F, x[xo + 2 * k]);
            FloatVector xh = FloatVector.broadcast(F, x[xo + 2 * k + 1]);
            IntVector v = IntVector.fromArray(I, w, o);
            a0 = low(v).fma(xl, a0);
            a0 = high(v).fma(xh, a0);
            v = IntVector.fromArray(I, w, o + L);
            a1 = low(v).fma(xl, a1);
            a1 = high(v).fma(xh, a1);
            v = IntVector.fromArray(I, w, o + ps);
            a2 = low(v).fma(xl, a2);
            a2 = high(v).fma(xh, a2);
            v = IntVector.fromArray(I, w, o + ps + L);
            a3 = low(v).fma(xl, a3);
            a3 = high(v).fma(xh, a3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + P);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + P + L);
    }

    /** One panel (P rows) . one token: out[oo..oo+P). */
    private static void m1(int[] w, int wo, int pairs, int cols, float[] x, int xo, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        int whole = cols / 2;
        for (int k = 0; k < whole; k++) {
            int o = wo + k * P;
            FloatVector xv = FloatVector.broadcast(F, x[xo + 2 * k]);
            a0 = low(w, o).fma(xv, a0);
            a1 = low(w, o + L).fma(xv, a1);
            xv = FloatVector.broadcast(F, x[xo + 2 * k + 1]);
            a0 = high(w, o).fma(xv, a0);
            a1 = high(w, o + L).fma(xv, a1);
        }
        if (whole < pairs) {
            int o = wo + whole * P;
            FloatVector xv = FloatVector.broadcast(F, x[xo + 2 * whole]);
            a0 = low(w, o).fma(xv, a0);
            a1 = low(w, o + L).fma(xv, a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    /**
     * Several tokens: panel p is widened once per call (at its first token group, t0 = 0) into {@link #floats}, F32's
     * panel layout, and every group of tokens runs F32's kernels on it ({@link #floatGroup}, from L1/L2): the
     * same FMA chains in the same order as {@link #m1}'s on the same values. Widening in the group kernel instead (one
     * shift or mask per vector of weights, before its 16 FMAs) ran at 0.57x F32's speed (2048 x 768, 128 tokens:
     * 105 against 184 GFLOP/s); widening once per panel costs one pass over it per call.
     */
    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        if (t0 == 0) {
            widen(w, p * pairs * P, pairs, cols, floats);
        }
        floatGroup(floats, 0, t0, valid, out, oo, os);
    }

    /** The panel of pairs at {@code wo} as floats, F32's panel layout: column c at c * P. */
    private static void widen(int[] w, int wo, int pairs, int cols, float[] dst) {
        int whole = cols / 2;
        for (int k = 0; k < whole; k++) {
            int o = wo + k * P;
            IntVector v0 = IntVector.fromArray(I, w, o);
            IntVector v1 = IntVector.fromArray(I, w, o + L);
            low(v0).intoArray(dst, 2 * k * P);
            low(v1).intoArray(dst, 2 * k * P + L);
            high(v0).intoArray(dst, (2 * k + 1) * P);
            high(v1).intoArray(dst, (2 * k + 1) * P + L);
        }
        if (whole < pairs) {
            int o = wo + whole * P;
            low(w, o).intoArray(dst, 2 * whole * P);
            low(w, o + L).intoArray(dst, 2 * whole * P + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int base = (row / P) * pairs * P + row % P;
        for (int c = 0; c < cols; c++) {
            int v = w[base + (c >> 1) * P];
            dst[off + c] = Float.intBitsToFloat((c & 1) == 0 ? v << 16 : v & HIGH);
        }
    }
}
