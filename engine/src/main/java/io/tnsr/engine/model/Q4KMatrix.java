package io.tnsr.engine.model;

import static io.tnsr.engine.model.Int8Activations.high;
import static io.tnsr.engine.model.Int8Activations.Pairing.HALVES;
import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.rowSums;
import static io.tnsr.engine.model.Int8Activations.xpair;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q4_K weights (ggml block_q4_K): super-blocks of 256 elements, 144 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qs: 128 bytes]}. Sub-block s (32 elements, s in [0, 8)) has a
 * 6-bit scale sc and min m packed in {@code scales} (see {@link #packedScale}); its element l is
 * {@code d * sc * q - dmin * m} with q the low (s even) or high (s odd) nibble of qs[32 * (s / 2) + l].
 *
 * <p>Repacked at load ({@link #repack}): the 128 bytes of nibbles of each super-block as they are, and per
 * sub-block the float products {@code d * sc} and {@code dmin * m}, so that no kernel unpacks a 6-bit field
 * (every 32 bytes of quants are 64 elements, the low nibbles sub-block 2p and the high nibbles sub-block 2p + 1,
 * each value {@code q * scale - min}); then into row panels laid out as Q4_0's ({@link Q4_0Matrix}): per panel
 * and column pair (a, b) (a block's column j and j + 16), 2L bytes whose byte 2i holds column a of row i in its low
 * nibble and of row L + i in its high nibble, byte 2i + 1 the same for column b, a low nibble {@code q} and a high one {@code q - 8} as a
 * signed 4-bit number, as Q4_0's; per panel the scales and the negated mins, {@code [subBlocks][P]} floats each. With the bias, an element
 * is {@code (q - 8) * scale + (8 * scale - min)}.
 *
 * <p>Multiplied like Q4_0, in 16-bit integers against the activations quantized to 8 bits per sub-block
 * ({@link Int8Activations}; Q4_0's integer block sums serve unchanged, low rows corrected by the activations' offsets). Result of a (row, token), one token or
 * many: for each sub-block, {@code isum} = the exact integer sum of {@code (q - 8) * xq} over its 32 columns, then
 * {@code acc = fma((float) isum, scale * s, acc)} and {@code acc = fma(fma(scale, 8, -min), sx, acc)}, where s is
 * the activations' scale and sx the token's sum of x over the sub-block's columns (floats, in order, from zero;
 * computed once per matmul call for every token). Signed nibbles, not q itself: a row's two 16-bit sums then add
 * up within Q4_0's bound (the cheap {@code rowSums}), and the activations' rounding meets |q - 8| &lt;= 8, not
 * q &lt;= 15. The loops repeat Q4_0's on purpose (see there).
 *
 * <p>Also Q4_1 (ggml block_q4_1: blocks of 32 elements, 20 bytes, {@code [d: f16][m: f16][qs: 16 bytes]}, element
 * i &lt; 16 = (qs[i] &amp; 0xF) * d + m, element 16 + i = (qs[i] &gt;&gt; 4) * d + m): a block is one such sub-block
 * with scale d and min -m ({@link #repackQ4_1}), computed the same way, with 8-bit activations as llama.cpp's
 * q4_1 x q8_1 dot product.
 */
final class Q4KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 144;
    private static final int SUB = 32; // elements per sub-block (one scale and min)
    /** Tokens per {@link #k2x2} call. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final FloatVector EIGHT = FloatVector.broadcast(F, 8f);
    private static final ShortVector MINUS_SIXTEEN = ShortVector.broadcast(S, (short) -16);

    private final GgmlType type;
    private final int units;
    /** [panels][cols / 2][2L]: Q4_0's layout ({@link Q4_0Matrix#putNibble}). */
    private final byte[] q;
    /** [panels][units][P]: the scale of row r's sub-block b at (r / P) * units * P + b * P + r % P. */
    private final float[] s;
    /** [panels][units][P]: minus the min of row r's sub-block b, laid out as {@link #s}. */
    private final float[] mneg;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations(HALVES);
    /** [units][TOKENS][P]: the integer sub-block sums of {@link #k2x2} ([units][2][P]) and {@link #k4x2}, as floats. */
    private final float[] sums;

    Q4KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        this(name, rows, cols, GgmlType.Q4_K, packed);
    }

    /** Q4_1: {@code packed} as {@link #repackQ4_1} gives it. */
    static Q4KMatrix q4_1(String name, int rows, int cols, PackedBlocks packed) {
        return new Q4KMatrix(name, rows, cols, GgmlType.Q4_1, packed);
    }

    private Q4KMatrix(String name, int rows, int cols, GgmlType type, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.type = type;
        this.units = cols / SUB;
        packed.requireShape(name, rows, units, SUB / 2);
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": " + type + " needs a min per sub-block, but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.s = new float[arrayLength(name, rows, cols, (long) panels * units * P)];
        this.mneg = new float[s.length];
        this.sums = new float[units * TOKENS * P];
        // Row r's nibbles at r * cols / 2. Q4_K: element c in byte (c / 64) * 32 + c % 32, low nibble when
        // (c / 32) is even; Q4_1: in byte (c / 32) * 16 + c % 16, low nibble when c % 32 < 16.
        byte[] quants = packed.quants();
        boolean q4_1 = type == GgmlType.Q4_1;
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int b = quants[r * (cols / 2) + (q4_1 ? (c / 32) * 16 + c % 16 : (c / 64) * 32 + c % 32)];
                boolean low = q4_1 ? c % 32 < 16 : (c / 32) % 2 == 0;
                Q4_0Matrix.putNibble(HALVES, q, cols, r, c, low ? b & 0xF : (b >> 4) & 0xF);
            }
            int sbase = (r / P) * units * P + r % P;
            for (int u = 0; u < units; u++) {
                s[sbase + u * P] = packed.scales()[r * units + u];
                mneg[sbase + u * P] = -packed.mins()[r * units + u];
            }
        }
    }

    /** Heap bytes a rows x cols Q4_K matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + 2 * (cols / SUB) * Float.BYTES);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q4KMatrix(Q4KMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.type = shared.type;
        this.units = shared.units;
        this.q = shared.q;
        this.s = shared.s;
        this.mneg = shared.mneg;
        this.sums = new float[units * TOKENS * P];
    }

    @Override
    PanelMatrix view() {
        return new Q4KMatrix(this);
    }

    @Override
    public GgmlType type() {
        return type;
    }

    /**
     * 6-bit field {@code k} (0..15: scales of sub-blocks 0..7, then their mins) of the 12 packed bytes at
     * {@code sb}: fields 0-3 and 8-11 are the low 6 bits of bytes 0-7; fields 4-7 and 12-15 take 4 bits from
     * bytes 8-11 (low nibble for scales, high for mins) and their top 2 bits from the top of bytes 0-7.
     */
    static int packedScale(byte[] qs, int sb, int k) {
        int s = k & 7;
        int lowByte = (k >> 3) * 4 + s; // where the low 6 bits (s < 4) or the top 2 bits (s >= 4) live
        if (s < 4) {
            return qs[sb + lowByte] & 63;
        }
        int nib = (qs[sb + s + 4] & 0xFF) >> ((k >> 3) * 4) & 0xF;
        return nib | ((qs[sb + lowByte - 4] & 0xFF) >> 6) << 4;
    }

    /** Splits {@code blocks} super-blocks from {@code data} into nibbles and float sub-block scales and mins. */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, QK / 2)];
        float[] scales = new float[Math.multiplyExact(blocks, QK / SUB)];
        float[] mins = new float[scales.length];
        byte[] sb = new byte[16];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, 16);
            float d = Blocks.half(sb, 0);
            float dmin = Blocks.half(sb, 2);
            for (int s = 0; s < QK / SUB; s++) {
                scales[k * (QK / SUB) + s] = d * packedScale(sb, 4, s);
                mins[k * (QK / SUB) + s] = dmin * packedScale(sb, 4, s + 8);
            }
            data.get(k * BYTES + 16, quants, k * (QK / 2), QK / 2);
        }
        return new PackedBlocks(quants, scales, mins);
    }

    /**
     * Splits {@code blocks} Q4_1 blocks ({@code [d: f16][m: f16][qs: 16 bytes]}, element i &lt; 16 = (qs[i] &amp; 0xF) * d
     * + m, element 16 + i = (qs[i] &gt;&gt; 4) * d + m) from {@code data} into their nibbles as they are, the scale d and
     * the min -m: a 32-element Q4_K sub-block.
     */
    static PackedBlocks repackQ4_1(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, SUB / 2)];
        float[] scales = new float[blocks];
        float[] mins = new float[blocks];
        for (int k = 0; k < blocks; k++) {
            scales[k] = Blocks.half(data.getShort(k * 20));
            mins[k] = -Blocks.half(data.getShort(k * 20 + 2));
            data.get(k * 20 + 4, quants, k * (SUB / 2), SUB / 2);
        }
        return new PackedBlocks(quants, scales, mins);
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
        return PanelTouch.lines(q, p * cols * L, cols * L);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        int[] xoff = acts.offsets();
        for (int p = from; p < to; p++) {
            m1(q, s, mneg, p * cols * L, p * units * P, units, xq, xs, xoff, sx, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, scales and mins from {@code so}) . the prepared token: out[oo..oo+P). The
     * integer sums as {@link Q4_0Matrix}'s one-token kernel forms them: whole bytes, high nibbles, and the low rows'
     * sum {@code sum(v xq) - 16 sum(h xq) - offsets}.
     */
    private static void m1(byte[] q, float[] s, float[] mneg, int qo, int so, int units, int[] xq, float[] xs,
                           int[] xo, float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            ShortVector t0 = ShortVector.zero(S), s1 = t0; // sums of v * xq and of h * xq, rows [0, L) and [L, P)
            for (int k = b * SUB / 2; k < b * SUB / 2 + SUB / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    t0 = v.mul(xv).add(t0);
                    s1 = high(v).mul(xv).add(s1);
                }
            }
            ShortVector s0 = MINUS_SIXTEEN.mul(s1).add(t0).sub(xpair(xo, b));
            int sb = so + b * P;
            FloatVector xsv = FloatVector.broadcast(F, xs[b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            a0 = rowSums(s0).fma(d0.mul(xsv), a0);
            a1 = rowSums(s1).fma(d1.mul(xsv), a1);
            a0 = d0.fma(EIGHT, FloatVector.fromArray(F, mneg, sb)).fma(sxv, a0);
            a1 = d1.fma(EIGHT, FloatVector.fromArray(F, mneg, sb + L)).fma(sxv, a1);
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
     * As {@link #k2x2} for tokens t0 + j, j in [0, valid) (valid 3..4), the integer sums of four tokens in one pass
     * over the panel ({@link Q4_0Matrix#subSums}, kept out of line), then the scales and min terms in {@link #m1}'s
     * order ({@link ScaleMinTotals#four}): the same bits.
     */
    private void k4x2(int p, int t0, int valid, float[] out, int oo, int os) {
        Q4_0Matrix.subSums(q, p * cols * L, units, acts.pairs(), acts.offsets(), t0, t0 + 1, t0 + 2, t0 + valid - 1,
                cols / 2, sums);
        ScaleMinTotals.four(s, mneg, p * units * P, units, 8f, acts.scales(), units, 0, sx, t0, valid, sums, out, oo, os);
    }

    /**
     * Panel p . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for the panel's P rows
     * i. A missing second token repeats the first and is not stored. In two passes like Q4_0's (its integer block
     * sums, then the scales and here the min terms, in {@link #m1}'s order): one kernel doing both ran C2 (JDK 17)
     * out of its node budget and boxed.
     */
    private void k2x2(int p, int t0, int valid, float[] out, int oo, int os) {
        int so = p * units * P;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens: pairs at u<j> * cols / 2, sums and scales at u<j> * units
        Q4_0Matrix.blockSums(q, p * cols * L, units, acts.pairs(), acts.offsets(), u0 * (cols / 2), u1 * (cols / 2),
                u0 * units, u1 * units, sums);
        float[] xs = acts.scales();
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = so + b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(EIGHT, FloatVector.fromArray(F, mneg, sb)); // 8 * scale - min
            FloatVector m1 = d1.fma(EIGHT, FloatVector.fromArray(F, mneg, sb + L));
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

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int sbase = (row / P) * units * P + row % P;
        for (int c = 0; c < cols; c++) {
            int u = sbase + (c / SUB) * P;
            dst[off + c] = (Q4_0Matrix.nibble(HALVES, q, cols, row, c) + 8) * s[u] + mneg[u]; // q * scale - min, as repacked
        }
    }
}
