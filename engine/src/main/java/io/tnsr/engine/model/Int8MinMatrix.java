package io.tnsr.engine.model;

import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.xpair;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * K-quants with a scale and a min per sub-block whose quants are wider than a nibble's signed range or whose
 * sub-blocks are 16 elements: one int8 per element, {@code q - o}, and per sub-block a float scale and min; an
 * element is {@code q * scale - min}.
 * <ul>
 * <li>Q5_K (ggml block_q5_K): super-blocks of 256 elements, 176 bytes,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qh: 32 bytes][qs: 128 bytes]}; sub-block s (32 elements) has a
 * 6-bit scale sc and min m packed as Q4_K's ({@link Q4KMatrix#packedScale}); element e = 64 g + 32 h + l has
 * q = nibble h of qs[32 g + l] + 16 * bit (e / 32) of qh[l] (0..31) and is {@code d * sc * q - dmin * m}.
 * Sub-blocks of 32, o = 16.</li>
 * <li>Q2_K (ggml block_q2_K): super-blocks of 256 elements, 84 bytes,
 * {@code [scales: 16 bytes][qs: 64 bytes][d: f16][dmin: f16]}; sub-block s (16 elements) has
 * {@code scales[s] = m << 4 | sc}; element e = 128 n + 32 j + l has q = bits 2j, 2j + 1 of qs[32 n + l] (0..3)
 * and is {@code d * sc * q - dmin * m}. Sub-blocks of 16, o = 2.</li>
 * </ul>
 *
 * <p>Repacked at load ({@link #repackQ5K}, {@link #repackQ2K}: each element's {@code q - o} as an int8, the float
 * products {@code d * sc} and {@code dmin * m} per sub-block, the bits the decoder computes), then into row panels
 * ({@link PanelKernels}): per panel and column pair (c, c + 1), 2P bytes, the first P for rows [0, L) (byte 2i
 * column c of row i, byte 2i + 1 column c + 1), the next P the same for rows [L, P); per panel the scales and the
 * negated mins, {@code [subBlocks][P]} floats each, as {@link Q4KMatrix}'s. With the bias, an element is
 * {@code (q - o) * scale + (o * scale - min)}.
 *
 * <p>Multiplied as Q4_K is, in 16-bit integers against the activations quantized to 8 bits per block of 32
 * ({@link Int8Activations}), the way llama.cpp multiplies these types (against q8_K): a 2L-byte load sign-extended
 * to 16-bit lanes is one column pair of L rows, no nibble to extract. Result of a (row, token), one token or
 * many: for each sub-block, {@code isum} = the exact integer sum of {@code (q - o) * xq} over its columns, then
 * {@code acc = fma((float) isum, scale * s, acc)} and {@code acc = fma(fma(scale, o, -min), sx, acc)}, where s is
 * the scale of the activations' block of 32 holding the sub-block and sx the token's sum of x over the sub-block's
 * columns (floats, in order, from zero). Bounds: a 16-bit lane sums 16 products of its column parity (Q5_K), each
 * at most 16 * 127 in magnitude, 32512: exact; the even and odd lanes of a row together reach 65024, past 16 bits,
 * so {@link #rowSums} adds them as ints (Q4_0's cheaper trick needs the sum within 16 bits).
 *
 * <p>Why 8-bit activations and not exact dequantization with float activations ({@link Int8PanelMatrix} plus a
 * min term): the integer kernels do the work of two weights per 16-bit multiply-add where the float path converts
 * each weight and does one FMA per weight; docs/engine-speed.md has both speeds. The activations' rounding adds
 * about 0.4% relative error per dot product, under the weights' own (Q5_K about 3.5%, Q2_K 20%).
 *
 * <p>The loops repeat {@link Q4KMatrix}'s on purpose (one final class per layout keeps each kernel monomorphic).
 * Cost: one byte per element plus 8 bytes of scale and min per sub-block, per 256 elements Q5_K 320 bytes (file:
 * 176), Q2_K 384 (84).
 */
final class Int8MinMatrix extends PanelMatrix {
    /** Tokens per {@link #k2x2} call. */
    private static final int TOKENS = 2;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final int QK = 256;

    private final GgmlType type;
    /** Elements per sub-block: 32 (Q5_K) or 16 (Q2_K). */
    private final int sub;
    /** Sub-block b's activations are block b >> shift of 32. */
    private final int shift;
    /** o: the quants are stored as {@code q - o}. */
    private final float offset;
    private final int units;
    /** [panels][cols / 2][2P]: laid out as above ({@link #at}). */
    private final byte[] q;
    /** [panels][units][P]: the scale of row r's sub-block b at (r / P) * units * P + b * P + r % P. */
    private final float[] s;
    /** [panels][units][P]: minus the min of row r's sub-block b, laid out as {@link #s}. */
    private final float[] mneg;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations();
    /** [units][2][P]: {@link #k2x2}'s integer sub-block sums, as floats. */
    private final float[] sums;

    /** Q5_K: {@code packed} as {@link #repackQ5K} gives it. */
    static Int8MinMatrix q5_K(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8MinMatrix(name, rows, cols, GgmlType.Q5_K, 32, 16, packed);
    }

    /** Q2_K: {@code packed} as {@link #repackQ2K} gives it. */
    static Int8MinMatrix q2_K(String name, int rows, int cols, PackedBlocks packed) {
        return new Int8MinMatrix(name, rows, cols, GgmlType.Q2_K, 16, 2, packed);
    }

    private Int8MinMatrix(String name, int rows, int cols, GgmlType type, int sub, int offset, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        if (cols % Int8Activations.QK != 0) {
            throw new IllegalArgumentException(name + ": " + cols + " columns, not a multiple of 32");
        }
        this.type = type;
        this.sub = sub;
        this.shift = sub == 32 ? 0 : 1;
        this.offset = offset;
        this.units = cols / sub;
        packed.requireShape(name, rows, units, sub);
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": " + type + " needs a min per sub-block, but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * P)];
        this.s = new float[arrayLength(name, rows, cols, (long) panels * units * P)];
        this.mneg = new float[s.length];
        this.sums = new float[units * 2 * P];
        byte[] quants = packed.quants(); // row r's at r * cols, one per element
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                q[at(cols, r, c)] = quants[r * cols + c];
            }
            int sbase = (r / P) * units * P + r % P;
            for (int u = 0; u < units; u++) {
                s[sbase + u * P] = packed.scales()[r * units + u];
                mneg[sbase + u * P] = -packed.mins()[r * units + u];
            }
        }
    }

    /** The byte of row r, column c. */
    private static int at(int cols, int r, int c) {
        return (r / P) * cols * P + (c / 2) * 2 * P + (r % P) / L * P + 2 * (r % L) + c % 2;
    }

    /** Heap bytes a rows x cols matrix takes once repacked, sub-blocks of {@code sub} (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols, int sub) {
        return paddedRows(rows) * (cols + 2 * (cols / sub) * Float.BYTES);
    }

    @Override
    public GgmlType type() {
        return type;
    }

    /** Splits {@code blocks} Q5_K super-blocks from {@code data} into {@code q - 16} per element and float sub-block scales and mins. */
    static PackedBlocks repackQ5K(ByteBuffer data, int blocks) {
        final int bytes = 176;
        byte[] quants = new byte[Math.multiplyExact(blocks, QK)];
        float[] scales = new float[Math.multiplyExact(blocks, QK / 32)];
        float[] mins = new float[scales.length];
        byte[] sb = new byte[bytes];
        for (int k = 0; k < blocks; k++) {
            data.get(k * bytes, sb, 0, bytes);
            float d = Blocks.half(sb, 0);
            float dmin = Blocks.half(sb, 2);
            for (int j = 0; j < QK / 32; j++) {
                scales[k * 8 + j] = d * Q4KMatrix.packedScale(sb, 4, j);
                mins[k * 8 + j] = dmin * Q4KMatrix.packedScale(sb, 4, j + 8);
            }
            for (int e = 0; e < QK; e++) { // e = 64 g + 32 h + l
                int low = (sb[48 + (e / 64) * 32 + e % 32] >> ((e / 32) % 2 * 4)) & 0xF;
                int high = (sb[16 + e % 32] >> (e / 32)) & 1;
                quants[k * QK + e] = (byte) (low + 16 * high - 16);
            }
        }
        return new PackedBlocks(quants, scales, mins);
    }

    /** Splits {@code blocks} Q2_K super-blocks from {@code data} into {@code q - 2} per element and float sub-block scales and mins. */
    static PackedBlocks repackQ2K(ByteBuffer data, int blocks) {
        final int bytes = 84;
        byte[] quants = new byte[Math.multiplyExact(blocks, QK)];
        float[] scales = new float[Math.multiplyExact(blocks, QK / 16)];
        float[] mins = new float[scales.length];
        byte[] sb = new byte[bytes];
        for (int k = 0; k < blocks; k++) {
            data.get(k * bytes, sb, 0, bytes);
            float d = Blocks.half(sb, 80);
            float dmin = Blocks.half(sb, 82);
            for (int j = 0; j < QK / 16; j++) {
                scales[k * 16 + j] = d * (sb[j] & 0xF);
                mins[k * 16 + j] = dmin * ((sb[j] & 0xFF) >> 4);
            }
            for (int e = 0; e < QK; e++) { // e = 128 n + 32 j + l
                int v = (sb[16 + (e / 128) * 32 + e % 32] >> ((e / 32) % 4 * 2)) & 3;
                quants[k * QK + e] = (byte) (v - 2);
            }
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
                for (int c = u * sub, o = xo + t * cols; c < u * sub + sub; c++) {
                    sum += x[o + c];
                }
                sx[t * units + u] = sum;
            }
        }
    }

    @Override
    protected void panel(int p, float[] x, int xo, float[] out, int oo) {
        m1(q, s, mneg, p * cols * P, p * units * P, units, sub, shift, offset, acts.pairs(), acts.scales(), sx, out, oo);
    }

    /** One panel (quants from {@code qo}, scales and mins from {@code so}) . the prepared token: out[oo..oo+P). */
    private static void m1(byte[] q, float[] s, float[] mneg, int qo, int so, int units, int sub, int shift, float offset,
                           int[] xq, float[] xs, float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        FloatVector ov = FloatVector.broadcast(F, offset);
        int half = sub / 2;
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // the sub-block's sums, rows [0, L) and [L, P)
            for (int k = b * half; k < b * half + half; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    int o = qo + i * 2 * P;
                    ShortVector xv = xpair(xq, i);
                    s0 = pair(q, o).mul(xv).add(s0);
                    s1 = pair(q, o + P).mul(xv).add(s1);
                }
            }
            int sb = so + b * P;
            FloatVector xsv = FloatVector.broadcast(F, xs[b >> shift]);
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            a0 = rowSums(s0).fma(d0.mul(xsv), a0);
            a1 = rowSums(s1).fma(d1.mul(xsv), a1);
            a0 = d0.fma(ov, FloatVector.fromArray(F, mneg, sb)).fma(sxv, a0);
            a1 = d1.fma(ov, FloatVector.fromArray(F, mneg, sb + L)).fma(sxv, a1);
        }
        a0.intoArray(out, oo);
        a1.intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        k2x2(p, t0, valid, out, oo, os);
    }

    /**
     * Panel p . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for the panel's P rows
     * i. A missing second token repeats the first and is not stored. In two passes like Q4_K's ({@link #subSums},
     * then the scales and the min terms in {@link #m1}'s order), for the same reason (C2's node budget).
     */
    private void k2x2(int p, int t0, int valid, float[] out, int oo, int os) {
        int so = p * units * P;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens
        subSums(q, p * cols * P, units, sub, acts.pairs(), u0 * (cols / 2), u1 * (cols / 2), sums);
        float[] xs = acts.scales();
        int blocks = cols / Int8Activations.QK;
        FloatVector ov = FloatVector.broadcast(F, offset);
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = so + b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(ov, FloatVector.fromArray(F, mneg, sb)); // o * scale - min
            FloatVector m1 = d1.fma(ov, FloatVector.fromArray(F, mneg, sb + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * blocks + (b >> shift)]);
            FloatVector sxv = FloatVector.broadcast(F, sx[u0 * units + b]);
            a0 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0));
            b0 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0));
            xsv = FloatVector.broadcast(F, xs[u1 * blocks + (b >> shift)]);
            sxv = FloatVector.broadcast(F, sx[u1 * units + b]);
            a1 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1));
            b1 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1));
        }
        a0.intoArray(out, oo);
        b0.intoArray(out, oo + L);
        if (valid > 1) {
            a1.intoArray(out, oo + os);
            b1.intoArray(out, oo + os + L);
        }
    }

    /**
     * sums[b][j][i] = the integer sum of sub-block b of row i (of the panel from {@code qo}) . token j's pairs (from
     * x0, x1), as a float.
     */
    private static void subSums(byte[] q, int qo, int units, int sub, int[] xq, int x0, int x1, float[] sums) {
        int half = sub / 2;
        for (int b = 0; b < units; b++) {
            ShortVector s0 = ShortVector.zero(S), s1 = s0; // sub-block sums, rows [0, L)
            ShortVector t0 = s0, t1 = s0;                  // sub-block sums, rows [L, P)
            for (int i = b * half; i < b * half + half; i++) {
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
     * Per row: its even lane plus its odd lane, as floats; exact. Seen as an int, a row is
     * {@code odd * 65536 + (even & 0xFFFF)}: {@code (v << 16) >> 16} is even, {@code v >> 16} odd, added as ints
     * (their sum may pass 16 bits). Small enough for C2 to inline anywhere (see {@link Int8Activations#rowSums}).
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
        int sbase = (row / P) * units * P + row % P;
        int o = (int) offset;
        for (int c = 0; c < cols; c++) {
            int u = sbase + (c / sub) * P;
            dst[off + c] = (q[at(cols, row, c)] + o) * s[u] + mneg[u]; // q * scale - min, as ggml dequantizes
        }
    }
}
