package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.NARROW;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.PanelKernels.SIXTEEN_REGISTERS;
import static io.tnsr.engine.model.PanelKernels.WIDEN_CHUNK;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import java.util.Arrays;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * A prefill over panels of H = 2P rows whose weights are small integers with a float scale per unit of columns, the
 * scales of a panel's unit stored as floats after its weights ({@link Int8PanelMatrix}, {@link Iq4PanelMatrix}):
 * each slice of P rows of a whole panel is turned into floats a chunk of {@link PanelKernels#WIDEN_CHUNK} columns at
 * a time (by the layout's {@link Widener}), which then serves every group of twelve tokens from L1
 * ({@link #k2x12w}, x regrouped once per call by {@link TokenGroups}; six tokens, {@link #k2x6w}, where the vector
 * registers are 16): one conversion per weight and call, where a token group converts once per weight and group. The
 * tokens' totals wait in {@link #totals} between units and chunks, then go to out.
 *
 * <pre>
 * for each whole panel p, slice h:  totals = 0
 *     for each chunk of columns:    widen(chunk) -> wide;  for each group of GROUP tokens: k2x12w or k2x6w(wide, group) -> totals
 *     totals -> out
 * </pre>
 * One per matrix instance (views included): it holds the call's scratch. Steady state allocates nothing.
 */
final class WidenedSlices {
    /** How a layout turns a chunk of a slice into floats. */
    interface Widener {
        /**
         * Rows [h, h + P) of the {@code width} columns (whole units) whose first unit starts at byte {@code bo} of
         * the panels, as floats, each weight exactly: w[c * P + i] for column c of the chunk and row h + i.
         */
        void widen(int bo, int h, int width, float[] w);
    }

    /** Rows per panel. */
    static final int H = 2 * P;
    /**
     * Tokens per kernel call: twelve ({@link #k2x12w}: 24 unit sums), or six ({@link #k2x6w}: 12) where the vector
     * registers are 16 ({@link PanelKernels#SIXTEEN_REGISTERS}), so that the sums stay in registers.
     */
    static final int GROUP = SIXTEEN_REGISTERS ? NARROW : PanelKernels.WIDE;
    /** Bytes of one float vector: {@link #scales} loads them as bytes (the load every JDK from 17 on has). */
    private static final VectorSpecies<Byte> FLOAT_BYTES = VectorSpecies.of(byte.class, F.vectorShape());

    private final Widener layout;
    /** Elements per scale. */
    private final int unit;
    /** Bytes per panel and unit, its scales included. */
    private final int unitBytes;
    /** Where a unit's scales start, in bytes from the unit's start. */
    private final int scalesAt;
    /** [WIDEN_CHUNK][P]: the slice of a panel that {@link #k2x12w} reads, as floats (32 KB at 512 bits). */
    private final float[] wide = new float[WIDEN_CHUNK * P];
    /** This call's x in groups of {@link #GROUP} ({@link TokenGroups}), once a prefill needs it; null until then. */
    private float[] xg;
    /** [n][P], n rounded up to {@link #GROUP}: a slice's totals for the tokens of the call in progress; grown on demand. */
    private float[] totals = new float[0];

    WidenedSlices(Widener layout, int unit, int unitBytes, int scalesAt) {
        this.layout = layout;
        this.unit = unit;
        this.unitBytes = unitBytes;
        this.scalesAt = scalesAt;
    }

    /**
     * Whether an n-token call takes {@link #run} for its whole panels (a prefill: more than {@link
     * PanelKernels#WIDEN_FROM} tokens), on every host; fewer tokens take the layout's token groups.
     */
    static boolean serves(int n) {
        return n > PanelKernels.WIDEN_FROM;
    }

    /** A new call: its x is regrouped when {@link #run} first needs it. */
    void newCall() {
        xg = null;
    }

    /**
     * Whole panels [from, to) of {@code q} . tokens [0, n) of x (token t at {@code xo + t * cols}): out[oo + t * rows +
     * r] for their rows r. Same sums in the same order as the layout's token groups, so the same bits.
     */
    void run(byte[] q, int cols, int rows, float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (xg == null) { // once per call, however many ranges of panels it runs in
            xg = TokenGroups.of(x, xo, n, cols, GROUP); // the last group padded
        }
        int padded = (n + GROUP - 1) / GROUP * GROUP;
        if (totals.length < padded * P) {
            totals = new float[padded * P];
        }
        float[] tot = totals;
        int blocks = cols / unit;
        for (int p = from; p < to; p++) {
            for (int h = 0; h < H; h += P) {
                int r0 = p * H + h; // the slice's first row
                Arrays.fill(tot, 0, padded * P, 0f); // the totals start from zero
                for (int c0 = 0; c0 < cols; c0 += WIDEN_CHUNK) {
                    int c1 = Math.min(cols, c0 + WIDEN_CHUNK);
                    int bo = (p * blocks + c0 / unit) * unitBytes; // the chunk's first unit
                    layout.widen(bo, h, c1 - c0, wide);
                    int so = bo + scalesAt + h * Float.BYTES;
                    for (int t0 = 0; t0 < n; t0 += GROUP) { // each group's totals at t0 * P of tot
                        int xgo = TokenGroups.offset(t0, cols) + c0 * GROUP;
                        if (SIXTEEN_REGISTERS) {
                            k2x6w(wide, q, so, unitBytes, unit, c1 - c0, xg, xgo, tot, t0 * P);
                        } else {
                            k2x12w(wide, q, so, unitBytes, unit, c1 - c0, xg, xgo, tot, t0 * P);
                        }
                    }
                }
                for (int t = 0; t < n; t++) {
                    System.arraycopy(tot, t * P, out, oo + t * rows + r0, P);
                }
            }
        }
    }

    /**
     * A chunk of {@code width} columns of P rows, as {@link Widener#widen} left it in w, . the twelve tokens of a group of
     * {@link TokenGroups}' layout (column c's values at {@code xo + c * WIDE + j}): the token groups' sums ({@code k2x4} of either layout), unit after
     * unit (the unit's scales from byte {@code so} of q, the next unit's {@code unitBytes} on), each unit's sums
     * folded into the totals at {@code tot[to + j * P + i]} (row i of the slice; twelve tokens' room, lanes past the
     * call's tokens included). Same sums in the same order as k2x4, so the same bits.
     *
     * <p>Twelve tokens per weight load, as F32's {@link PanelKernels#k2x12}: 24 unit sums in registers, the totals
     * through L1 once per unit (24 loads, FMAs and stores per 768 FMAs), where four tokens per call (eight totals in
     * registers) loaded six values per eight FMAs.
     */
    private static void k2x12w(float[] w, byte[] q, int so, int unitBytes, int unit, int width, float[] x, int xo,
                               float[] tot, int to) {
        for (int u0 = 0; u0 < width; u0 += unit, so += unitBytes) {
            // unit sums per token: rows [0, L) in s, rows [L, P) in t
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
            FloatVector s8 = s0, s9 = s0, s10 = s0, s11 = s0;
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0, t4 = s0, t5 = s0, t6 = s0, t7 = s0;
            FloatVector t8 = s0, t9 = s0, t10 = s0, t11 = s0;
            for (int c0 = u0; c0 < u0 + unit; c0 += 16) { // sixteen columns per trip: a constant-count loop C2 unrolls
                for (int u = 0; u < 16; u++) {
                    int c = c0 + u;
                    int xc = xo + c * PanelKernels.WIDE;
                    FloatVector w0 = FloatVector.fromArray(F, w, c * P);
                    FloatVector w1 = FloatVector.fromArray(F, w, c * P + L);
                    FloatVector xv = FloatVector.broadcast(F, x[xc]);
                    s0 = w0.fma(xv, s0); t0 = w1.fma(xv, t0);
                    xv = FloatVector.broadcast(F, x[xc + 1]);
                    s1 = w0.fma(xv, s1); t1 = w1.fma(xv, t1);
                    xv = FloatVector.broadcast(F, x[xc + 2]);
                    s2 = w0.fma(xv, s2); t2 = w1.fma(xv, t2);
                    xv = FloatVector.broadcast(F, x[xc + 3]);
                    s3 = w0.fma(xv, s3); t3 = w1.fma(xv, t3);
                    xv = FloatVector.broadcast(F, x[xc + 4]);
                    s4 = w0.fma(xv, s4); t4 = w1.fma(xv, t4);
                    xv = FloatVector.broadcast(F, x[xc + 5]);
                    s5 = w0.fma(xv, s5); t5 = w1.fma(xv, t5);
                    xv = FloatVector.broadcast(F, x[xc + 6]);
                    s6 = w0.fma(xv, s6); t6 = w1.fma(xv, t6);
                    xv = FloatVector.broadcast(F, x[xc + 7]);
                    s7 = w0.fma(xv, s7); t7 = w1.fma(xv, t7);
                    xv = FloatVector.broadcast(F, x[xc + 8]);
                    s8 = w0.fma(xv, s8); t8 = w1.fma(xv, t8);
                    xv = FloatVector.broadcast(F, x[xc + 9]);
                    s9 = w0.fma(xv, s9); t9 = w1.fma(xv, t9);
                    xv = FloatVector.broadcast(F, x[xc + 10]);
                    s10 = w0.fma(xv, s10); t10 = w1.fma(xv, t10);
                    xv = FloatVector.broadcast(F, x[xc + 11]);
                    s11 = w0.fma(xv, s11); t11 = w1.fma(xv, t11);
                }
            }
            FloatVector d0 = scales(q, so);
            FloatVector d1 = scales(q, so + L * Float.BYTES);
            s0.fma(d0, FloatVector.fromArray(F, tot, to + 0 * P)).intoArray(tot, to + 0 * P);
            t0.fma(d1, FloatVector.fromArray(F, tot, to + 0 * P + L)).intoArray(tot, to + 0 * P + L);
            s1.fma(d0, FloatVector.fromArray(F, tot, to + 1 * P)).intoArray(tot, to + 1 * P);
            t1.fma(d1, FloatVector.fromArray(F, tot, to + 1 * P + L)).intoArray(tot, to + 1 * P + L);
            s2.fma(d0, FloatVector.fromArray(F, tot, to + 2 * P)).intoArray(tot, to + 2 * P);
            t2.fma(d1, FloatVector.fromArray(F, tot, to + 2 * P + L)).intoArray(tot, to + 2 * P + L);
            s3.fma(d0, FloatVector.fromArray(F, tot, to + 3 * P)).intoArray(tot, to + 3 * P);
            t3.fma(d1, FloatVector.fromArray(F, tot, to + 3 * P + L)).intoArray(tot, to + 3 * P + L);
            s4.fma(d0, FloatVector.fromArray(F, tot, to + 4 * P)).intoArray(tot, to + 4 * P);
            t4.fma(d1, FloatVector.fromArray(F, tot, to + 4 * P + L)).intoArray(tot, to + 4 * P + L);
            s5.fma(d0, FloatVector.fromArray(F, tot, to + 5 * P)).intoArray(tot, to + 5 * P);
            t5.fma(d1, FloatVector.fromArray(F, tot, to + 5 * P + L)).intoArray(tot, to + 5 * P + L);
            s6.fma(d0, FloatVector.fromArray(F, tot, to + 6 * P)).intoArray(tot, to + 6 * P);
            t6.fma(d1, FloatVector.fromArray(F, tot, to + 6 * P + L)).intoArray(tot, to + 6 * P + L);
            s7.fma(d0, FloatVector.fromArray(F, tot, to + 7 * P)).intoArray(tot, to + 7 * P);
            t7.fma(d1, FloatVector.fromArray(F, tot, to + 7 * P + L)).intoArray(tot, to + 7 * P + L);
            s8.fma(d0, FloatVector.fromArray(F, tot, to + 8 * P)).intoArray(tot, to + 8 * P);
            t8.fma(d1, FloatVector.fromArray(F, tot, to + 8 * P + L)).intoArray(tot, to + 8 * P + L);
            s9.fma(d0, FloatVector.fromArray(F, tot, to + 9 * P)).intoArray(tot, to + 9 * P);
            t9.fma(d1, FloatVector.fromArray(F, tot, to + 9 * P + L)).intoArray(tot, to + 9 * P + L);
            s10.fma(d0, FloatVector.fromArray(F, tot, to + 10 * P)).intoArray(tot, to + 10 * P);
            t10.fma(d1, FloatVector.fromArray(F, tot, to + 10 * P + L)).intoArray(tot, to + 10 * P + L);
            s11.fma(d0, FloatVector.fromArray(F, tot, to + 11 * P)).intoArray(tot, to + 11 * P);
            t11.fma(d1, FloatVector.fromArray(F, tot, to + 11 * P + L)).intoArray(tot, to + 11 * P + L);
        }
    }

    /**
     * {@link #k2x12w} for a group of six tokens ({@link PanelKernels#NARROW}; column c's six values at {@code xo + c *
     * NARROW + j}), where the vector registers are 16: 12 unit sums, two weights and a broadcast take 15 of them, so
     * nothing spills, and the totals go through L1 once per unit (12 loads, FMAs and stores per 192 FMAs). Against the
     * layout's token groups of four, which convert each weight in every group, this converts it once per call. Same
     * sums in the same order as the token groups, so the same bits.
     */
    private static void k2x6w(float[] w, byte[] q, int so, int unitBytes, int unit, int width, float[] x, int xo,
                               float[] tot, int to) {
        for (int u0 = 0; u0 < width; u0 += unit, so += unitBytes) {
            // unit sums per token: rows [0, L) in s, rows [L, P) in t
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0;
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0, t4 = s0, t5 = s0;
            for (int c = u0; c < u0 + unit; c++) { // one counted loop per unit, which C2 unrolls (nested, it did not)
                int xc = xo + c * NARROW;
                FloatVector w0 = FloatVector.fromArray(F, w, c * P);
                FloatVector w1 = FloatVector.fromArray(F, w, c * P + L);
                FloatVector xv = FloatVector.broadcast(F, x[xc]);
                s0 = w0.fma(xv, s0); t0 = w1.fma(xv, t0);
                xv = FloatVector.broadcast(F, x[xc + 1]);
                s1 = w0.fma(xv, s1); t1 = w1.fma(xv, t1);
                xv = FloatVector.broadcast(F, x[xc + 2]);
                s2 = w0.fma(xv, s2); t2 = w1.fma(xv, t2);
                xv = FloatVector.broadcast(F, x[xc + 3]);
                s3 = w0.fma(xv, s3); t3 = w1.fma(xv, t3);
                xv = FloatVector.broadcast(F, x[xc + 4]);
                s4 = w0.fma(xv, s4); t4 = w1.fma(xv, t4);
                xv = FloatVector.broadcast(F, x[xc + 5]);
                s5 = w0.fma(xv, s5); t5 = w1.fma(xv, t5);
            }
            FloatVector d0 = scales(q, so);
            FloatVector d1 = scales(q, so + L * Float.BYTES);
            s0.fma(d0, FloatVector.fromArray(F, tot, to + 0 * P)).intoArray(tot, to + 0 * P);
            t0.fma(d1, FloatVector.fromArray(F, tot, to + 0 * P + L)).intoArray(tot, to + 0 * P + L);
            s1.fma(d0, FloatVector.fromArray(F, tot, to + 1 * P)).intoArray(tot, to + 1 * P);
            t1.fma(d1, FloatVector.fromArray(F, tot, to + 1 * P + L)).intoArray(tot, to + 1 * P + L);
            s2.fma(d0, FloatVector.fromArray(F, tot, to + 2 * P)).intoArray(tot, to + 2 * P);
            t2.fma(d1, FloatVector.fromArray(F, tot, to + 2 * P + L)).intoArray(tot, to + 2 * P + L);
            s3.fma(d0, FloatVector.fromArray(F, tot, to + 3 * P)).intoArray(tot, to + 3 * P);
            t3.fma(d1, FloatVector.fromArray(F, tot, to + 3 * P + L)).intoArray(tot, to + 3 * P + L);
            s4.fma(d0, FloatVector.fromArray(F, tot, to + 4 * P)).intoArray(tot, to + 4 * P);
            t4.fma(d1, FloatVector.fromArray(F, tot, to + 4 * P + L)).intoArray(tot, to + 4 * P + L);
            s5.fma(d0, FloatVector.fromArray(F, tot, to + 5 * P)).intoArray(tot, to + 5 * P);
            t5.fma(d1, FloatVector.fromArray(F, tot, to + 5 * P + L)).intoArray(tot, to + 5 * P + L);
        }
    }

    /** L scales from byte {@code off} of q (floats in the platform's byte order). */
    static FloatVector scales(byte[] q, int off) {
        return ByteVector.fromArray(FLOAT_BYTES, q, off).reinterpretAsFloats();
    }
}
