package io.tnsr.engine.model;

import static io.tnsr.engine.model.Blocks.I;
import static io.tnsr.engine.model.Int8Activations.PAIR;
import static io.tnsr.engine.model.Int8Activations.Pairing.HALVES;
import static io.tnsr.engine.model.Int8Activations.high;
import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.wideRowSums;
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
 * Q5_0 weights (ggml block_q5_0, decoded by {@link Int8Blocks#q5_0} into {@code v = q - 16} in [-16, 15] per element
 * and a float scale per 32) kept as 5 bits a weight: the low 4 bits of q in {@link Q4_0Matrix}'s nibble layout
 * (its pairs, its rows [0, L) unsigned and rows [L, P) as {@code n - 8}), and the fifth bit in a plane of its own.
 * Multiplied, as Q4_0 is, in 16-bit integers against the activations rounded to 8 bits per block of 32
 * ({@link Int8Activations}, llama.cpp's q5_0 x q8_0 rounding); the scales as floats. 6 heap bits a weight (4 + 1 + a
 * float per 32) where one int8 per weight took 9: a one-token call streams two thirds of the bytes.
 *
 * <p>The fifth bits, {@code [panels][blocks][2][2L]} shorts: per panel, block and half of the panel's rows (rows
 * [0, L), then [L, P)), one 16-bit word per lane of a pair's vector (lane 2i + h: row i of the half, the pair's column
 * h), whose bit {@code 15 - k} is the fifth bit of that lane in the block's pair k. A kernel loads a block's two words
 * once and, pair after pair, takes the top bit ({@code w >> 15}: 0 or -1 per lane) and shifts the word left by one:
 * two operations per half and pair, with no lookup and no per-lane shift, the same code on every JDK.
 *
 * <p>Result of a (row, token), one token or many: for each block, {@code isum} = the exact integer sum of
 * {@code (q - 16) * xq} over its 32 columns, then {@code acc = fma((float) isum, d * s, acc)} over the blocks in
 * order (Q4_0's order, checked bit for bit by PanelMatricesTest). In 16-bit lanes, per column parity: the low rows'
 * {@code sum(n xq) + 16 sum(b xq) - 16 sum(xq)} and the high rows' {@code sum((n - 8) xq) + 16 sum(b xq) -
 * 8 sum(xq)}, each at most 16 * 16 * 127 = 32512 in magnitude when done, so exact however the partial sums wrapped;
 * a row's two parities then add as ints (up to 65024, past 16 bits: {@link Int8Activations#wideRowSums}). A prefill
 * widens each panel to floats {@code q - 16} and runs Q4_0's twelve-token kernel ({@link Q4_0Matrix#k2x12f}): every
 * partial sum an integer of at most 32 * 16 * 127, exact in a float, so the same bits.
 */
final class Q5_0Matrix extends PanelMatrix {
    private static final int QK = 32;
    /** Pairs per block. */
    private static final int PAIRS = QK / 2;
    /** Tokens per {@link #group} call. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    /** Shorts of fifth bits per panel and block: two halves of 2L lanes. */
    private static final int BITS = 4 * L;
    private static final int WIDE = PanelKernels.WIDE;

    private final int blocks;
    /** [panels][cols / 2][2L]: the low 4 bits, in Q4_0's layout. */
    private final byte[] q;
    /** [panels][blocks][2][2L]: the fifth bits, as above. */
    private final short[] w;
    /** [panels][blocks][P]: the scale of row r's block b at (r / P) * blocks * P + b * P + r % P. */
    private final float[] d;
    /** The activations of the call in progress. */
    private final Int8Activations acts = new Int8Activations(HALVES);
    /** [blocks][TOKENS][P]: the integer block sums of {@link #subSums}, as floats. */
    private final float[] sums;
    /** [WIDEN_CHUNK][P]: the chunk of a panel that {@link Q4_0Matrix#k2x12f} reads, its {@code q - 16} as floats. */
    private final float[] wide = new float[WIDEN_CHUNK * P];
    /** This call's 8-bit activations as floats in groups of twelve ({@link TokenGroups}); null until needed. */
    private float[] xg;
    /** [n][P], n rounded up to twelve: a panel's totals for the tokens of the call in progress; grown on demand. */
    private float[] totals = new float[0];

    /** {@code packed} as {@link Int8Blocks#q5_0} gives it: one value in [-16, 15] per element, a scale per 32. */
    Q5_0Matrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.blocks = cols / QK;
        packed.requireShape(name, rows, blocks, QK);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.w = new short[arrayLength(name, rows, cols, (long) panels * blocks * BITS)];
        this.d = new float[arrayLength(name, rows, cols, (long) panels * blocks * P)];
        this.sums = new float[blocks * TOKENS * P];
        byte[] quants = packed.quants(); // row r's values at r * cols
        float[] scales = packed.scales();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int v = quants[r * cols + c];
                if (v < -16 || v > 15) {
                    throw new IllegalArgumentException(name + ": row " + r + ", column " + c + ": " + v
                            + " is not a Q5_0 value (-16..15)");
                }
                int u = v + 16;
                Q4_0Matrix.putNibble(HALVES, q, cols, r, c, u & 0xF);
                if (u >= 16) {
                    w[bitAt(r, c)] |= (short) (1 << (15 - c % PAIRS));
                }
            }
            int sbase = (r / P) * blocks * P + r % P;
            for (int b = 0; b < blocks; b++) {
                d[sbase + b * P] = scales[r * blocks + b];
            }
        }
    }

    /** The word of {@link #w} holding row r, column c's fifth bit (bit {@code 15 - c % 16}). */
    private int bitAt(int r, int c) {
        int half = r % P < L ? 0 : 1;
        return (((r / P) * blocks + c / QK) * 2 + half) * 2 * L + 2 * (r % L) + HALVES.halfOf(c);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q5_0Matrix(Q5_0Matrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.blocks = shared.blocks;
        this.q = shared.q;
        this.w = shared.w;
        this.d = shared.d;
        this.sums = new float[blocks * TOKENS * P];
    }

    /** Heap bytes a rows x cols Q5_0 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + cols / 8 + cols / QK * Float.BYTES);
    }

    @Override
    PanelMatrix view() {
        return new Q5_0Matrix(this);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q5_0;
    }

    @Override
    protected void prepare(float[] x, int xo, int n) {
        acts.quantize(x, xo, n, cols);
        xg = null;
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
            m1(q, w, d, p * cols * L, p * blocks * BITS, p * blocks * P, blocks, xq, xs, xoff, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, fifth bits from {@code wo}, scales from {@code so}) . the prepared token:
     * out[oo..oo+P). Per pair, as {@link Q4_0Matrix}'s one-token kernel, the whole sign-extended byte
     * {@code v = n + 16 h} times xq into one sum and its high nibble h into another; and xq where the fifth bit is
     * set, for each half of the rows, into two more. Per block the low rows' sum is then
     * {@code sum(v xq) - 16 sum(h xq) + 16 sum(b xq) - 2 offsets} and the high rows' {@code sum(h xq) + 16 sum(b xq)
     * - offsets} ({@link Int8Activations#offsets}: 8 sum(xq) per column parity).
     */
    private static void m1(byte[] q, short[] w, float[] d, int qo, int wo, int so, int blocks, int[] xq, float[] xs,
                           int[] xo, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < blocks; b++) {
            ShortVector t0 = ShortVector.zero(S), s1 = t0; // sums of v * xq and of h * xq
            ShortVector u0 = t0, u1 = t0;                  // sums of xq where the fifth bit is set: rows [0, L), [L, P)
            ShortVector wl = ShortVector.fromArray(S, w, wo + b * BITS);
            ShortVector wh = ShortVector.fromArray(S, w, wo + b * BITS + 2 * L);
            for (int k = b * PAIRS; k < b * PAIRS + PAIRS; k += 2) {
                for (int j = 0; j < 2; j++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + j;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    t0 = v.mul(xv).add(t0);
                    s1 = high(v).mul(xv).add(s1);
                    u0 = xv.and(wl.lanewise(ASHR, 15)).add(u0);
                    u1 = xv.and(wh.lanewise(ASHR, 15)).add(u1);
                    wl = wl.lanewise(LSHL, 1);
                    wh = wh.lanewise(LSHL, 1);
                }
            }
            ShortVector off = xpair(xo, b);
            ShortVector s0 = t0.sub(s1.lanewise(LSHL, 4)).add(u0.lanewise(LSHL, 4)).sub(off).sub(off);
            ShortVector h = s1.add(u1.lanewise(LSHL, 4)).sub(off);
            FloatVector sx = FloatVector.broadcast(F, xs[b]);
            a0 = wideRowSums(s0).fma(FloatVector.fromArray(F, d, so + b * P).mul(sx), a0);
            a1 = wideRowSums(h).fma(FloatVector.fromArray(F, d, so + b * P + L).mul(sx), a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        int pairs = blocks * PAIRS;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1), u2 = t0 + Math.min(2, valid - 1), u3 = t0 + valid - 1;
        subSums(q, w, p * cols * L, p * blocks * BITS, blocks, acts.pairs(), acts.offsets(), u0, u1, u2, u3, pairs,
                sums);
        scales(d, p * blocks * P, blocks, acts.scales(), u0, u1, u2, u3, valid, sums, out, oo, os);
    }

    /**
     * The scales' pass of tokens u0..u3 (the first {@code valid} of them stored, 1..4): per block in order,
     * {@code acc = fma(sums[b][j][i], d * xs, acc)} from the sums {@link #subSums} left, then out[oo + j * os + i] for
     * the panel's P rows i (scales from {@code so}). Q4_0's four-token pass, repeated rather than shared: a method
     * serving both types would share one branch profile, and Q5_0's one- and two-token groups would reshape the
     * code C2 compiles for Q4_0's.
     */
    private static void scales(float[] d, int so, int blocks, float[] xs, int u0, int u1, int u2, int u3, int valid,
                               float[] sums, float[] out, int oo, int os) {
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
     * sums[b][j][i] = the integer sum of block b of row i (of the panel from {@code qo}, bits from {@code wo}) . token
     * u<j>'s pairs, j in [0, 4), as a float. Per pair, each half's 5-bit values are made once for the four tokens:
     * rows [0, L) {@code n + 16 b} (0..31), rows [L, P) {@code n - 8 + 16 b}; the tokens' offsets then take the 16
     * and the 8 off. Only Vector API calls in the loops (a helper left out of line would box its vectors); kept out
     * of line by the launchers, as Q4_0's is ({@link WeightMatrix}).
     */
    static void subSums(byte[] q, short[] w, int qo, int wo, int blocks, int[] xq, int[] xo, int u0, int u1, int u2,
                        int u3, int pairs, float[] sums) {
        int x0 = u0 * pairs, x1 = u1 * pairs, x2 = u2 * pairs, x3 = u3 * pairs;
        for (int b = 0; b < blocks; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0, s2 = s0, s3 = s0; // block sums, rows [0, L), per token
            ShortVector h0 = s0, h1 = s0, h2 = s0, h3 = s0;                  // block sums, rows [L, P)
            ShortVector wl = ShortVector.fromArray(S, w, wo + b * BITS);
            ShortVector wh = ShortVector.fromArray(S, w, wo + b * BITS + 2 * L);
            for (int i = b * PAIRS; i < b * PAIRS + PAIRS; i++) {
                ShortVector v = (ShortVector) ByteVector.fromArray(PAIR, q, qo + i * P).convertShape(B2S, S, 0);
                ShortVector lo = v.and((short) 0xF).add(wl.lanewise(ASHR, 15).and((short) 16));
                ShortVector hi = v.lanewise(ASHR, 4).add(wh.lanewise(ASHR, 15).and((short) 16));
                wl = wl.lanewise(LSHL, 1);
                wh = wh.lanewise(LSHL, 1);
                ShortVector xv = IntVector.broadcast(I, xq[x0 + i]).reinterpretAsShorts();
                s0 = lo.mul(xv).add(s0); h0 = hi.mul(xv).add(h0);
                xv = IntVector.broadcast(I, xq[x1 + i]).reinterpretAsShorts();
                s1 = lo.mul(xv).add(s1); h1 = hi.mul(xv).add(h1);
                xv = IntVector.broadcast(I, xq[x2 + i]).reinterpretAsShorts();
                s2 = lo.mul(xv).add(s2); h2 = hi.mul(xv).add(h2);
                xv = IntVector.broadcast(I, xq[x3 + i]).reinterpretAsShorts();
                s3 = lo.mul(xv).add(s3); h3 = hi.mul(xv).add(h3);
            }
            int sb = b * 4 * P;
            ShortVector o = IntVector.broadcast(I, xo[u0 * blocks + b]).reinterpretAsShorts();
            s0 = s0.sub(o).sub(o);
            h0 = h0.sub(o);
            o = IntVector.broadcast(I, xo[u1 * blocks + b]).reinterpretAsShorts();
            s1 = s1.sub(o).sub(o);
            h1 = h1.sub(o);
            o = IntVector.broadcast(I, xo[u2 * blocks + b]).reinterpretAsShorts();
            s2 = s2.sub(o).sub(o);
            h2 = h2.sub(o);
            o = IntVector.broadcast(I, xo[u3 * blocks + b]).reinterpretAsShorts();
            s3 = s3.sub(o).sub(o);
            h3 = h3.sub(o);
            // each row's even lane plus its odd lane, each sign-extended, as floats (wideRowSums, written out)
            IntVector e;
            e = s0.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb);
            e = h0.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + L);
            e = s1.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + P);
            e = h1.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + P + L);
            e = s2.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + 2 * P);
            e = h2.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + 2 * P + L);
            e = s3.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + 3 * P);
            e = h3.reinterpretAsInts();
            ((FloatVector) e.lanewise(LSHL, 16).lanewise(ASHR, 16).add(e.lanewise(ASHR, 16)).convert(I2F, 0))
                    .intoArray(sums, sb + 3 * P + L);
        }
    }

    /**
     * A prefill ({@link PanelKernels#widens}): as Q4_0's, each whole panel turned into floats {@code q - 16}, a chunk
     * of {@link PanelKernels#WIDEN_CHUNK} columns at a time ({@link #widen}), then Q4_0's twelve-token kernel over it.
     * Fewer tokens, a last partial panel, and hosts with 16 vector registers take {@link #group}.
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
                widen(q, w, p * cols * L + c0 / 2 * P, p * blocks * BITS + c0 / QK * BITS, width, wide);
                for (int t0 = 0; t0 < n; t0 += WIDE) { // each group's totals at t0 * P of tot
                    Q4_0Matrix.k2x12f(wide, d, p * blocks * P + c0 / QK * P, width, xg,
                            TokenGroups.offset(t0, cols) + c0 * WIDE, acts.scales(), blocks, c0 / QK, t0, n, tot, t0 * P);
                }
            }
            for (int t = 0; t < n; t++) {
                System.arraycopy(tot, t * P, out, oo + t * rows + p * P, P);
            }
        }
        groups(x, xo, n, out, oo, Math.max(from, whole), to);
    }

    /**
     * The {@code width} columns (whole blocks) whose pairs start at byte {@code qo} of q and whose fifth bits start at
     * {@code wo} of w, as floats {@code q - 16}: out[c * P + i] for column c of the chunk and row i of the panel. Per
     * pair, as Q4_0's widen, its bytes as one int per row (column a's byte in the low 16 bits, column b's in the
     * high 16); each half's bit words seen the same way, one int per row with column a's word low.
     */
    private static void widen(byte[] q, short[] w, int qo, int wo, int width, float[] out) {
        for (int k = 0; k < width / 2; k++) {
            int a = (k >> 4) * QK + (k & 15); // pair k holds columns a and a + 16 of the chunk
            int bo = wo + (k >> 4) * BITS;
            int low = 15 - (k & 15); // column a's bit in each int; column b's 16 higher
            IntVector v = pair(q, qo + k * P).reinterpretAsInts();
            IntVector bl = ShortVector.fromArray(S, w, bo).reinterpretAsInts();
            IntVector bh = ShortVector.fromArray(S, w, bo + 2 * L).reinterpretAsInts();
            ((FloatVector) v.and(0xF).add(bl.lanewise(LSHR, low).and(1).lanewise(LSHL, 4)).sub(16).convert(I2F, 0))
                    .intoArray(out, a * P);
            ((FloatVector) v.lanewise(LSHL, 24).lanewise(ASHR, 28).add(bh.lanewise(LSHR, low).and(1).lanewise(LSHL, 4))
                    .sub(8).convert(I2F, 0)).intoArray(out, a * P + L);
            ((FloatVector) v.lanewise(LSHR, 16).and(0xF).add(bl.lanewise(LSHR, low + 16).and(1).lanewise(LSHL, 4))
                    .sub(16).convert(I2F, 0)).intoArray(out, (a + 16) * P);
            ((FloatVector) v.lanewise(ASHR, 20).add(bh.lanewise(LSHR, low + 16).and(1).lanewise(LSHL, 4)).sub(8)
                    .convert(I2F, 0)).intoArray(out, (a + 16) * P + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int sbase = (row / P) * blocks * P + row % P;
        for (int c = 0; c < cols; c++) {
            int bit = (w[bitAt(row, c)] >> (15 - c % PAIRS)) & 1;
            dst[off + c] = (Q4_0Matrix.nibble(HALVES, q, cols, row, c) + 16 * bit - 8) * d[sbase + (c / QK) * P];
        }
    }
}
