package io.tnsr.engine.model;

import static io.tnsr.engine.model.Blocks.I;
import static io.tnsr.engine.model.Int8Activations.PAIR;
import static io.tnsr.engine.model.Int8Activations.Pairing.HALVES;
import static io.tnsr.engine.model.Int8Activations.high;
import static io.tnsr.engine.model.Int8Activations.lowUnsigned;
import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.rowSums;
import static io.tnsr.engine.model.Int8Activations.xpair;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.PanelKernels.WIDEN_CHUNK;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static jdk.incubator.vector.VectorOperators.ASHR;
import static jdk.incubator.vector.VectorOperators.B2S;
import static jdk.incubator.vector.VectorOperators.I2F;
import static jdk.incubator.vector.VectorOperators.LSHL;
import static jdk.incubator.vector.VectorOperators.LSHR;

import io.tnsr.engine.gguf.GgmlType;
import java.util.Arrays;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q4_0 weights (ggml block_q4_0): blocks of 32 elements, 18 bytes each, {@code [d: f16][qs: 16 bytes]};
 * element i &lt; 16 = ((qs[i] &amp; 0xF) - 8) * d, element 16 + i = ((qs[i] &gt;&gt; 4) - 8) * d. Multiplied in
 * 16-bit integers against the activations quantized to 8 bits per block, as llama.cpp's q4_0 x q8_0 dot product
 * does; the scales as floats.
 *
 * <p>Repacked at load ({@link PackedBlocks}, then here) into row panels ({@link PanelKernels}), column pair after
 * column pair, a block's column j paired with column j + 16 ({@link Int8Activations.Pairing#HALVES}): per panel and
 * pair (a, b), 2L bytes whose byte 2i holds column a of row i in its low nibble and of row L + i in its high nibble,
 * byte 2i + 1 the same for column b ({@link #putNibble}). Sign-extended to 16-bit lanes, even lanes are column a and
 * odd lanes column b. A high nibble is {@code q - 8} as a signed 4-bit
 * number: {@code v >> 4} is rows [L, P). A low nibble holds {@code q} unsigned (0..15): {@code v & 0xF} is rows
 * [0, L) in the batched kernel, one AND on any port where sign-extending shifts would take the one port that also
 * multiplies (Intel's port 0), and the one-token kernel does not extract it at all ({@link #m1}); either way each
 * block's 16-bit sums of those rows are corrected by {@code 8 * sum(xq)} of their column parity
 * ({@link Int8Activations#offsets}): the lane sums stay within 16 * 15 * 127 = 30480 and the corrected sum is the
 * same integer as before. Q4_K keeps the layout; Q2_K too, with
 * adjacent columns paired ({@link Int8Activations.Pairing#ADJACENT}). The
 * scales in an array of their own, {@code [blocks][P]} floats per panel (interleaved with the quants, as Q8_0's are,
 * they gained nothing here).
 *
 * <p>The activations: {@link Int8Activations}, one int per column pair that lines up with a pair's weights. A
 * 16-bit lane sums a block's 16 products of its column parity, at most 16 * 8 * 127 = 16256 in magnitude: exact.
 *
 * <p>Result of a (row, token), one token or many: for each block, {@code isum} = the exact integer sum of
 * {@code (q - 8) * xq} over its 32 columns, then {@code acc = fma((float) isum, d * s, acc)} over the blocks in
 * order; checked bit for bit by PanelMatricesTest. Against the float path this replaced (a byte conversion and one
 * FMA per weight), one token streams 38-42 G weights/s instead of 20 (stand-alone, this machine): the 8-bit
 * activations cost ~0.4% relative error per dot product, well under the 4-bit weights' own. A prefill computes the
 * same integers with FMAs over the panel widened to floats ({@link #panelsTokens}).
 *
 * <p>The loops repeat {@link Int8PanelMatrix}'s shape on purpose (one final class per type keeps each kernel
 * monomorphic; a loop shared through a virtual or lambda call would leave vectors for C2 to box in JDK 17). Q4_K
 * calls {@link #blockSums} directly: a static method, the same compiled code for both.
 */
final class Q4_0Matrix extends PanelMatrix {
    private static final int QK = 32;
    /** Tokens per {@link #group} call: three or four through {@link #k4x2}, one or two through {@link #k2x2}. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final ShortVector MINUS_SIXTEEN = ShortVector.broadcast(S, (short) -16);
    /** Tokens per {@link #k2x12f} call. */
    private static final int WIDE = PanelKernels.WIDE;

    private final int blocks;
    /** [panels][cols / 2][2L]: pair c / 2 of panel p at p * cols * L + (c / 2) * P, laid out as above. */
    private final byte[] q;
    /** [panels][blocks][P]: the scale of row r's block b at (r / P) * blocks * P + b * P + r % P. */
    private final float[] d;
    /** The activations of the call in progress. */
    private final Int8Activations acts = new Int8Activations(HALVES);
    /** [blocks][TOKENS][P]: the integer block sums of {@link #k2x2} ([blocks][2][P]) and {@link #k4x2}, as floats. */
    private final float[] sums;
    /** [WIDEN_CHUNK][P]: the chunk of a panel that {@link #k2x12f} reads, its {@code q - 8} as floats. */
    private final float[] wide = new float[WIDEN_CHUNK * P];
    /** This call's 8-bit activations as floats in groups of twelve ({@link TokenGroups}); null until needed. */
    private float[] xg;
    /** [n][P], n rounded up to twelve: a panel's totals for the tokens of the call in progress; grown on demand. */
    private float[] totals = new float[0];

    Q4_0Matrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.blocks = cols / QK;
        packed.requireShape(name, rows, blocks, QK / 2);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.d = new float[arrayLength(name, rows, cols, (long) panels * blocks * P)];
        this.sums = new float[blocks * TOKENS * P];
        byte[] quants = packed.quants(); // block k's 16 bytes at k * 16: element i low nibble, 16 + i high
        float[] scales = packed.scales();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int qb = (r * blocks + c / QK) * (QK / 2) + c % (QK / 2);
                putNibble(HALVES, q, cols, r, c, c % QK < QK / 2 ? quants[qb] & 0xF : (quants[qb] >> 4) & 0xF);
            }
            int sbase = (r / P) * blocks * P + r % P;
            for (int b = 0; b < blocks; b++) {
                d[sbase + b * P] = scales[r * blocks + b];
            }
        }
    }

    /** The byte holding row r, column c of a {@code cols}-column matrix in this layout (Q4_K's and Q2_K's too). */
    private static int at(Int8Activations.Pairing pairing, int cols, int r, int c) {
        return (r / P) * cols * L + pairing.pairOf(c) * P + 2 * (r % L) + pairing.halfOf(c);
    }

    /** Stores nibble n (0..15) of row r, column c in Q4_0's layout (see above); the other row's kept. Also Q4_K's and Q2_K's. */
    static void putNibble(Int8Activations.Pairing pairing, byte[] q, int cols, int r, int c, int n) {
        int at = at(pairing, cols, r, c);
        boolean lowRow = r % P < L;
        q[at] = (byte) (lowRow ? q[at] & 0xF0 | n : q[at] & 0x0F | ((n - 8) & 0xF) << 4);
    }

    /** Row r, column c's {@code n - 8} in Q4_0's layout (Q4_K's and Q2_K's too). */
    static int nibble(Int8Activations.Pairing pairing, byte[] q, int cols, int r, int c) {
        int v = q[at(pairing, cols, r, c)];
        return r % P < L ? (v & 0xF) - 8 : v >> 4;
    }

    /** Heap bytes a rows x cols Q4_0 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + cols / QK * Float.BYTES);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q4_0Matrix(Q4_0Matrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.blocks = shared.blocks;
        this.q = shared.q;
        this.d = shared.d;
        this.sums = new float[blocks * TOKENS * P];
    }

    @Override
    PanelMatrix view() {
        return new Q4_0Matrix(this);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q4_0;
    }

    @Override
    protected void prepare(float[] x, int xo, int n) {
        acts.quantize(x, xo, n, cols);
        xg = null;
    }

    /**
     * A prefill ({@link PanelKernels#widens}): each whole panel is turned into floats, {@code q - 8} per weight, a
     * chunk of {@link PanelKernels#WIDEN_CHUNK} columns at a time ({@link #widen}), which then serves every group of
     * twelve tokens from L1 ({@link #k2x12f}, the activations' integers as floats, regrouped once per call): FMAs,
     * sixteen products per instruction on both FMA ports, where the 16-bit path multiplies on one port. The same
     * results: every product and every partial sum of a block is an integer of magnitude at most 32 * 8 * 127 =
     * 32512, exact in a float, so a block's float sum is the same integer as its 16-bit sums give, and the blocks are
     * then folded in as {@link #m1} folds them ({@code acc = fma(sum, d * s, acc)}, blocks in order). Fewer tokens, a
     * last partial panel, and hosts with 16 vector registers (where twelve tokens' sums spill) take {@link #group}.
     */
    @Override
    protected void panelsTokens(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (!PanelKernels.widens(n)) {
            groups(x, xo, n, out, oo, from, to);
            return;
        }
        if (xg == null) { // once per call, however many ranges of panels it runs in
            xg = TokenGroups.ofHalves(acts.pairs(), n, cols, WIDE);
        }
        int padded = (n + WIDE - 1) / WIDE * WIDE;
        if (totals.length < padded * P) {
            totals = new float[padded * P];
        }
        float[] tot = totals;
        int whole = Math.min(to, fullPanels);
        for (int p = from; p < whole; p++) {
            Arrays.fill(tot, 0, padded * P, 0f); // the totals start from zero
            for (int c0 = 0; c0 < cols; c0 += WIDEN_CHUNK) {
                int width = Math.min(cols, c0 + WIDEN_CHUNK) - c0;
                widen(q, p * cols * L + c0 / 2 * P, width, wide);
                for (int t0 = 0; t0 < n; t0 += WIDE) { // each group's totals at t0 * P of tot
                    k2x12f(wide, d, p * blocks * P + c0 / QK * P, width, xg, TokenGroups.offset(t0, cols) + c0 * WIDE,
                            acts.scales(), blocks, c0 / QK, t0, n, tot, t0 * P);
                }
            }
            for (int t = 0; t < n; t++) {
                System.arraycopy(tot, t * P, out, oo + t * rows + p * P, P);
            }
        }
        groups(x, xo, n, out, oo, Math.max(from, whole), to);
    }

    /**
     * The {@code width} columns (whole blocks) whose pairs start at byte {@code qo} of q, as floats {@code q - 8}:
     * w[c * P + i] for column c of the chunk and row i of the panel. Per pair, its bytes widened to one int per row
     * (column a's byte in the low 16 bits, column b's in the high 16, each sign-extended): the four nibbles taken
     * out by shifts and masks.
     */
    private static void widen(byte[] q, int qo, int width, float[] w) {
        for (int k = 0; k < width / 2; k++) {
            int a = (k >> 4) * QK + (k & 15); // pair k holds columns a and a + 16 of the chunk
            IntVector v = pair(q, qo + k * P).reinterpretAsInts();
            ((FloatVector) v.and(0xF).sub(8).convert(I2F, 0)).intoArray(w, a * P);
            ((FloatVector) v.lanewise(LSHL, 24).lanewise(ASHR, 28).convert(I2F, 0)).intoArray(w, a * P + L);
            ((FloatVector) v.lanewise(LSHR, 16).and(0xF).sub(8).convert(I2F, 0)).intoArray(w, (a + 16) * P);
            ((FloatVector) v.lanewise(ASHR, 20).convert(I2F, 0)).intoArray(w, (a + 16) * P + L);
        }
    }

    /**
     * A chunk of {@code width} columns of one panel, as {@link #widen} left it in w, . the twelve tokens of a group
     * from token t0 of an n-token call (column c's activations at {@code x[xo + c * WIDE + j]}, as integers; token u's
     * scale of block b at {@code xs[u * blocks + b]}): per block (the chunk's first is block {@code b0}, its row scales
     * from {@code d[so..]}, the next P floats on), the 24 integer sums in registers, then folded into the totals at
     * {@code tot[to + j * P + i]} (row i, token j; twelve tokens' room, lanes past the call's tokens included). Also
     * Q5_0's, whose sums reach 32 * 16 * 127: exact in a float all the same.
     */
    static void k2x12f(float[] w, float[] d, int so, int width, float[] x, int xo, float[] xs, int blocks,
                               int b0, int t0, int n, float[] tot, int to) {
        int last = n - 1; // lanes past the call's tokens repeat the last one, scale included
        for (int u0 = 0, b = b0; u0 < width; u0 += QK, b++, so += P) {
            // block sums per token: rows [0, L) in s, rows [L, P) in t
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
            FloatVector s8 = s0, s9 = s0, s10 = s0, s11 = s0;
            FloatVector t0v = s0, t1 = s0, t2 = s0, t3 = s0, t4 = s0, t5 = s0, t6 = s0, t7 = s0;
            FloatVector t8 = s0, t9 = s0, t10 = s0, t11 = s0;
            for (int c0 = u0; c0 < u0 + QK; c0 += 16) { // sixteen columns per trip: a constant-count loop C2 unrolls
                for (int u = 0; u < 16; u++) {
                    int c = c0 + u;
                    int xc = xo + c * WIDE;
                    FloatVector w0 = FloatVector.fromArray(F, w, c * P);
                    FloatVector w1 = FloatVector.fromArray(F, w, c * P + L);
                    FloatVector xv = FloatVector.broadcast(F, x[xc]);
                    s0 = w0.fma(xv, s0); t0v = w1.fma(xv, t0v);
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
            FloatVector d0 = FloatVector.fromArray(F, d, so);
            FloatVector d1 = FloatVector.fromArray(F, d, so + L);
            FloatVector sx = FloatVector.broadcast(F, xs[Math.min(t0, last) * blocks + b]);
            s0.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to)).intoArray(tot, to);
            t0v.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + L)).intoArray(tot, to + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 1, last) * blocks + b]);
            s1.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + P)).intoArray(tot, to + P);
            t1.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + P + L)).intoArray(tot, to + P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 2, last) * blocks + b]);
            s2.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 2 * P)).intoArray(tot, to + 2 * P);
            t2.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 2 * P + L)).intoArray(tot, to + 2 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 3, last) * blocks + b]);
            s3.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 3 * P)).intoArray(tot, to + 3 * P);
            t3.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 3 * P + L)).intoArray(tot, to + 3 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 4, last) * blocks + b]);
            s4.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 4 * P)).intoArray(tot, to + 4 * P);
            t4.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 4 * P + L)).intoArray(tot, to + 4 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 5, last) * blocks + b]);
            s5.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 5 * P)).intoArray(tot, to + 5 * P);
            t5.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 5 * P + L)).intoArray(tot, to + 5 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 6, last) * blocks + b]);
            s6.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 6 * P)).intoArray(tot, to + 6 * P);
            t6.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 6 * P + L)).intoArray(tot, to + 6 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 7, last) * blocks + b]);
            s7.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 7 * P)).intoArray(tot, to + 7 * P);
            t7.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 7 * P + L)).intoArray(tot, to + 7 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 8, last) * blocks + b]);
            s8.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 8 * P)).intoArray(tot, to + 8 * P);
            t8.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 8 * P + L)).intoArray(tot, to + 8 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 9, last) * blocks + b]);
            s9.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 9 * P)).intoArray(tot, to + 9 * P);
            t9.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 9 * P + L)).intoArray(tot, to + 9 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 10, last) * blocks + b]);
            s10.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 10 * P)).intoArray(tot, to + 10 * P);
            t10.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 10 * P + L)).intoArray(tot, to + 10 * P + L);
            sx = FloatVector.broadcast(F, xs[Math.min(t0 + 11, last) * blocks + b]);
            s11.fma(d0.mul(sx), FloatVector.fromArray(F, tot, to + 11 * P)).intoArray(tot, to + 11 * P);
            t11.fma(d1.mul(sx), FloatVector.fromArray(F, tot, to + 11 * P + L)).intoArray(tot, to + 11 * P + L);
        }
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * cols * L, cols * L);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        int[] xoff = acts.offsets();
        for (int p = from; p < to; p++) {
            m1(q, d, p * cols * L, p * blocks * P, blocks, xq, xs, xoff, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, scales from {@code so}) . the prepared token: out[oo..oo+P). Per pair, the
     * whole sign-extended byte {@code v = n + 16 h} times xq into one sum and its high nibble h into another; per
     * block the low rows' sum is then {@code sum(v xq) - 16 sum(h xq) - offsets}: the first of those wraps (|v xq|
     * reaches 16256), but the result, at most 16 * 8 * 127 in magnitude, is exact in 16 bits all the same. Five
     * vector operations per pair, not seven: the low nibbles are never extracted.
     */
    private static void m1(byte[] q, float[] d, int qo, int so, int blocks, int[] xq, float[] xs, int[] xo, float[] out,
                           int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < blocks; b++) {
            ShortVector t0 = ShortVector.zero(S), s1 = t0; // sums of v * xq and of h * xq, rows [0, L) and [L, P)
            for (int k = b * QK / 2; k < b * QK / 2 + QK / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    t0 = v.mul(xv).add(t0);
                    s1 = high(v).mul(xv).add(s1);
                }
            }
            ShortVector s0 = MINUS_SIXTEEN.mul(s1).add(t0).sub(xpair(xo, b));
            FloatVector sx = FloatVector.broadcast(F, xs[b]);
            a0 = rowSums(s0).fma(FloatVector.fromArray(F, d, so + b * P).mul(sx), a0);
            a1 = rowSums(s1).fma(FloatVector.fromArray(F, d, so + b * P + L).mul(sx), a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        if (valid > 2) {
            k4x2(q, d, p * cols * L, p * blocks * P, blocks, acts.pairs(), acts.scales(), acts.offsets(), t0, valid, sums,
                    out, oo, os);
        } else {
            k2x2(q, d, p * cols * L, p * blocks * P, blocks, acts.pairs(), acts.scales(), acts.offsets(), t0, valid, sums,
                    out, oo, os);
        }
    }

    /**
     * As {@link #k2x2} for tokens t0 + j, j in [0, valid) (valid 3..4): each pair's nibbles extracted once for four
     * tokens instead of two. The integer pass is {@link #subSums}, which the launchers and tests keep out of line
     * ({@code -XX:CompileCommand=dontinline,...::subSums}, see {@link WeightMatrix}): inlined here, four tokens'
     * sums took C2 (JDK 17) past its node budget and it boxed their vectors. Same arithmetic, so the same bits.
     */
    private static void k4x2(byte[] q, float[] d, int qo, int so, int blocks, int[] xq, float[] xs, int[] xo, int t0,
                             int valid, float[] sums, float[] out, int oo, int os) {
        int pairs = blocks * QK / 2;
        int u0 = t0, u1 = t0 + 1, u2 = t0 + 2, u3 = t0 + valid - 1; // a missing fourth token repeats the third
        subSums(q, qo, blocks, xq, xo, u0, u1, u2, u3, pairs, sums);
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < blocks; b++) {
            FloatVector d0 = FloatVector.fromArray(F, d, so + b * P);
            FloatVector d1 = FloatVector.fromArray(F, d, so + b * P + L);
            int sb = b * 4 * P;
            FloatVector sx = FloatVector.broadcast(F, xs[u0 * blocks + b]);
            a0 = FloatVector.fromArray(F, sums, sb).fma(d0.mul(sx), a0);
            b0 = FloatVector.fromArray(F, sums, sb + L).fma(d1.mul(sx), b0);
            sx = FloatVector.broadcast(F, xs[u1 * blocks + b]);
            a1 = FloatVector.fromArray(F, sums, sb + P).fma(d0.mul(sx), a1);
            b1 = FloatVector.fromArray(F, sums, sb + P + L).fma(d1.mul(sx), b1);
            sx = FloatVector.broadcast(F, xs[u2 * blocks + b]);
            a2 = FloatVector.fromArray(F, sums, sb + 2 * P).fma(d0.mul(sx), a2);
            b2 = FloatVector.fromArray(F, sums, sb + 2 * P + L).fma(d1.mul(sx), b2);
            sx = FloatVector.broadcast(F, xs[u3 * blocks + b]);
            a3 = FloatVector.fromArray(F, sums, sb + 3 * P).fma(d0.mul(sx), a3);
            b3 = FloatVector.fromArray(F, sums, sb + 3 * P + L).fma(d1.mul(sx), b3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
        FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * os);
        FloatVector.broadcast(F, -0f).add(b2).intoArray(out, oo + 2 * os + L);
        if (valid > 3) {
            FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * os);
            FloatVector.broadcast(F, -0f).add(b3).intoArray(out, oo + 3 * os + L);
        }
    }

    /**
     * sums[b][j][i] = the integer sum of block b of row i (of the panel from {@code qo}) . token u<j>'s pairs, j in
     * [0, 4), as a float: the low rows' 16-bit sums corrected by the token's offsets first. Tokens' pairs are at
     * {@code u * pairs} of xq, their offsets at {@code u * blocks} of xo. Only Vector API calls in the loops, no
     * helper of ours: a helper left out of line would box its vectors. Also Q4_K's (and so Q4_1's).
     */
    static void subSums(byte[] q, int qo, int blocks, int[] xq, int[] xo, int u0, int u1, int u2, int u3,
                                int pairs, float[] sums) {
        int x0 = u0 * pairs, x1 = u1 * pairs, x2 = u2 * pairs, x3 = u3 * pairs;
        for (int b = 0; b < blocks; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0, s2 = s0, s3 = s0; // block sums, rows [0, L), per token
            ShortVector h0 = s0, h1 = s0, h2 = s0, h3 = s0;                  // block sums, rows [L, P)
            for (int i = b * QK / 2; i < b * QK / 2 + QK / 2; i++) {
                ShortVector v = (ShortVector) ByteVector.fromArray(PAIR, q, qo + i * P).convertShape(B2S, S, 0);
                ShortVector w0 = v.and((short) 0xF);
                ShortVector w1 = v.lanewise(ASHR, 4);
                ShortVector xv = IntVector.broadcast(I, xq[x0 + i]).reinterpretAsShorts();
                s0 = w0.mul(xv).add(s0); h0 = w1.mul(xv).add(h0);
                xv = IntVector.broadcast(I, xq[x1 + i]).reinterpretAsShorts();
                s1 = w0.mul(xv).add(s1); h1 = w1.mul(xv).add(h1);
                xv = IntVector.broadcast(I, xq[x2 + i]).reinterpretAsShorts();
                s2 = w0.mul(xv).add(s2); h2 = w1.mul(xv).add(h2);
                xv = IntVector.broadcast(I, xq[x3 + i]).reinterpretAsShorts();
                s3 = w0.mul(xv).add(s3); h3 = w1.mul(xv).add(h3);
            }
            int sb = b * 4 * P;
            // each row's even lane plus its odd lane, as floats (Int8Activations.rowSums, written out)
            IntVector w;
            s0 = s0.sub(IntVector.broadcast(I, xo[u0 * blocks + b]).reinterpretAsShorts());
            s1 = s1.sub(IntVector.broadcast(I, xo[u1 * blocks + b]).reinterpretAsShorts());
            s2 = s2.sub(IntVector.broadcast(I, xo[u2 * blocks + b]).reinterpretAsShorts());
            s3 = s3.sub(IntVector.broadcast(I, xo[u3 * blocks + b]).reinterpretAsShorts());
            w = s0.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb);
            w = h0.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + L);
            w = s1.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + P);
            w = h1.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + P + L);
            w = s2.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + 2 * P);
            w = h2.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + 2 * P + L);
            w = s3.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + 3 * P);
            w = h3.reinterpretAsInts();
            ((FloatVector) w.lanewise(LSHL, 16).add(w).lanewise(ASHR, 16).convert(I2F, 0)).intoArray(sums, sb + 3 * P + L);
        }
    }

    /**
     * One panel (as {@link #m1}) . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for
     * the panel's P rows i. A missing second token repeats the first and is not stored.
     *
     * <p>In two passes, the integer sums of every block into {@code sums} ([blocks][2][P] floats, in L1), then the
     * scales: one kernel doing both (as {@link #m1} does for one token) sat at the edge of C2's node budget (JDK 17,
     * NodeCountInliningCutoff): in some JVMs it left a {@code rowSums} out of line and boxed its vectors (24 MB per
     * token in prefill), depending on which type had run first. With four tokens it always did. Same arithmetic as
     * {@link #m1}, so the same bits.
     */
    private static void k2x2(byte[] q, float[] d, int qo, int so, int blocks, int[] xq, float[] xs, int[] xo, int t0,
                             int valid, float[] sums, float[] out, int oo, int os) {
        int pairs = blocks * QK / 2;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens: pairs at u<j> * pairs, scales at u<j> * blocks
        blockSums(q, qo, blocks, xq, xo, u0 * pairs, u1 * pairs, u0 * blocks, u1 * blocks, sums);
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < blocks; b++) {
            FloatVector d0 = FloatVector.fromArray(F, d, so + b * P);
            FloatVector d1 = FloatVector.fromArray(F, d, so + b * P + L);
            int sb = b * 2 * P;
            FloatVector sx = FloatVector.broadcast(F, xs[u0 * blocks + b]);
            a0 = FloatVector.fromArray(F, sums, sb).fma(d0.mul(sx), a0);
            b0 = FloatVector.fromArray(F, sums, sb + L).fma(d1.mul(sx), b0);
            sx = FloatVector.broadcast(F, xs[u1 * blocks + b]);
            a1 = FloatVector.fromArray(F, sums, sb + P).fma(d0.mul(sx), a1);
            b1 = FloatVector.fromArray(F, sums, sb + P + L).fma(d1.mul(sx), b1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
    }

    /**
     * sums[b][j][i] = the integer sum of block b of row i (of the panel from {@code qo}) . token j's pairs (from x0,
     * x1), as a float: the low rows' 16-bit sums corrected by token j's offsets (from o0, o1) first. Also Q4_K's.
     */
    static void blockSums(byte[] q, int qo, int blocks, int[] xq, int[] xo, int x0, int x1, int o0, int o1,
                          float[] sums) {
        for (int b = 0; b < blocks; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // block sums, rows [0, L)
            ShortVector t0 = s0, t1 = s0;                  // block sums, rows [L, P)
            for (int i = b * QK / 2; i < b * QK / 2 + QK / 2; i++) {
                ShortVector v = pair(q, qo + i * P);
                ShortVector w0 = lowUnsigned(v);
                ShortVector w1 = high(v);
                ShortVector xv = xpair(xq, x0 + i);
                s0 = w0.mul(xv).add(s0); t0 = w1.mul(xv).add(t0);
                xv = xpair(xq, x1 + i);
                s1 = w0.mul(xv).add(s1); t1 = w1.mul(xv).add(t1);
            }
            int sb = b * 2 * P;
            rowSums(s0.sub(xpair(xo, o0 + b))).intoArray(sums, sb);
            rowSums(t0).intoArray(sums, sb + L);
            rowSums(s1.sub(xpair(xo, o1 + b))).intoArray(sums, sb + P);
            rowSums(t1).intoArray(sums, sb + P + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int sbase = (row / P) * blocks * P + row % P;
        for (int c = 0; c < cols; c++) {
            dst[off + c] = nibble(HALVES, q, cols, row, c) * d[sbase + (c / QK) * P];
        }
    }
}
