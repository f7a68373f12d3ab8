package io.tnsr.engine.model;

import static io.tnsr.engine.model.Blocks.I;
import static io.tnsr.engine.model.Int8Activations.PAIR;
import static io.tnsr.engine.model.Int8Activations.Pairing.ADJACENT;
import static io.tnsr.engine.model.Int8Activations.high;
import static io.tnsr.engine.model.Int8Activations.lowUnsigned;
import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.rowSums;
import static io.tnsr.engine.model.Int8Activations.xpair;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q2_K (ggml block_q2_K): super-blocks of 256 elements, 84 bytes each,
 * {@code [scales: 16 bytes][qs: 64 bytes][d: f16][dmin: f16]}. Sub-block s (16 elements) has
 * {@code scales[s] = m << 4 | sc}; element e = 128 n + 32 j + l has q = bits 2j, 2j + 1 of qs[32 n + l] (0..3) and is
 * {@code d * sc * q - dmin * m}.
 *
 * <p>Repacked at load ({@link #repack}) into row panels: the quants laid out as Q4_0's ({@link Q4_0Matrix}) but with
 * adjacent columns paired, so that each sub-block of 16 owns 8 whole pairs ({@link
 * Int8Activations.Pairing#ADJACENT}): per panel and column pair (c, c + 1), 2L bytes whose byte 2i holds column c of
 * row i in its low nibble and of row L + i in its high nibble, byte 2i + 1 the same for column c + 1, each nibble
 * {@code n = q + 6} (Q4_0's layout: a low nibble unsigned, read with one AND and less 8 in the lane; a high one
 * {@code n - 8} as a signed 4-bit number, read with one shift; either way {@code q - 2}, and shifts share port 0 with
 * the 16-bit multiplies on Intel's cores). {@link Q3KMatrix} keeps its quants in this layout too. Per panel and
 * sub-block the rows' integer sc, then their m, as bytes ({@code [units][2][P]}); per panel and super-block the rows'
 * d, then their -dmin, as floats ({@code [supers][2][P]}). The kernels make a sub-block's scale {@code d * sc} and
 * negated min {@code -dmin * m} in registers: the float products ggml's dequantizer computes (exact: an f16 times an
 * integer of at most 8 bits), so the same bits as floats stored per sub-block, in 1.25 bits per weight where those
 * took 4. Nibbles and byte scales, not bytes and float scales: decode of a large matrix streams its panels from
 * memory.
 *
 * <p>Multiplied as Q4_K is, in 16-bit integers against the activations quantized to 8 bits per block of 32 ({@link
 * Int8Activations}), as llama.cpp multiplies Q2_K (against q8_K). Result of a (row, token), one token or many: for
 * each sub-block, {@code isum} = the exact integer sum of {@code (q - 2) * xq} over its 16 columns, then
 * {@code acc = fma((float) isum, scale * s, acc)} and {@code acc = fma(fma(scale, 2, -min), sx, acc)}, where s is the
 * scale of the activations' block of 32 holding the sub-block and sx the token's sum of x over the sub-block's columns
 * (floats, in order, from zero). A 16-bit lane sums 8 products of at most 4 * 127, a row's two lanes 8128: Q4_0's
 * {@code rowSums} is exact. The activations' rounding adds about 0.4% relative error per dot product, far under the
 * weights' own (about 23%).
 *
 * <p>The loops repeat {@link Q4KMatrix}'s on purpose (one final class per layout keeps each kernel monomorphic).
 * Cost: per 256 elements 168 bytes on the heap (file: 84).
 */
final class Q2KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 84;
    private static final int SUB = 16; // elements per sub-block (one scale and min)
    private static final int SUBS = QK / SUB; // sub-blocks per super-block
    /** Tokens per {@link #group} call: three or four through {@link #k4x2}, one or two through {@link #k2x2}. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final FloatVector TWO = FloatVector.broadcast(F, 2f);

    /** What the integer sums leave out of each quant ({@code q - 2}). */
    private static final float BIAS = 2f;

    private final int units;
    /** [panels][cols / 2][2L]: Q4_0's layout ({@link Q4_0Matrix#putNibble}). */
    private final byte[] q;
    /** [panels][units][2][P]: row r's sc of sub-block b at (r / P) * units * 2P + b * 2P + r % P, its m P on. */
    private final byte[] sm;
    /** [panels][units / 16][2][P]: row r's d of super-block k at (r / P) * units / 16 * 2P + k * 2P + r % P, -dmin P on. */
    private final float[] dd;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations(ADJACENT);
    /** [units][2][P]: {@link #k2x2}'s integer sub-block sums, as floats. */
    private final float[] sums;
    /** The scales and mins of the panel in progress as floats, for the batched kernels. */
    private final ExpandedScales expanded;

    /** {@code packed} as {@link #repack} gives it. */
    Q2KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.units = cols / SUB;
        int supers = cols / QK;
        int payload = BYTES - 4;
        packed.requireShape(name, rows, supers, payload);
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": Q2_K needs a dmin per super-block, but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.sm = new byte[arrayLength(name, rows, cols, (long) panels * units * 2 * P)];
        this.dd = new float[arrayLength(name, rows, cols, (long) panels * supers * 2 * P)];
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
        byte[] quants = packed.quants();
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < supers; k++) {
                int at = (r * supers + k) * payload; // this super-block's payload
                for (int c = k * QK; c < k * QK + QK; c++) {
                    int e = c % QK;
                    // the file's qs, element e at bits 2 ((e / 32) % 4) of qs[(e / 128) * 32 + e % 32]
                    int n = ((quants[at + SUBS + e / 128 * 32 + e % 32] >> (e / 32 % 4 * 2)) & 3) + 6; // n - 8 = q - 2
                    Q4_0Matrix.putNibble(ADJACENT, q, cols, r, c, n);
                }
                for (int j = 0; j < SUBS; j++) {
                    int u = k * SUBS + j;
                    int b = quants[at + j];
                    sm[ScaleMinTotals.scaleAt(r, u, units)] = (byte) (b & 0xF);
                    sm[ScaleMinTotals.scaleAt(r, u, units) + P] = (byte) ((b & 0xFF) >> 4);
                }
                int da = ScaleMinTotals.superAt(r, k, supers);
                dd[da] = packed.scales()[r * supers + k];
                dd[da + P] = -packed.mins()[r * supers + k];
            }
        }
    }

    /** Heap bytes a rows x cols Q2_K matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + 2 * (cols / SUB) + 2 * (cols / QK) * Float.BYTES);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q2KMatrix(Q2KMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.units = shared.units;
        this.q = shared.q;
        this.sm = shared.sm;
        this.dd = shared.dd;
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
    }

    @Override
    PanelMatrix view() {
        return new Q2KMatrix(this);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q2_K;
    }

    /**
     * Per super-block its 16 bytes of scales and 64 of quants as they are (the file's first 80), d and dmin as
     * floats.
     */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, BYTES - 4)];
        float[] d = new float[blocks];
        float[] dmin = new float[blocks];
        byte[] sb = new byte[BYTES];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, BYTES);
            d[k] = Blocks.half(sb, 80);
            dmin[k] = Blocks.half(sb, 82);
            System.arraycopy(sb, 0, quants, k * (BYTES - 4), BYTES - 4);
        }
        return new PackedBlocks(quants, d, dmin);
    }

    /**
     * Quantizes tokens [0, n) of x; sx[t * units + u] = sum of x[t] over sub-block u's columns, in order from zero.
     */
    @Override
    protected void prepare(float[] x, int xo, int n) {
        acts.quantize(x, xo, n, cols);
        if (sx.length < n * units) {
            sx = new float[n * units]; // grows to the largest call once; steady state allocates nothing
        }
        for (int t = 0; t < n; t++) {
            for (int u = 0; u < units; u++) {
                float sum = 0f;
                for (int c = u * SUB, o = xo + t * cols; c < u * SUB + SUB; c++) {
                    sum += x[o + c];
                }
                sx[t * units + u] = sum;
            }
        }
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * cols * L, cols * L);
    }

    /**
     * A call per panel: {@link #m1} is not inlined here (445 bytecodes, past C2's default limit, and forced inline it
     * passes C2's node budget in this loop and boxes: 30-34 us a call for 768 x 768 against 15-17).
     */
    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        for (int p = from; p < to; p++) {
            m1(q, sm, dd, p * cols * L, p * units * 2 * P, p * (units / SUBS) * 2 * P, units, xq, xs, sx, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, integer scales and mins from {@code mo}, d and -dmin from {@code dn}) . the
     * prepared token: out[oo..oo+P). Q4_0's trick of never extracting the low nibbles ({@link Q4_0Matrix}) did not
     * pay here: its corrections took C2 (JDK 17) past its node budget in this method, and the scales then had to come
     * through L1 as floats, which cost what the trick saved.
     */
    private static void m1(byte[] q, byte[] sm, float[] dd, int qo, int mo, int dn, int units, int[] xq, float[] xs,
                           float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // the sub-block's sums, rows [0, L) and [L, P)
            for (int k = b * SUB / 2; k < b * SUB / 2 + SUB / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    s0 = lowUnsigned(v).sub((short) 8).mul(xv).add(s0);
                    s1 = high(v).mul(xv).add(s1);
                }
            }
            int sb = mo + b * 2 * P;
            int dk = dn + b / SUBS * 2 * P; // the super-block's d, then -dmin
            FloatVector d0 = Blocks.signedBytes(sm, sb).mul(FloatVector.fromArray(F, dd, dk)); // d * sc: exact
            FloatVector d1 = Blocks.signedBytes(sm, sb + L).mul(FloatVector.fromArray(F, dd, dk + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[b >> 1]); // two sub-blocks per block of 32 activations
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            a0 = rowSums(s0).fma(d0.mul(xsv), a0);
            a1 = rowSums(s1).fma(d1.mul(xsv), a1);
            FloatVector m0 = Blocks.signedBytes(sm, sb + P).mul(FloatVector.fromArray(F, dd, dk + P)); // -dmin * m: exact
            FloatVector m1 = Blocks.signedBytes(sm, sb + P + L).mul(FloatVector.fromArray(F, dd, dk + P + L));
            a0 = d0.fma(TWO, m0).fma(sxv, a0);
            a1 = d1.fma(TWO, m1).fma(sxv, a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        if (valid > 2) {
            k4x2(p, t0, valid, out, oo, os);
        } else {
            k2x2(p, t0, valid, out, oo, os);
        }
    }

    /**
     * As {@link #k2x2} for tokens t0 + j, j in [0, valid) (valid 3..4): the integer sums of four tokens in one pass
     * over the panel ({@link #subSums}, the four-token one), then the scales and min terms in {@link #m1}'s order
     * ({@link ScaleMinTotals#four}): the same bits.
     */
    private void k4x2(int p, int t0, int valid, float[] out, int oo, int os) {
        int pairs = cols / 2; // a missing fourth token repeats the third
        subSums(q, p * cols * L, units, acts.pairs(), t0 * pairs, (t0 + 1) * pairs, (t0 + 2) * pairs,
                (t0 + valid - 1) * pairs, sums);
        // the activations' scales are per 32 columns: two sub-blocks of 16 each
        expanded.of(sm, dd, p);
        ScaleMinTotals.four(expanded.scales, expanded.mins, 0, units, BIAS, acts.scales(), cols / Int8Activations.QK, 1, sx, t0,
                valid, sums, out, oo, os);
    }

    /**
     * Panel p . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for the panel's P rows
     * i. A missing second token repeats the first and is not stored. In two passes like Q4_K's ({@link #subSums},
     * then the scales and the min terms in {@link #m1}'s order), for the same reason (C2's node budget). The
     * launchers and tests keep subSums out of line ({@code -XX:CompileCommand=dontinline,...::subSums}, see
     * {@link WeightMatrix}): inlined into this method, one engine-bench JVM in the few run boxed its vectors in
     * prefill and batched decode (Q2_K 32-41 MB per token, prefill 28 instead of ~300 tokens/s); out of line, four
     * JVMs of Q2_K and Q5_K allocated nothing there. Made too large to inline instead (two sub-blocks per trip,
     * written out), subSums boxed in every JVM (160-380 MB per token).
     */
    private void k2x2(int p, int t0, int valid, float[] out, int oo, int os) {
        expanded.of(sm, dd, p);
        float[] s = expanded.scales;
        float[] mneg = expanded.mins;
        int blocks = cols / Int8Activations.QK;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens
        subSums(q, p * cols * L, units, acts.pairs(), u0 * (cols / 2), u1 * (cols / 2), sums);
        float[] xs = acts.scales();
        FloatVector bv = FloatVector.broadcast(F, BIAS);
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(bv, FloatVector.fromArray(F, mneg, sb)); // bias * scale - min
            FloatVector m1 = d1.fma(bv, FloatVector.fromArray(F, mneg, sb + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * blocks + (b >> 1)]);
            FloatVector sxv = FloatVector.broadcast(F, sx[u0 * units + b]);
            a0 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0));
            b0 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0));
            xsv = FloatVector.broadcast(F, xs[u1 * blocks + (b >> 1)]);
            sxv = FloatVector.broadcast(F, sx[u1 * units + b]);
            a1 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1));
            b1 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1));
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
    }

    /**
     * sums[b][j][i] = the integer sum of sub-block b of row i (of the panel from {@code qo}) . token j's pairs (from
     * x0, x1), as a float. {@link Q3KMatrix}'s batched kernels share it (the same nibble layout).
     */
    static void subSums(byte[] q, int qo, int units, int[] xq, int x0, int x1, float[] sums) {
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // sub-block sums, rows [0, L)
            ShortVector t0 = s0, t1 = s0;                  // sub-block sums, rows [L, P)
            for (int i = b * SUB / 2; i < b * SUB / 2 + SUB / 2; i++) {
                ShortVector v = pair(q, qo + i * P);
                ShortVector w0 = lowUnsigned(v).sub((short) 8);
                ShortVector w1 = high(v);
                ShortVector xv = xpair(xq, x0 + i);
                s0 = w0.mul(xv).add(s0); t0 = w1.mul(xv).add(t0);
                xv = xpair(xq, x1 + i);
                s1 = w0.mul(xv).add(s1); t1 = w1.mul(xv).add(t1);
            }
            int sb = b * 2 * P;
            rowSums(s0).intoArray(sums, sb);
            rowSums(t0).intoArray(sums, sb + L);
            rowSums(s1).intoArray(sums, sb + P);
            rowSums(t1).intoArray(sums, sb + P + L);
        }
    }

    /**
     * As the two-token {@code subSums} for four tokens' pairs (from x0 .. x3): sums[b][j][i], j in [0, 4). Only
     * Vector API calls, no helper of ours (pair, lowUnsigned, high, xpair, rowSums written out): in a method this
     * large a helper could be left out of line, and would box its vectors.
     */
    static void subSums(byte[] q, int qo, int units, int[] xq, int x0, int x1, int x2, int x3, float[] sums) {
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0, s2 = s0, s3 = s0; // sub-block sums, rows [0, L), per token
            ShortVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;                  // sub-block sums, rows [L, P)
            for (int i = b * SUB / 2; i < b * SUB / 2 + SUB / 2; i++) {
                ShortVector v = (ShortVector) ByteVector.fromArray(PAIR, q, qo + i * P)
                        .convertShape(VectorOperators.B2S, S, 0);
                ShortVector w0 = v.and((short) 0xF).sub((short) 8);
                ShortVector w1 = v.lanewise(VectorOperators.ASHR, 4);
                ShortVector xv = IntVector.broadcast(I, xq[x0 + i]).reinterpretAsShorts();
                s0 = w0.mul(xv).add(s0); t0 = w1.mul(xv).add(t0);
                xv = IntVector.broadcast(I, xq[x1 + i]).reinterpretAsShorts();
                s1 = w0.mul(xv).add(s1); t1 = w1.mul(xv).add(t1);
                xv = IntVector.broadcast(I, xq[x2 + i]).reinterpretAsShorts();
                s2 = w0.mul(xv).add(s2); t2 = w1.mul(xv).add(t2);
                xv = IntVector.broadcast(I, xq[x3 + i]).reinterpretAsShorts();
                s3 = w0.mul(xv).add(s3); t3 = w1.mul(xv).add(t3);
            }
            int sb = b * 4 * P;
            // each row's even lane plus its odd lane, as floats (Int8Activations.rowSums, written out)
            IntVector v;
            v = s0.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb);
            v = t0.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + L);
            v = s1.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + P);
            v = t1.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + P + L);
            v = s2.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 2 * P);
            v = t2.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 2 * P + L);
            v = s3.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 3 * P);
            v = t3.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16)
                    .convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 3 * P + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int dn = ScaleMinTotals.superAt(row, 0, units / SUBS);
        for (int c = 0; c < cols; c++) {
            int u = ScaleMinTotals.scaleAt(row, c / SUB, units);
            int k = dn + c / QK * 2 * P;
            float scale = dd[k] * sm[u];
            int n = Q4_0Matrix.nibble(ADJACENT, q, cols, row, c); // q - 2
            dst[off + c] = (n + 2) * scale + dd[k + P] * sm[u + P]; // as ggml dequantizes: q * scale - min
        }
    }
}
