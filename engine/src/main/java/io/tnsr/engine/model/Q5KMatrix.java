package io.tnsr.engine.model;

import static io.tnsr.engine.model.Blocks.I;
import static io.tnsr.engine.model.Int8Activations.PAIR;
import static io.tnsr.engine.model.Int8Activations.Pairing.HALVES;
import static io.tnsr.engine.model.Int8Activations.pair;
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
 * Q5_K weights (ggml block_q5_K): super-blocks of 256 elements, 176 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qh: 32 bytes][qs: 128 bytes]}. Sub-block s (32 elements) has a
 * 6-bit scale sc and min m packed as Q4_K's ({@link Q4KMatrix#packedScale}); element e = 64 g + 32 h + l has
 * q = nibble h of qs[32 g + l] + 16 * bit (e / 32) of qh[l] (0..31) and is {@code d * sc * q - dmin * m}.
 *
 * <p>Repacked at load ({@link #repack}: each element's {@code q - 16} as an int8, per sub-block its 6-bit sc and m,
 * per super-block d and dmin), then into row panels ({@link PanelKernels}): per panel and column pair (a, b) (a
 * sub-block's column j and j + 16, {@link Int8Activations.Pairing#HALVES}), 2P bytes, the first P for rows [0, L)
 * (byte 2i column a of row i, byte 2i + 1 column b), the next P the same for rows [L, P); per panel and sub-block
 * the rows' sc, then their m, as bytes ({@code [units][2][P]}); per panel and super-block the rows' d, then their
 * -dmin, as floats ({@code [supers][2][P]}). The kernels make a sub-block's scale {@code d * sc} and negated min
 * {@code -dmin * m} in registers: the float products ggml's dequantizer computes (exact: an f16 times an integer of
 * at most 6 bits), so the same bits as floats stored per sub-block, in 0.75 bits per weight where those took 2 (a
 * one-token call streams its panels from memory: 280 bytes per 256 weights against 320). With the bias, an element
 * is {@code (q - 16) * scale + (16 * scale - min)}. A 5-bit {@code q - 16} does not fit a signed nibble, hence a
 * byte.
 *
 * <p>Multiplied as Q4_K is, in 16-bit integers against the activations quantized to 8 bits per block of 32
 * ({@link Int8Activations}), as llama.cpp multiplies Q5_K (against q8_K): a 2L-byte load sign-extended to 16-bit
 * lanes is one column pair of L rows, no nibble to extract. Result of a (row, token), one token or many: for each
 * sub-block, {@code isum} = the exact integer sum of {@code (q - 16) * xq} over its 32 columns, then
 * {@code acc = fma((float) isum, scale * s, acc)} and {@code acc = fma(fma(scale, 16, -min), sx, acc)}, where s is
 * the activations' scale and sx the token's sum of x over the sub-block's columns (floats, in order, from zero).
 * Bounds: a 16-bit lane sums the 16 products of its column parity, each at most 16 * 127 in magnitude: 32512,
 * exact; the even and odd lanes of a row together reach 65024, past 16 bits, so {@link #rowSums} adds them as ints
 * (Q4_0's cheaper trick needs the sum within 16 bits).
 *
 * <p>8-bit activations rather than exact dequantization against float activations ({@link Int8PanelMatrix}, whose
 * Q6_K panels have the same byte per weight; it would add a min term): measured the same speed, Q5_K here
 * against Q6_K there (one thread, three runs alternating in one JVM, minimum times: 2048 x 768, one token, 43-47
 * vs 40-45 G weights/s, 16 tokens 76-79 vs 77-80; 4096 x 4096, one token, from memory, 31-36 vs 31-37), and it is
 * llama.cpp's arithmetic, so logits follow llama.cpp's (ScaleMinLlamaCppLogitsTest). The
 * activations' rounding adds about 0.4% relative error per dot product, a tenth of the weights' own (3.6%).
 *
 * <p>The loops repeat {@link Q4KMatrix}'s on purpose (one final class per layout keeps each kernel monomorphic).
 * Cost: per 256 elements 280 bytes on the heap (file: 176).
 */
final class Q5KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 176;
    private static final int SUB = 32; // elements per sub-block (one scale and min)
    private static final int SUBS = QK / SUB; // sub-blocks per super-block
    /** Bytes per super-block {@link #repack} writes: sc and m per sub-block, then {@code q - 16} per element. */
    private static final int PACKED = 2 * SUBS + QK;
    /** Tokens per {@link #group} call: three or four through {@link #k4x2}, one or two through {@link #k2x2}. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final FloatVector SIXTEEN = FloatVector.broadcast(F, 16f);

    private final int units;
    /** [panels][cols / 2][2P]: laid out as above ({@link #at}). */
    private final byte[] q;
    /** [panels][units][2][P]: row r's sc of sub-block b at (r / P) * units * 2P + b * 2P + r % P, its m P on. */
    private final byte[] sm;
    /** [panels][units / 8][2][P]: row r's d of super-block k at (r / P) * units / 8 * 2P + k * 2P + r % P, -dmin P on. */
    private final float[] dd;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations(HALVES);
    /** [units][2][P]: {@link #k2x2}'s integer sub-block sums, as floats. */
    private final float[] sums;
    /** The scales and mins of the panel in progress as floats, for the batched kernels. */
    private final ExpandedScales expanded;

    Q5KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.units = cols / SUB;
        int supers = cols / QK;
        packed.requireShape(name, rows, supers, PACKED);
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": Q5_K needs a dmin per super-block, but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * P)];
        this.sm = new byte[arrayLength(name, rows, cols, (long) panels * units * 2 * P)];
        this.dd = new float[arrayLength(name, rows, cols, (long) panels * supers * 2 * P)];
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
        byte[] quants = packed.quants();
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < supers; k++) {
                int at = (r * supers + k) * PACKED; // this super-block's sc, m, then q - 16 per element
                for (int e = 0; e < QK; e++) {
                    q[at(cols, r, k * QK + e)] = quants[at + 2 * SUBS + e];
                }
                ScaleMinTotals.putSuperBlock(sm, dd, units, SUBS, r, k, quants, at, packed.scales()[r * supers + k],
                        packed.mins()[r * supers + k]);
            }
        }
    }

    /** The byte of row r, column c. */
    private static int at(int cols, int r, int c) {
        return (r / P) * cols * P + HALVES.pairOf(c) * 2 * P + (r % P) / L * P + 2 * (r % L) + HALVES.halfOf(c);
    }

    /** Heap bytes a rows x cols Q5_K matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols + 2 * (cols / SUB) + 2 * (cols / QK) * Float.BYTES);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q5KMatrix(Q5KMatrix shared) {
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
        return new Q5KMatrix(this);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q5_K;
    }

    /**
     * Splits {@code blocks} super-blocks from {@code data} into, per super-block, its eight 6-bit sc, its eight m and
     * {@code q - 16} per element ({@link #PACKED} bytes), and d and dmin as floats.
     */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, PACKED)];
        float[] d = new float[blocks];
        float[] dmin = new float[blocks];
        byte[] sb = new byte[BYTES];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, BYTES);
            d[k] = Blocks.half(sb, 0);
            dmin[k] = Blocks.half(sb, 2);
            int at = k * PACKED;
            for (int j = 0; j < SUBS; j++) {
                quants[at + j] = (byte) Q4KMatrix.packedScale(sb, 4, j);
                quants[at + SUBS + j] = (byte) Q4KMatrix.packedScale(sb, 4, j + 8);
            }
            for (int e = 0; e < QK; e++) { // e = 64 g + 32 h + l: nibble h of qs[32 g + l], bit e / 32 of qh[l]
                int low = (sb[48 + (e / 64) * 32 + e % 32] >> ((e / 32) % 2 * 4)) & 0xF;
                int high = (sb[16 + e % 32] >> (e / 32)) & 1;
                quants[at + 2 * SUBS + e] = (byte) (low + 16 * high - 16);
            }
        }
        return new PackedBlocks(quants, d, dmin);
    }

    /** Quantizes tokens [0, n) of x; sx[t * units + u] = sum of x[t] over sub-block u's columns, in order from zero. */
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
        return PanelTouch.lines(q, p * cols * P, cols * P);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        for (int p = from; p < to; p++) {
            m1(q, sm, dd, p * cols * P, p * units * 2 * P, p * (units / SUBS) * 2 * P, units, xq, xs, sx, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, integer scales and mins from {@code mo}, d and -dmin from {@code dn}) . the
     * prepared token: out[oo..oo+P).
     */
    private static void m1(byte[] q, byte[] sm, float[] dd, int qo, int mo, int dn, int units, int[] xq, float[] xs,
                           float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // the sub-block's sums, rows [0, L) and [L, P)
            for (int k = b * SUB / 2; k < b * SUB / 2 + SUB / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    int o = qo + i * 2 * P;
                    ShortVector xv = xpair(xq, i);
                    s0 = pair(q, o).mul(xv).add(s0);
                    s1 = pair(q, o + P).mul(xv).add(s1);
                }
            }
            int sb = mo + b * 2 * P;
            int dk = dn + b / SUBS * 2 * P; // the super-block's d, then -dmin
            FloatVector xsv = FloatVector.broadcast(F, xs[b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            FloatVector d0 = Blocks.signedBytes(sm, sb).mul(FloatVector.fromArray(F, dd, dk)); // d * sc: exact
            FloatVector d1 = Blocks.signedBytes(sm, sb + L).mul(FloatVector.fromArray(F, dd, dk + L));
            a0 = rowSums(s0).fma(d0.mul(xsv), a0);
            a1 = rowSums(s1).fma(d1.mul(xsv), a1);
            FloatVector m0 = Blocks.signedBytes(sm, sb + P).mul(FloatVector.fromArray(F, dd, dk + P)); // -dmin * m: exact
            FloatVector m1 = Blocks.signedBytes(sm, sb + P + L).mul(FloatVector.fromArray(F, dd, dk + P + L));
            a0 = d0.fma(SIXTEEN, m0).fma(sxv, a0);
            a1 = d1.fma(SIXTEEN, m1).fma(sxv, a1);
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
        subSums(q, p * cols * P, units, acts.pairs(), t0 * pairs, (t0 + 1) * pairs, (t0 + 2) * pairs,
                (t0 + valid - 1) * pairs, sums);
        expanded.of(sm, dd, p);
        ScaleMinTotals.four(expanded.scales, expanded.mins, 0, units, 16f, acts.scales(), units, 0, sx, t0, valid, sums, out, oo, os);
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
        int so = 0;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens: pairs at u<j> * cols / 2, sums and scales at u<j> * units
        subSums(q, p * cols * P, units, acts.pairs(), u0 * (cols / 2), u1 * (cols / 2), sums);
        float[] xs = acts.scales();
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = so + b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(SIXTEEN, FloatVector.fromArray(F, mneg, sb)); // 16 * scale - min
            FloatVector m1 = d1.fma(SIXTEEN, FloatVector.fromArray(F, mneg, sb + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * units + b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[u0 * units + b]);
            a0 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0));
            b0 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0));
            xsv = FloatVector.broadcast(F, xs[u1 * units + b]);
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
     * x0, x1), as a float.
     */
    private static void subSums(byte[] q, int qo, int units, int[] xq, int x0, int x1, float[] sums) {
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // sub-block sums, rows [0, L)
            ShortVector t0 = s0, t1 = s0;                  // sub-block sums, rows [L, P)
            for (int i = b * SUB / 2; i < b * SUB / 2 + SUB / 2; i++) {
                int o = qo + i * 2 * P;
                ShortVector w0 = pair(q, o);
                ShortVector w1 = pair(q, o + P);
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
     * Vector API calls, no helper of ours (pair, xpair, rowSums written out): in a method this large a helper could
     * be left out of line, and would box its vectors.
     */
    private static void subSums(byte[] q, int qo, int units, int[] xq, int x0, int x1, int x2, int x3, float[] sums) {
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0, s2 = s0, s3 = s0; // sub-block sums, rows [0, L), per token
            ShortVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;                  // sub-block sums, rows [L, P)
            for (int i = b * SUB / 2; i < b * SUB / 2 + SUB / 2; i++) {
                int o = qo + i * 2 * P;
                ShortVector w0 = (ShortVector) ByteVector.fromArray(PAIR, q, o).convertShape(VectorOperators.B2S, S, 0);
                ShortVector w1 = (ShortVector) ByteVector.fromArray(PAIR, q, o + P)
                        .convertShape(VectorOperators.B2S, S, 0);
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
            // each row's even lane plus its odd lane, added as ints, as floats (rowSums, written out)
            IntVector v;
            v = s0.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb);
            v = t0.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + L);
            v = s1.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + P);
            v = t1.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + P + L);
            v = s2.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 2 * P);
            v = t2.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 2 * P + L);
            v = s3.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 3 * P);
            v = t3.reinterpretAsInts();
            ((FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                    .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0)).intoArray(sums, sb + 3 * P + L);
        }
    }

    /**
     * Per row: its even lane plus its odd lane, as floats; exact. Seen as an int, a row is
     * {@code odd * 65536 + (even & 0xFFFF)}: {@code (v << 16) >> 16} is even, {@code v >> 16} odd, added as ints
     * (their sum may pass 16 bits). Two small methods, as {@link Int8Activations#rowSums} (C2 inlines them anywhere).
     */
    private static FloatVector rowSums(ShortVector s) {
        return (FloatVector) evenPlusOdd(s.reinterpretAsInts()).convert(VectorOperators.I2F, 0);
    }

    /** {@link #rowSums}' integer part. */
    private static IntVector evenPlusOdd(IntVector v) {
        return v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16).add(v.lanewise(VectorOperators.ASHR, 16));
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int dn = ScaleMinTotals.superAt(row, 0, units / SUBS);
        for (int c = 0; c < cols; c++) {
            int u = ScaleMinTotals.scaleAt(row, c / SUB, units);
            int k = dn + c / QK * 2 * P;
            // q * (d * sc) - dmin * m, as ggml dequantizes
            dst[off + c] = (q[at(cols, row, c)] + 16) * (dd[k] * sm[u]) + dd[k + P] * sm[u + P];
        }
    }
}
