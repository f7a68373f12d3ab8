package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.WidenedSlices.scales;

import io.tnsr.engine.gguf.GgmlType;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;

/**
 * Weights that are one int8 per element and one float scale per unit of elements, in row panels like F32's
 * ({@link PanelKernels}): Q8_0 (ggml block_q8_0: blocks of 32 elements, {@code [d: f16][qs: 32 x int8]},
 * element i = qs[i] * d; unit 32) and Q6_K (repacked by {@link Q6KBlocks} into {@code q6 - 32} per element and
 * {@code d * scale} per 16 elements; unit 16), and likewise IQ4_NL and IQ4_XS (unit 32), repacked by
 * {@link Int8Blocks}. Repacked at load from {@link PackedBlocks} into one byte array, in
 * panels of H = 2P rows (PanelMatrix), per panel and unit: the quants of H rows column after column,
 * {@code [unit][H]} bytes, then their H scales as little-endian floats. Lanes are rows.
 *
 * <p>Why the scales sit between the quants and not in an array of their own: a one-token call then reads one
 * sequential stream instead of two, which the hardware prefetcher follows better (about 15% more weights/s
 * streamed from memory; the same in cache). Why panels of 2P rows: one token then runs four independent FMA
 * chains instead of two (each row's order unchanged) and reads a whole cache line per column (about 10% more
 * weights/s in cache). Tokens in groups run over the panel in slices of P rows ({@link #k2x4}); a prefill first
 * turns each slice into floats, a chunk of columns at a time, for all its tokens ({@link #panelsTokens}).
 * docs/engine-speed.md has the measurements.
 *
 * <p>Summation order of a (row, token), one token or many: for each unit, {@code usum = fma(q[c], x[c], usum)}
 * over its columns in order from zero (q exact as a float), then {@code acc = fma(usum, scale, acc)} over the
 * units in order. The scale is applied once per unit, not once per weight: one-token decoding converts a byte
 * and does one FMA per weight (against a conversion, a multiply and an FMA in the row-major layout).
 */
final class Int8PanelMatrix extends PanelMatrix {
    private final GgmlType type;
    /** Elements per scale: 32 (Q8_0, IQ4_NL, IQ4_XS) or 16 (Q6_K); even. */
    private final int unit;

    /** Units per row (called blocks below). */
    private final int blocks;
    /** Rows per panel. */
    private static final int H = WidenedSlices.H;
    /** Bytes per panel and unit: its quants, [unit][H], then its scales, [H] floats. */
    private final int unitBytes;
    /**
     * How far ahead a one-token call reads ({@link #m1Ahead}): whole units, at least {@link #AHEAD} bytes (2304 for Q8_0
     * at 512 bits, which measured best of 1-16 KB on the Zen 5 guest, 2560 for Q6_K).
     */
    private final int aheadBytes;
    private static final int AHEAD = 2048;
    /**
     * [panels][units][unitBytes]: row r, column c at {@link #quant}, the scale of row r's unit b at {@link #scale};
     * rows past the last zero.
     */
    private final byte[] q;
    /** Scales are stored in the platform's byte order: {@link WidenedSlices#scales} reinterprets loaded bytes as floats. */
    private static final VarHandle FLOAT = MethodHandles.byteArrayViewVarHandle(float[].class, ByteOrder.nativeOrder());
    /** Tokens per {@link #k2x4} call. */
    private static final int TOKENS = 4;
    /** A prefill's loop and scratch. */
    private final WidenedSlices prefill;

    /** Q8_0: {@code packed} as {@link PackedBlocks#unpack} gives it. */
    static Int8PanelMatrix q8_0(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8PanelMatrix(name, rows, cols, GgmlType.Q8_0, 32, packed);
    }

    /** Q6_K: {@code packed} as {@link Q6KBlocks#repack} gives it. */
    static Int8PanelMatrix q6_K(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8PanelMatrix(name, rows, cols, GgmlType.Q6_K, 16, packed);
    }

    /** IQ4_NL: {@code packed} as {@link Int8Blocks#iq4_nl} gives it. */
    static Int8PanelMatrix iq4_nl(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8PanelMatrix(name, rows, cols, GgmlType.IQ4_NL, 32, packed);
    }

    /** IQ4_XS: {@code packed} as {@link Int8Blocks#iq4_xs} gives it. */
    static Int8PanelMatrix iq4_xs(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8PanelMatrix(name, rows, cols, GgmlType.IQ4_XS, 32, packed);
    }

    private Int8PanelMatrix(String name, int rows, int cols, GgmlType type, int unit, PackedBlocks packed) {
        super(name, rows, cols, TOKENS, H);
        this.type = type;
        this.unit = unit;
        this.blocks = cols / unit;
        this.unitBytes = unit * H + H * Float.BYTES;
        this.aheadBytes = aheadBytes(unitBytes);
        this.prefill = new WidenedSlices(this::widen, unit, unitBytes, unit * H);
        packed.requireShape(name, rows, blocks, unit);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * blocks * unitBytes)];
        byte[] quants = packed.quants(); // row r's quants at r * cols, one per element
        float[] scales = packed.scales();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                q[quant(r, c)] = quants[r * cols + c];
            }
            for (int b = 0; b < blocks; b++) {
                FLOAT.set(q, scale(r, b), scales[r * blocks + b]);
            }
        }
    }

    private static int aheadBytes(int unitBytes) {
        return (AHEAD + unitBytes - 1) / unitBytes * unitBytes;
    }

    /** Where row r's quant of column c is. */
    private int quant(int r, int c) {
        return ((r / H) * blocks + c / unit) * unitBytes + (c % unit) * H + r % H;
    }

    /** Where row r's scale of unit b is (4 bytes). */
    private int scale(int r, int b) {
        return ((r / H) * blocks + b) * unitBytes + unit * H + (r % H) * Float.BYTES;
    }

    /** Heap bytes a rows x cols matrix takes once repacked (its rows rounded up to whole panels), unit 16 or 32. */
    static long heapBytes(long rows, long cols, int unit) {
        return paddedRows(rows, H) * (cols + cols / unit * Float.BYTES);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Int8PanelMatrix(Int8PanelMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS, H);
        this.type = shared.type;
        this.unit = shared.unit;
        this.blocks = shared.blocks;
        this.unitBytes = shared.unitBytes;
        this.aheadBytes = shared.aheadBytes;
        this.q = shared.q;
        this.prefill = new WidenedSlices(this::widen, unit, unitBytes, unit * H);
    }

    @Override
    PanelMatrix view() {
        return new Int8PanelMatrix(this);
    }

    @Override
    public GgmlType type() {
        return type;
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * blocks * unitBytes, blocks * unitBytes);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        for (int p = from; p < to; p++) {
            m1(q, p * blocks * unitBytes, blocks, unit, x, xo, out, oo + p * panelRows);
        }
    }

    @Override
    protected boolean readsAhead() {
        return true;
    }

    @Override
    protected int wholePanelsReadingAhead(float[] x, int xo, float[] out, int oo, int from, int to) {
        int read = 0;
        for (int p = from; p < to; p++) {
            read ^= m1Ahead(q, p * blocks * unitBytes, blocks, unit, x, xo, out, oo + p * panelRows, aheadBytes);
        }
        return read;
    }

    /**
     * One panel of H rows (from {@code qo}) . one token: out[oo..oo+H). One column per trip, four vectors of L rows
     * each: four independent FMA chains, where a panel of 2L rows had two. Not eight (H = 8L: 29.4 G weights/s in
     * cache stand-alone): C2 ran out of nodes in this method and boxed (NodeCountInliningCutoff).
     */
    private static void m1(byte[] q, int qo, int blocks, int unit, float[] x, int xo, float[] out, int oo) {
        int unitBytes = unit * H + H * Float.BYTES;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        for (int b = 0; b < blocks; b++) {
            int bo = qo + b * unitBytes;
            int xb = xo + b * unit;
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // the unit's sums
            for (int c = 0; c < unit; c++) {
                FloatVector xv = FloatVector.broadcast(F, x[xb + c]);
                int o = bo + c * H;
                s0 = Blocks.signedBytes(q, o).fma(xv, s0);
                s1 = Blocks.signedBytes(q, o + L).fma(xv, s1);
                s2 = Blocks.signedBytes(q, o + 2 * L).fma(xv, s2);
                s3 = Blocks.signedBytes(q, o + 3 * L).fma(xv, s3);
            }
            int so = bo + unit * H; // the unit's H scales
            a0 = s0.fma(scales(q, so), a0);
            a1 = s1.fma(scales(q, so + L * Float.BYTES), a1);
            a2 = s2.fma(scales(q, so + 2 * L * Float.BYTES), a2);
            a3 = s3.fma(scales(q, so + 3 * L * Float.BYTES), a3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * L);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * L);
    }

    /**
     * {@link #m1}, the same sums in the same order, but each unit first reads one byte of every 64-byte line of the
     * unit {@code ahead} bytes on (into the next panel at the end of this one; none past the array); returns them
     * combined. Why: a column's line feeds about 18 operations, so the reorder window holds too few columns to keep
     * the memory busy, and on some hosts the hardware prefetcher does not follow this stream: on a 2-vCPU AMD EPYC
     * (Zen 5) guest a 16384 x 4096 Q8_0 matrix took 5.8-6.4 ms a call (12 GB/s) without these reads and 2.5-4.3 ms
     * with them, where in cache they cost about 30% (768 x 768: 14.5 against 11.3 us). Every line must be read: one
     * in two gained nothing. {@link PanelMatrix} times both ways per matrix and keeps the faster. A method of its
     * own, not a flag of m1, so that m1's compiled code and profile, which calls from the cache run, stay as they were
     * (with a flag, two whole-model runs with the reads forced read 112 and 123 tokens/s, against 173 and 182 for this
     * method; a small sample beside this host's spread from JVM to JVM).
     */
    private static int m1Ahead(byte[] q, int qo, int blocks, int unit, float[] x, int xo, float[] out, int oo,
                               int ahead) {
        int unitBytes = unit * H + H * Float.BYTES;
        int read = 0;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        for (int b = 0; b < blocks; b++) {
            int bo = qo + b * unitBytes;
            int xb = xo + b * unit;
            for (int i = bo + ahead, end = Math.min(i + unitBytes, q.length); i < end; i += 64) {
                read ^= q[i];
            }
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // the unit's sums
            for (int c = 0; c < unit; c++) {
                FloatVector xv = FloatVector.broadcast(F, x[xb + c]);
                int o = bo + c * H;
                s0 = Blocks.signedBytes(q, o).fma(xv, s0);
                s1 = Blocks.signedBytes(q, o + L).fma(xv, s1);
                s2 = Blocks.signedBytes(q, o + 2 * L).fma(xv, s2);
                s3 = Blocks.signedBytes(q, o + 3 * L).fma(xv, s3);
            }
            int so = bo + unit * H; // the unit's H scales
            a0 = s0.fma(scales(q, so), a0);
            a1 = s1.fma(scales(q, so + L * Float.BYTES), a1);
            a2 = s2.fma(scales(q, so + 2 * L * Float.BYTES), a2);
            a3 = s3.fma(scales(q, so + 3 * L * Float.BYTES), a3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * L);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * L);
        return read;
    }

    /** A new call: its x is regrouped when its widened path first needs it. */
    @Override
    protected void prepare(float[] x, int xo, int n) {
        prefill.newCall();
    }

    /**
     * A prefill ({@link WidenedSlices#serves}): the whole panels through {@link WidenedSlices}, each slice of P rows
     * turned into floats a chunk of columns at a time ({@link #widen}), one conversion per weight and call where
     * {@link #group} converts once per weight and group. Same sums in the same order, so the same bits. Fewer tokens
     * and a last partial panel take {@link #group}.
     */
    @Override
    protected void panelsTokens(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (!WidenedSlices.serves(n)) {
            groups(x, xo, n, out, oo, from, to);
            return;
        }
        int whole = Math.min(to, fullPanels);
        prefill.run(q, cols, rows, x, xo, n, out, oo, from, whole);
        groups(x, xo, n, out, oo, Math.max(from, whole), to);
    }

    /** {@link WidenedSlices.Widener#widen}: each quant as a float, exactly. */
    private void widen(int bo, int h, int width, float[] w) {
        byte[] q = this.q;
        for (int u = 0; u < width; u += unit, bo += unitBytes) {
            for (int c = 0; c < unit; c++) {
                int o = bo + c * H + h;
                Blocks.signedBytes(q, o).intoArray(w, (u + c) * P);
                Blocks.signedBytes(q, o + L).intoArray(w, (u + c) * P + L);
            }
        }
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        for (int h = 0; h < H; h += P) { // the panel's rows in slices of P, each from L2 after the first token group
            k2x4(p, h, x, xo, valid, out, oo + h, os);
        }
    }

    /**
     * Rows [h, h + P) of panel p . tokens j in [0, valid) (valid 1..4) of x (token j at {@code xo + j * cols}):
     * out[oo + j * os + i] for those P rows i. Missing tokens repeat the last valid one and are not stored. 16
     * accumulators (4 tokens x 2 vectors, block sums and totals): C2's limit (see TileKernels).
     */
    private void k2x4(int p, int h, float[] x, int xo, int valid, float[] out, int oo, int os) {
        byte[] q = this.q;
        int qo = p * blocks * unitBytes + h;
        int x0 = xo;
        int x1 = xo + Math.min(1, valid - 1) * cols;
        int x2 = xo + Math.min(2, valid - 1) * cols;
        int x3 = xo + Math.min(3, valid - 1) * cols;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < blocks; b++) {
            int bo = qo + b * unitBytes - b * unit * H; // column c's quants (of rows h..) at bo + c * H
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // block sums, rows h + [0, L)
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;                   // block sums, rows h + [L, P)
            for (int c = b * unit; c < b * unit + unit; c++) {
                FloatVector w0 = Blocks.signedBytes(q, bo + c * H);
                FloatVector w1 = Blocks.signedBytes(q, bo + c * H + L);
                FloatVector xv = FloatVector.broadcast(F, x[x0 + c]);
                s0 = w0.fma(xv, s0); t0 = w1.fma(xv, t0);
                xv = FloatVector.broadcast(F, x[x1 + c]);
                s1 = w0.fma(xv, s1); t1 = w1.fma(xv, t1);
                xv = FloatVector.broadcast(F, x[x2 + c]);
                s2 = w0.fma(xv, s2); t2 = w1.fma(xv, t2);
                xv = FloatVector.broadcast(F, x[x3 + c]);
                s3 = w0.fma(xv, s3); t3 = w1.fma(xv, t3);
            }
            int so = bo + (b + 1) * unit * H - h + h * Float.BYTES; // scales of rows h..
            FloatVector d0 = scales(q, so);
            FloatVector d1 = scales(q, so + L * Float.BYTES);
            a0 = s0.fma(d0, a0); b0 = t0.fma(d1, b0);
            a1 = s1.fma(d0, a1); b1 = t1.fma(d1, b1);
            a2 = s2.fma(d0, a2); b2 = t2.fma(d1, b2);
            a3 = s3.fma(d0, a3); b3 = t3.fma(d1, b3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
        if (valid > 2) {
            FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * os);
            FloatVector.broadcast(F, -0f).add(b2).intoArray(out, oo + 2 * os + L);
        }
        if (valid > 3) {
            FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * os);
            FloatVector.broadcast(F, -0f).add(b3).intoArray(out, oo + 3 * os + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        for (int c = 0; c < cols; c++) {
            dst[off + c] = q[quant(row, c)] * (float) FLOAT.get(q, scale(row, c / unit));
        }
    }
}
