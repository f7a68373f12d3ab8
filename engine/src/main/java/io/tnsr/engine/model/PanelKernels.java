package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.lang.management.ManagementFactory;
import jdk.incubator.vector.FloatVector;

/**
 * F32's matrix kernels over <em>row panels</em> ({@link F32Matrix}; the quantized panel types have their own, with
 * the same shape, and {@link PanelMatrix} the loops around them): panel p holds rows [p * P, p * P + P) column
 * after column, {@code [cols][P]} floats, so one vector load is L rows' weights of one column and the vector lanes
 * are rows. A (row, token) product is then one FMA chain over the columns in order,
 * {@code acc = fma(w[c], x[c], acc)} from zero, per lane: no lane reduction, and the same order for one token
 * ({@link #matvec}) and for any grouping of tokens ({@link #k2x8}), so results never depend on the batch.
 * {@code Math.fma} over the columns in order computes the same bits in scalar code.
 *
 * <p>Why lanes are rows: the row-major kernels ({@link TileKernels}) end every (row, token) with a 16-lane
 * reduction and, for several tokens, copy each weight row into an L1 tile first; here a weight is loaded once
 * per panel and serves 8 tokens straight from the panel, and x is broadcast one element at a time: batched
 * F32 decode and prefill run at 2.5-3x the row-major kernels' speed, prefill near the FMA peak
 * (docs/engine-speed.md).
 *
 * <p>Calling pattern (one compute thread; the panel array is read-only and may be shared):
 * <pre>{@code
 * xt = TokenGroups.of(x, 0, n, cols)         // x regrouped once per call
 * for (p = 0; p < panels; p++)                // each panel read from memory once...
 *     for (t0 = 0; t0 < n; t0 += TOKENS)     // ...then from L2 for every further group of 8 tokens
 *         k2x8(w, p * cols * P, cols, xt, t0 * cols, min(TOKENS, n - t0), out, t0 * rows + p * P, rows);
 * }</pre>
 * and for a few tokens (F32Matrix: batched decode), four panels at a time, as four streams:
 * <pre>{@code
 * for (g = 0; g < panels / 4; g++)               // zero out's rows of the four panels, then
 *     for (c0 = 0; c0 < cols; c0 += CHUNK)       // a chunk of columns read from memory once...
 *         for (t0 = 0; t0 < n; t0 += 2)          // ...then from L2 for every further pair of tokens
 *             k8x2(w, g * 4 * cols * P, cols, c0, min(cols, c0 + CHUNK), x, t0 * cols, min(2, n - t0), out,
 *                  t0 * rows + g * 4 * P, rows);
 * }</pre>
 * Hazards: the kernels always store whole panels (P outputs per token), so a last partial panel goes through a
 * scratch array and only its valid rows are copied out; and their 16 accumulators are C2's (JDK 17) limit:
 * more, and it spills or boxes vectors (see TileKernels).
 *
 * <p>Every kernel here and in the other panel types stores an accumulator as
 * {@code FloatVector.broadcast(F, -0f).add(acc).intoArray(...)}: -0 + a is a, bit for bit, and the store's receiver
 * is then a fresh vector whose class C2 knows without a profile. An accumulator leaving its loop is a phi of the
 * declared type FloatVector, and a store called on it is inlined only with a receiver profile; a JVM that compiled a
 * kernel without one boxes the accumulators at every call, for good (a one-stage pipeline in CI once allocated 44 KB
 * per frame; run with {@code -XX:TypeProfileWidth=0}, such stores are among the sites that allocate).
 */
final class PanelKernels {
    /** Rows per panel: two vectors. */
    static final int P = 2 * L;
    /** Tokens per {@link #k2x8} call. */
    static final int TOKENS = 8;
    /** Tokens per {@link #k2x12} call. */
    static final int WIDE = 12;
    /** Tokens per {@link #k2x6} call: the groups where the vector registers are 16. */
    static final int NARROW = 6;
    /** Tokens per {@link #k2x4} call: where the vector registers are 16, the last few tokens of a call. */
    static final int FEW = 4;
    /**
     * Whether C2 has 16 vector registers here rather than 32: x86 without AVX-512 ({@code -XX:UseAVX} below 3). There
     * {@link #k2x12}'s 24 accumulators and the int8 panels' twelve-token sums spill: float panels run groups of six
     * tokens ({@link #k2x6}), the other types their own groups, without the widened prefill path (with
     * {@code -XX:UseAVX=2} on an AVX-512 Xeon, 2048 x 768 at 128 tokens took Q8_0 5.5-5.8 ms through its groups of
     * four against 6.9-7.0 widened; docs/engine-speed.md).
     */
    static final boolean SIXTEEN_REGISTERS = sixteenRegisters();
    /**
     * Columns of a panel that a widened prefill (the int8 panels', Q4_0's) turns into floats at a time: whole blocks of
     * 16 and 32, a 32 KB scratch at 512 bits that every group of {@link #WIDE} tokens then reads from L1.
     */
    static final int WIDEN_CHUNK = 256;
    /**
     * Calls over more tokens than this take a widened prefill path ({@link #widens}, {@link WidenedSlices#serves}):
     * with 16 tokens the conversion pass cost more than it saved (docs/engine-speed.md).
     */
    static final int WIDEN_FROM = 32;

    private PanelKernels() {
    }

    /**
     * Whether an n-token call over Q4_0's or Q5_0's panels takes their widened prefill path: a prefill, on a host where
     * twelve tokens' sums stay in registers (not {@link #SIXTEEN_REGISTERS}; there their integer token groups ran
     * faster than six tokens widened). The int8 and IQ4 panels ask {@link WidenedSlices#serves}.
     */
    static boolean widens(int n) {
        return n > WIDEN_FROM && !SIXTEEN_REGISTERS;
    }

    private static boolean sixteenRegisters() {
        try {
            String avx = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class).getVMOption("UseAVX").getValue();
            return Integer.parseInt(avx) < 3;
        } catch (IllegalArgumentException e) { // no such option: not x86 (AArch64 has 32 vector registers)
            return false;
        }
    }

    /*
     * Warm-up with short rows, once per JVM. With long rows first (4096 columns), C2 compiled m4 from a profile in
     * which nothing after its column loop had run (the first calls went into on-stack-replaced code at the loop's
     * back edge, so the level-3 code never reached its stores): the stores were compiled as virtual calls that box
     * the accumulators, 768 bytes per call, 24 KB per 4096 x 4096 matvec, for good (PrintInlining: "failed to
     * inline (intrinsic)" at VectorSupport.store). Rows of 768 first, or -XX:-UseOnStackReplacement, gave 0 bytes.
     * Calling matvec on tiny panels a few thousand times here (well under a millisecond) puts m4's and m1's exits
     * in the profile before any real matrix runs. k2x8 is not warmed: it does not need it (0 bytes at 4096 columns)
     * and a short-trip profile cost F32 prefill and batched decode 5-12%. k8x2 is, for the same reason as m4: unwarmed,
     * one engine-bench JVM in about four boxed its accumulators, 1.8 MB per batched token, for good.
     */
    static {
        int cols = 4;
        float[] w = new float[5 * (cols + 1) * P];   // five panels of up to cols + 1 columns
        float[] x = new float[TOKENS * (cols + 1)];  // eight tokens
        float[] out = new float[TOKENS * 5 * P];
        for (int i = 0; i < 3000; i++) {
            matvec(w, 0, 5, cols, x, 0, out, 0); // one group of four panels and one panel alone
            k8x2(w, 0, cols, 0, cols, x, 0, 1 + i % 2, out, 0, 4 * P); // one token and two
        }
    }

    /**
     * One token: out[oo + r] = W[r] . x[xo..xo+cols) for the rows of {@code panels} whole panels from panel
     * offset {@code wo}, four panels at a time (eight FMA chains and four streams: 30 GB/s from the heap against
     * 16 for one panel at a time, whose two chains wait on FMA latency).
     *
     * @param w [panels][cols][P]
     */
    static void matvec(float[] w, int wo, int panels, int cols, float[] x, int xo, float[] out, int oo) {
        int ps = cols * P; // floats per panel
        int p = 0;
        for (; p + 4 <= panels; p += 4) {
            m4(w, wo + p * ps, cols, x, xo, out, oo + p * P);
        }
        for (; p < panels; p++) {
            m1(w, wo + p * ps, cols, x, xo, out, oo + p * P);
        }
    }

    /** Four panels (4P rows) . one token: out[oo..oo+4P). */
    private static void m4(float[] w, int wo, int cols, float[] x, int xo, float[] out, int oo) {
        int ps = cols * P;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        for (int c = 0; c < cols; c++) {
            FloatVector xv = FloatVector.broadcast(F, x[xo + c]);
            int o = wo + c * P;
            a0 = FloatVector.fromArray(F, w, o).fma(xv, a0);
            a1 = FloatVector.fromArray(F, w, o + L).fma(xv, a1);
            a2 = FloatVector.fromArray(F, w, o + ps).fma(xv, a2);
            a3 = FloatVector.fromArray(F, w, o + ps + L).fma(xv, a3);
            a4 = FloatVector.fromArray(F, w, o + 2 * ps).fma(xv, a4);
            a5 = FloatVector.fromArray(F, w, o + 2 * ps + L).fma(xv, a5);
            a6 = FloatVector.fromArray(F, w, o + 3 * ps).fma(xv, a6);
            a7 = FloatVector.fromArray(F, w, o + 3 * ps + L).fma(xv, a7);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + P);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + P + L);
        FloatVector.broadcast(F, -0f).add(a4).intoArray(out, oo + 2 * P);
        FloatVector.broadcast(F, -0f).add(a5).intoArray(out, oo + 2 * P + L);
        FloatVector.broadcast(F, -0f).add(a6).intoArray(out, oo + 3 * P);
        FloatVector.broadcast(F, -0f).add(a7).intoArray(out, oo + 3 * P + L);
    }

    /** One panel (P rows) . one token: out[oo..oo+P). */
    static void m1(float[] w, int wo, int cols, float[] x, int xo, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int c = 0; c < cols; c++) {
            FloatVector xv = FloatVector.broadcast(F, x[xo + c]);
            a0 = FloatVector.fromArray(F, w, wo + c * P).fma(xv, a0);
            a1 = FloatVector.fromArray(F, w, wo + c * P + L).fma(xv, a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    /** Columns per {@link #k8x2} call: four panels' share of them (128 KB) stays in L2 for the next pairs of tokens. */
    static final int CHUNK = 256;

    /**
     * Four panels (from {@code wo}, {@code cols} columns each) . tokens j in [0, valid) (valid 1..2; token j at
     * {@code xo + j * cols}), over columns [c0, c1) only: out[oo + j * os + i] for the 4P rows i. The sums start from
     * what out holds (zeros before the first chunk, then the previous columns' sums, stored by the call before): the same FMA
     * chain per (row, token) over the columns in order as {@link #m1} and {@link #k2x8}, cut at c1 and resumed, so
     * the same bits. A missing second token repeats the first and is not stored.
     *
     * <p>For a few tokens (batched decode), where the weights come from memory once per call: four panels are four
     * streams, as {@link #m4} reads one token's (k2x8's one panel at a time read 16 GB/s); a chunk of columns keeps
     * the four panels' part in L2 for the other pairs of tokens, at any width of the matrix. Only where the vector
     * registers are 32: with 16 its sums spill ({@link F32Matrix#panelsTokens}).
     */
    static void k8x2(float[] w, int wo, int cols, int c0, int c1, float[] x, int xo, int valid, float[] out, int oo,
                     int os) {
        int ps = cols * P;
        int x0 = xo;
        int x1 = xo + Math.min(1, valid - 1) * cols;
        int o1 = oo + Math.min(1, valid - 1) * os;
        // The sums so far, from out (zeros before the first chunk): fresh loads, never a phi of two branches (a merged
        // vector's class is unknown to C2, which then boxes it).
        FloatVector a0 = FloatVector.fromArray(F, out, oo);             // token 0: rows [0, L), [L, P) of panels 0..3
        FloatVector a1 = FloatVector.fromArray(F, out, oo + L);
        FloatVector a2 = FloatVector.fromArray(F, out, oo + P);
        FloatVector a3 = FloatVector.fromArray(F, out, oo + P + L);
        FloatVector a4 = FloatVector.fromArray(F, out, oo + 2 * P);
        FloatVector a5 = FloatVector.fromArray(F, out, oo + 2 * P + L);
        FloatVector a6 = FloatVector.fromArray(F, out, oo + 3 * P);
        FloatVector a7 = FloatVector.fromArray(F, out, oo + 3 * P + L);
        FloatVector b0 = FloatVector.fromArray(F, out, o1);             // token 1
        FloatVector b1 = FloatVector.fromArray(F, out, o1 + L);
        FloatVector b2 = FloatVector.fromArray(F, out, o1 + P);
        FloatVector b3 = FloatVector.fromArray(F, out, o1 + P + L);
        FloatVector b4 = FloatVector.fromArray(F, out, o1 + 2 * P);
        FloatVector b5 = FloatVector.fromArray(F, out, o1 + 2 * P + L);
        FloatVector b6 = FloatVector.fromArray(F, out, o1 + 3 * P);
        FloatVector b7 = FloatVector.fromArray(F, out, o1 + 3 * P + L);
        for (int c = c0; c < c1; c++) {
            int o = wo + c * P;
            FloatVector xv = FloatVector.broadcast(F, x[x0 + c]);
            FloatVector yv = FloatVector.broadcast(F, x[x1 + c]);
            FloatVector w0 = FloatVector.fromArray(F, w, o);
            FloatVector w1 = FloatVector.fromArray(F, w, o + L);
            a0 = w0.fma(xv, a0); b0 = w0.fma(yv, b0);
            a1 = w1.fma(xv, a1); b1 = w1.fma(yv, b1);
            w0 = FloatVector.fromArray(F, w, o + ps);
            w1 = FloatVector.fromArray(F, w, o + ps + L);
            a2 = w0.fma(xv, a2); b2 = w0.fma(yv, b2);
            a3 = w1.fma(xv, a3); b3 = w1.fma(yv, b3);
            w0 = FloatVector.fromArray(F, w, o + 2 * ps);
            w1 = FloatVector.fromArray(F, w, o + 2 * ps + L);
            a4 = w0.fma(xv, a4); b4 = w0.fma(yv, b4);
            a5 = w1.fma(xv, a5); b5 = w1.fma(yv, b5);
            w0 = FloatVector.fromArray(F, w, o + 3 * ps);
            w1 = FloatVector.fromArray(F, w, o + 3 * ps + L);
            a6 = w0.fma(xv, a6); b6 = w0.fma(yv, b6);
            a7 = w1.fma(xv, a7); b7 = w1.fma(yv, b7);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + P);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + P + L);
        FloatVector.broadcast(F, -0f).add(a4).intoArray(out, oo + 2 * P);
        FloatVector.broadcast(F, -0f).add(a5).intoArray(out, oo + 2 * P + L);
        FloatVector.broadcast(F, -0f).add(a6).intoArray(out, oo + 3 * P);
        FloatVector.broadcast(F, -0f).add(a7).intoArray(out, oo + 3 * P + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(b0).intoArray(out, o1);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, o1 + L);
            FloatVector.broadcast(F, -0f).add(b2).intoArray(out, o1 + P);
            FloatVector.broadcast(F, -0f).add(b3).intoArray(out, o1 + P + L);
            FloatVector.broadcast(F, -0f).add(b4).intoArray(out, o1 + 2 * P);
            FloatVector.broadcast(F, -0f).add(b5).intoArray(out, o1 + 2 * P + L);
            FloatVector.broadcast(F, -0f).add(b6).intoArray(out, o1 + 3 * P);
            FloatVector.broadcast(F, -0f).add(b7).intoArray(out, o1 + 3 * P + L);
        }
    }

    /**
     * One panel (from {@code wo}) . tokens j in [0, valid) (valid 1..8) of a token group in {@link TokenGroups}'
     * layout (column c's eight values at {@code xo + c * TOKENS + j}): out[oo + j * os + i] for the panel's P rows i.
     * Lanes past {@code valid} hold the last valid token again and are not stored.
     *
     * <p>Why the group layout: the eight broadcasts of a column then read one 32-byte run at one address plus
     * constants, where eight token rows needed eight offsets live in registers and eight bounds checks; on a 2-vCPU
     * Intel Xeon (two 512-bit FMA ports) that took the kernel from 109-126 to 133-146 GFLOP/s at 128 tokens
     * (docs/engine-speed.md).
     */
    static void k2x8(float[] w, int wo, int cols, float[] x, int xo, int valid, float[] out, int oo, int os) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; // rows [0, L)
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;                   // rows [L, P)
        // Two columns per trip, as a constant-count inner loop that C2 unrolls: 114 vs 95 GFLOP/s on a 2048 x 768
        // panel set with 128 tokens (loop overhead and bounds checks per column). A count that depends on cols
        // (to take an odd last column in the same loop) is not unrolled: 104. Hence the one-column copy below.
        int even = cols & ~1;
        for (int c0 = 0; c0 < even; c0 += 2) {
            for (int u = 0; u < 2; u++) {
                int c = c0 + u;
                int xc = xo + c * TOKENS;
                FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
                FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
                FloatVector xv = FloatVector.broadcast(F, x[xc]);
                a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
                xv = FloatVector.broadcast(F, x[xc + 1]);
                a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
                xv = FloatVector.broadcast(F, x[xc + 2]);
                a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
                xv = FloatVector.broadcast(F, x[xc + 3]);
                a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
                xv = FloatVector.broadcast(F, x[xc + 4]);
                a4 = w0.fma(xv, a4); b4 = w1.fma(xv, b4);
                xv = FloatVector.broadcast(F, x[xc + 5]);
                a5 = w0.fma(xv, a5); b5 = w1.fma(xv, b5);
                xv = FloatVector.broadcast(F, x[xc + 6]);
                a6 = w0.fma(xv, a6); b6 = w1.fma(xv, b6);
                xv = FloatVector.broadcast(F, x[xc + 7]);
                a7 = w0.fma(xv, a7); b7 = w1.fma(xv, b7);
            }
        }
        if (even < cols) { // the odd last column: the same step
            int c = even;
            int xc = xo + c * TOKENS;
            FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
            FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
            FloatVector xv = FloatVector.broadcast(F, x[xc]);
            a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
            xv = FloatVector.broadcast(F, x[xc + 1]);
            a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
            xv = FloatVector.broadcast(F, x[xc + 2]);
            a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
            xv = FloatVector.broadcast(F, x[xc + 3]);
            a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
            xv = FloatVector.broadcast(F, x[xc + 4]);
            a4 = w0.fma(xv, a4); b4 = w1.fma(xv, b4);
            xv = FloatVector.broadcast(F, x[xc + 5]);
            a5 = w0.fma(xv, a5); b5 = w1.fma(xv, b5);
            xv = FloatVector.broadcast(F, x[xc + 6]);
            a6 = w0.fma(xv, a6); b6 = w1.fma(xv, b6);
            xv = FloatVector.broadcast(F, x[xc + 7]);
            a7 = w0.fma(xv, a7); b7 = w1.fma(xv, b7);
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
        if (valid > 4) {
            FloatVector.broadcast(F, -0f).add(a4).intoArray(out, oo + 4 * os);
            FloatVector.broadcast(F, -0f).add(b4).intoArray(out, oo + 4 * os + L);
        }
        if (valid > 5) {
            FloatVector.broadcast(F, -0f).add(a5).intoArray(out, oo + 5 * os);
            FloatVector.broadcast(F, -0f).add(b5).intoArray(out, oo + 5 * os + L);
        }
        if (valid > 6) {
            FloatVector.broadcast(F, -0f).add(a6).intoArray(out, oo + 6 * os);
            FloatVector.broadcast(F, -0f).add(b6).intoArray(out, oo + 6 * os + L);
        }
        if (valid > 7) {
            FloatVector.broadcast(F, -0f).add(a7).intoArray(out, oo + 7 * os);
            FloatVector.broadcast(F, -0f).add(b7).intoArray(out, oo + 7 * os + L);
        }
    }

    /**
     * {@link #k2x8} for a group of {@link #NARROW} tokens (valid 1..6; column c's six values at
     * {@code xo + c * NARROW + j}), for hosts with 16 vector registers ({@link #SIXTEEN_REGISTERS}): 12 sums, two
     * weights and two broadcasts fit in them, and C2 (JDK 17) keeps them there, a column per trip with two checks of
     * x's bounds. The kernel before, eight tokens straight from x two columns per trip, kept 8 of its 16 sums on the
     * stack (a load and a store per two FMAs) and checked eight x offsets per trip: on an AMD EPYC Zen 3 (AVX2), 2048 x
     * 768 at 128 tokens took 11.1-15.2 ms that way against 7.0-11.1 here (docs/engine-speed.md). The same FMA chain
     * per (row, token) as every other kernel here, so the same bits.
     */
    static void k2x6(float[] w, int wo, int cols, float[] x, int xo, int valid, float[] out, int oo, int os) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0; // rows [0, L)
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0;                   // rows [L, P)
        for (int c = 0; c < cols; c++) {
            int xc = xo + c * NARROW;
            FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
            FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
            FloatVector xv = FloatVector.broadcast(F, x[xc]);
            a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
            xv = FloatVector.broadcast(F, x[xc + 1]);
            a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
            xv = FloatVector.broadcast(F, x[xc + 2]);
            a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
            xv = FloatVector.broadcast(F, x[xc + 3]);
            a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
            xv = FloatVector.broadcast(F, x[xc + 4]);
            a4 = w0.fma(xv, a4); b4 = w1.fma(xv, b4);
            xv = FloatVector.broadcast(F, x[xc + 5]);
            a5 = w0.fma(xv, a5); b5 = w1.fma(xv, b5);
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
        if (valid > 4) {
            FloatVector.broadcast(F, -0f).add(a4).intoArray(out, oo + 4 * os);
            FloatVector.broadcast(F, -0f).add(b4).intoArray(out, oo + 4 * os + L);
        }
        if (valid > 5) {
            FloatVector.broadcast(F, -0f).add(a5).intoArray(out, oo + 5 * os);
            FloatVector.broadcast(F, -0f).add(b5).intoArray(out, oo + 5 * os + L);
        }
    }

    /**
     * {@link #k2x6} for a group of {@link #FEW} tokens (valid 1..4; column c's four values at {@code xo + c * FEW + j}):
     * where the vector registers are 16, the last tokens of a call that groups of six would leave a short group of
     * ({@link TokenGroups#width}). Batched decode of 16 sequences then runs 6 + 6 + 4 lanes, not 6 + 6 + 6, and of 8
     * runs 4 + 4, not 6 + 6: the FMAs of lanes that repeat a token are not done. Per column two weight loads, four
     * broadcasts and eight FMAs, near k2x6's ratio. The same FMA chain per (row, token), so the same bits.
     */
    static void k2x4(float[] w, int wo, int cols, float[] x, int xo, int valid, float[] out, int oo, int os) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // rows [0, L)
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // rows [L, P)
        for (int c = 0; c < cols; c++) {
            int xc = xo + c * FEW;
            FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
            FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
            FloatVector xv = FloatVector.broadcast(F, x[xc]);
            a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
            xv = FloatVector.broadcast(F, x[xc + 1]);
            a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
            xv = FloatVector.broadcast(F, x[xc + 2]);
            a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
            xv = FloatVector.broadcast(F, x[xc + 3]);
            a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
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

    /**
     * {@link #k2x8} for a group of {@link #WIDE} tokens (valid 1..12; column c's twelve values at
     * {@code xo + c * WIDE + j}): 24 sums per column, two weight loads per 24 FMAs. The same FMA chain per (row, token)
     * as every other kernel here, so the same bits.
     *
     * <p>More tokens per weight load ran faster on a 2-vCPU Intel Xeon (two 512-bit FMA ports), 2048 x 768 at 120
     * tokens, stand-alone: eight tokens 124-128 GFLOP/s, ten 129-137, twelve 152-157, fourteen 141-149, and two panels
     * by six tokens 123-132 (docs/engine-speed.md). 24 accumulators, two weights and a broadcast take 27 of the 32
     * vector registers of AVX-512, and C2 kept them all in registers (no spill or allocation seen).
     */
    static void k2x12(float[] w, int wo, int cols, float[] x, int xo, int valid, float[] out, int oo, int os) {
        // rows [0, L), then rows [L, P), of tokens 0..11
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
        FloatVector a8 = a0, a9 = a0, a10 = a0, a11 = a0;
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0, b7 = a0;
        FloatVector b8 = a0, b9 = a0, b10 = a0, b11 = a0;
        int even = cols & ~1;
        for (int c0 = 0; c0 < even; c0 += 2) {
            for (int u = 0; u < 2; u++) { // two columns per trip, unrolled by C2 (see k2x8)
                int c = c0 + u;
                int xc = xo + c * WIDE;
                FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
                FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
                FloatVector xv = FloatVector.broadcast(F, x[xc]);
                a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
                xv = FloatVector.broadcast(F, x[xc + 1]);
                a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
                xv = FloatVector.broadcast(F, x[xc + 2]);
                a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
                xv = FloatVector.broadcast(F, x[xc + 3]);
                a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
                xv = FloatVector.broadcast(F, x[xc + 4]);
                a4 = w0.fma(xv, a4); b4 = w1.fma(xv, b4);
                xv = FloatVector.broadcast(F, x[xc + 5]);
                a5 = w0.fma(xv, a5); b5 = w1.fma(xv, b5);
                xv = FloatVector.broadcast(F, x[xc + 6]);
                a6 = w0.fma(xv, a6); b6 = w1.fma(xv, b6);
                xv = FloatVector.broadcast(F, x[xc + 7]);
                a7 = w0.fma(xv, a7); b7 = w1.fma(xv, b7);
                xv = FloatVector.broadcast(F, x[xc + 8]);
                a8 = w0.fma(xv, a8); b8 = w1.fma(xv, b8);
                xv = FloatVector.broadcast(F, x[xc + 9]);
                a9 = w0.fma(xv, a9); b9 = w1.fma(xv, b9);
                xv = FloatVector.broadcast(F, x[xc + 10]);
                a10 = w0.fma(xv, a10); b10 = w1.fma(xv, b10);
                xv = FloatVector.broadcast(F, x[xc + 11]);
                a11 = w0.fma(xv, a11); b11 = w1.fma(xv, b11);
            }
        }
        if (even < cols) { // the odd last column: the same step
            int c = even;
            int xc = xo + c * WIDE;
            FloatVector w0 = FloatVector.fromArray(F, w, wo + c * P);
            FloatVector w1 = FloatVector.fromArray(F, w, wo + c * P + L);
            FloatVector xv = FloatVector.broadcast(F, x[xc]);
            a0 = w0.fma(xv, a0); b0 = w1.fma(xv, b0);
            xv = FloatVector.broadcast(F, x[xc + 1]);
            a1 = w0.fma(xv, a1); b1 = w1.fma(xv, b1);
            xv = FloatVector.broadcast(F, x[xc + 2]);
            a2 = w0.fma(xv, a2); b2 = w1.fma(xv, b2);
            xv = FloatVector.broadcast(F, x[xc + 3]);
            a3 = w0.fma(xv, a3); b3 = w1.fma(xv, b3);
            xv = FloatVector.broadcast(F, x[xc + 4]);
            a4 = w0.fma(xv, a4); b4 = w1.fma(xv, b4);
            xv = FloatVector.broadcast(F, x[xc + 5]);
            a5 = w0.fma(xv, a5); b5 = w1.fma(xv, b5);
            xv = FloatVector.broadcast(F, x[xc + 6]);
            a6 = w0.fma(xv, a6); b6 = w1.fma(xv, b6);
            xv = FloatVector.broadcast(F, x[xc + 7]);
            a7 = w0.fma(xv, a7); b7 = w1.fma(xv, b7);
            xv = FloatVector.broadcast(F, x[xc + 8]);
            a8 = w0.fma(xv, a8); b8 = w1.fma(xv, b8);
            xv = FloatVector.broadcast(F, x[xc + 9]);
            a9 = w0.fma(xv, a9); b9 = w1.fma(xv, b9);
            xv = FloatVector.broadcast(F, x[xc + 10]);
            a10 = w0.fma(xv, a10); b10 = w1.fma(xv, b10);
            xv = FloatVector.broadcast(F, x[xc + 11]);
            a11 = w0.fma(xv, a11); b11 = w1.fma(xv, b11);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + 1 * os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + 1 * os + L);
        }
        if (valid > 2) {
            FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * os);
            FloatVector.broadcast(F, -0f).add(b2).intoArray(out, oo + 2 * os + L);
        }
        if (valid > 3) {
            FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * os);
            FloatVector.broadcast(F, -0f).add(b3).intoArray(out, oo + 3 * os + L);
        }
        if (valid > 4) {
            FloatVector.broadcast(F, -0f).add(a4).intoArray(out, oo + 4 * os);
            FloatVector.broadcast(F, -0f).add(b4).intoArray(out, oo + 4 * os + L);
        }
        if (valid > 5) {
            FloatVector.broadcast(F, -0f).add(a5).intoArray(out, oo + 5 * os);
            FloatVector.broadcast(F, -0f).add(b5).intoArray(out, oo + 5 * os + L);
        }
        if (valid > 6) {
            FloatVector.broadcast(F, -0f).add(a6).intoArray(out, oo + 6 * os);
            FloatVector.broadcast(F, -0f).add(b6).intoArray(out, oo + 6 * os + L);
        }
        if (valid > 7) {
            FloatVector.broadcast(F, -0f).add(a7).intoArray(out, oo + 7 * os);
            FloatVector.broadcast(F, -0f).add(b7).intoArray(out, oo + 7 * os + L);
        }
        if (valid > 8) {
            FloatVector.broadcast(F, -0f).add(a8).intoArray(out, oo + 8 * os);
            FloatVector.broadcast(F, -0f).add(b8).intoArray(out, oo + 8 * os + L);
        }
        if (valid > 9) {
            FloatVector.broadcast(F, -0f).add(a9).intoArray(out, oo + 9 * os);
            FloatVector.broadcast(F, -0f).add(b9).intoArray(out, oo + 9 * os + L);
        }
        if (valid > 10) {
            FloatVector.broadcast(F, -0f).add(a10).intoArray(out, oo + 10 * os);
            FloatVector.broadcast(F, -0f).add(b10).intoArray(out, oo + 10 * os + L);
        }
        if (valid > 11) {
            FloatVector.broadcast(F, -0f).add(a11).intoArray(out, oo + 11 * os);
            FloatVector.broadcast(F, -0f).add(b11).intoArray(out, oo + 11 * os + L);
        }
    }
}
