package io.tnsr.engine.model;

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
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q3_K (ggml block_q3_K): super-blocks of 256 elements, 110 bytes {@code [hmask: 32][qs: 64][scales: 12][d: f16]};
 * element e = 128 n + 32 j + k is {@code d * (sc - 32) * q3} with q3 = {@code (qs[32 n + k] >> 2 j) & 3}, minus 4 when
 * bit 4 n + j of hmask[k] is clear, and sub-block g = e / 16's 6-bit sc =
 * {@code (g < 8 ? scales[g] & 0xF : scales[g - 8] >> 4) | ((scales[8 + g % 4] >> 2 (g / 4)) & 3) << 4}. Taken here as
 * the signed q3 (-4..3) with the integer scale sc - 32: a scale per 16 elements and no min ({@link #repack}).
 *
 * <p>Repacked at load into row panels: the quants in {@link Q2KMatrix}'s layout (Q4_0's with adjacent columns paired,
 * {@link Int8Activations.Pairing#ADJACENT}), each nibble {@code q3 + 8}, which the shared reads return as q3 itself (a
 * low nibble less 8, a high one as a signed 4-bit number). Per panel and sub-block the rows' integer scales as bytes
 * ({@code [units][P]}); per panel and super-block the rows' d as floats ({@code [supers][P]}). A kernel makes a
 * sub-block's scale {@code d * sc} in registers, the float product ggml's dequantizer computes (exact: an f16 times an
 * integer of at most 6 bits).
 *
 * <p>Multiplied in 16-bit integers against the activations quantized to 8 bits per block of 32 ({@link
 * Int8Activations}), as llama.cpp multiplies Q3_K (against q8_K). Result of a (row, token), one token or many: for each
 * sub-block, {@code isum} = the exact integer sum of {@code q3 * xq} over its 16 columns, then
 * {@code acc = fma((float) isum, scale * s, acc)}, where s is the scale of the activations' block of 32 holding the
 * sub-block. The batched kernels share Q2_K's integer pass ({@link Q2KMatrix#subSums}). A 16-bit lane sums 8 products
 * of at most 4 * 127, a row's two lanes 8128: {@code rowSums} is exact. Cost: per 256 elements 148 bytes on the heap
 * (file: 110).
 */
final class Q3KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 110;
    private static final int SUB = 16; // elements per sub-block (one scale)
    private static final int SUBS = QK / SUB; // sub-blocks per super-block
    /** Bytes per super-block {@link #repack} writes: sc - 32 per sub-block, then q3 + 8 per element, two a byte. */
    private static final int PACKED = SUBS + QK / 2;
    /** Tokens per {@link #group} call: three or four through {@link #k4x2}, one or two through {@link #k2x2}. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;

    private final int units;
    /** [panels][cols / 2][2L]: Q4_0's layout ({@link Q4_0Matrix#putNibble}). */
    private final byte[] q;
    /** [panels][units][P]: row r's sc of sub-block b at (r / P) * units * P + b * P + r % P. */
    private final byte[] sc;
    /** [panels][units / 16][P]: row r's d of super-block k at (r / P) * units / 16 * P + k * P + r % P. */
    private final float[] d;
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations(ADJACENT);
    /** [units][TOKENS][P]: the batched kernels' integer sub-block sums, as floats. */
    private final float[] sums;
    /** The scales of the panel in progress as floats, for the batched kernels. */
    private final ExpandedScales expanded;

    /** {@code packed} as {@link #repack} gives it. */
    Q3KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.units = cols / SUB;
        int supers = cols / QK;
        packed.requireShape(name, rows, supers, PACKED);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.sc = new byte[arrayLength(name, rows, cols, (long) panels * units * P)];
        this.d = new float[arrayLength(name, rows, cols, (long) panels * supers * P)];
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
        byte[] quants = packed.quants();
        for (int r = 0; r < rows; r++) {
            for (int k = 0; k < supers; k++) {
                int at = (r * supers + k) * PACKED; // this super-block's payload
                for (int e = 0; e < QK; e++) {
                    Q4_0Matrix.putNibble(ADJACENT, q, cols, r, k * QK + e, (quants[at + SUBS + e / 2] >> (e % 2 * 4)) & 0xF);
                }
                for (int j = 0; j < SUBS; j++) {
                    sc[scaleAt(r, k * SUBS + j, units)] = quants[at + j];
                }
                d[scaleAt(r, k, supers)] = packed.scales()[r * supers + k];
            }
        }
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q3KMatrix(Q3KMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.units = shared.units;
        this.q = shared.q;
        this.sc = shared.sc;
        this.d = shared.d;
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
    }

    /** Where row r's value of unit u is in a {@code [panels][units][P]} array. */
    private static int scaleAt(int r, int u, int units) {
        return ((r / P) * units + u) * P + r % P;
    }

    /** Heap bytes a rows x cols Q3_K matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + cols / SUB + (cols / QK) * Float.BYTES);
    }

    @Override
    PanelMatrix view() {
        return new Q3KMatrix(this);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q3_K;
    }

    /**
     * Per super-block 16 bytes of {@code sc - 32} and 128 of {@code q3 + 8}, element e in the low nibble of byte
     * e / 2 when e is even, else the high one; d as a float.
     */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, PACKED)];
        float[] d = new float[blocks];
        byte[] b = new byte[BYTES];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, b, 0, BYTES);
            d[k] = Blocks.half(b, 108);
            int at = k * PACKED;
            for (int g = 0; g < SUBS; g++) {
                int low = g < 8 ? b[96 + g] & 0xF : (b[96 + g - 8] & 0xFF) >> 4;
                int sc = (low | ((b[96 + 8 + g % 4] >> 2 * (g / 4)) & 3) << 4) - 32;
                quants[at + g] = (byte) sc;
            }
            // Element 128 n + 32 j + i: two bits at 2 j of qs[32 n + i], plus 4 when bit 4 n + j of hmask[i] is set.
            for (int n = 0; n < 2; n++) {
                for (int j = 0; j < 4; j++) {
                    for (int i = 0; i < 32; i++) {
                        int low = (b[32 + 32 * n + i] >> 2 * j) & 3;
                        int high = (b[i] >> (4 * n + j)) & 1;
                        int e = 128 * n + 32 * j + i;
                        quants[at + SUBS + e / 2] |= (byte) ((low + 4 * high + 4) << (e % 2 * 4)); // q3 + 8
                    }
                }
            }
        }
        return new PackedBlocks(quants, d);
    }

    @Override
    protected void prepare(float[] x, int xo, int n) {
        acts.quantize(x, xo, n, cols);
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * cols * L, cols * L);
    }

    /** A call per panel: {@link #m1} is kept out of this loop ({@code tools/lib/vector-helpers.compile}). */
    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        for (int p = from; p < to; p++) {
            m1(q, sc, d, p * cols * L, p * units * P, p * (units / SUBS) * P, units, xq, xs, out, oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, integer scales from {@code so}, d from {@code dn}) . the prepared token:
     * out[oo..oo+P). Per sub-block only {@code fma(isum, d * sc * s, acc)}.
     */
    private static void m1(byte[] q, byte[] sc, float[] d, int qo, int so, int dn, int units, int[] xq, float[] xs,
                           float[] out, int oo) {
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
            int sb = so + b * P;
            int dk = dn + b / SUBS * P; // the super-block's d
            FloatVector xsv = FloatVector.broadcast(F, xs[b >> 1]); // two sub-blocks per block of 32 activations
            a0 = rowSums(s0).fma(Blocks.signedBytes(sc, sb).mul(FloatVector.fromArray(F, d, dk)).mul(xsv), a0);
            a1 = rowSums(s1).fma(Blocks.signedBytes(sc, sb + L).mul(FloatVector.fromArray(F, d, dk + L)).mul(xsv), a1);
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
     * over the panel, then the scales in {@link #m1}'s order ({@link #scaled4}): the same bits.
     */
    private void k4x2(int p, int t0, int valid, float[] out, int oo, int os) {
        int pairs = cols / 2; // a missing fourth token repeats the third
        Q2KMatrix.subSums(q, p * cols * L, units, acts.pairs(), t0 * pairs, (t0 + 1) * pairs, (t0 + 2) * pairs,
                (t0 + valid - 1) * pairs, sums);
        expanded.ofScales(sc, d, p);
        scaled4(expanded.scales, units, acts.scales(), cols / Int8Activations.QK, t0, valid, sums, out, oo, os);
    }

    /**
     * Panel p . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for the panel's P rows
     * i. A missing second token repeats the first and is not stored. The integer sums first ({@link
     * Q2KMatrix#subSums}, kept out of line as Q2_K's are), then the scales in {@link #m1}'s order.
     */
    private void k2x2(int p, int t0, int valid, float[] out, int oo, int os) {
        expanded.ofScales(sc, d, p);
        float[] s = expanded.scales;
        int blocks = cols / Int8Activations.QK;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens
        Q2KMatrix.subSums(q, p * cols * L, units, acts.pairs(), u0 * (cols / 2), u1 * (cols / 2), sums);
        float[] xs = acts.scales();
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * blocks + (b >> 1)]);
            a0 = FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0);
            b0 = FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0);
            xsv = FloatVector.broadcast(F, xs[u1 * blocks + (b >> 1)]);
            a1 = FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1);
            b1 = FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
    }

    /**
     * The float pass of {@link #k4x2}: per (row i, token t0 + j), over the sub-blocks b in order,
     * {@code acc = fma(sums[b][j][i], s[b][i] * xs, acc)} into out[oo + j * os + i] (a missing fourth token is not
     * stored). A static method over arrays and scalars: no vector crosses the call.
     *
     * @param s        scales, {@code [units][P]}
     * @param xsStride the activations' scales per token (block b >> 1 of token u at {@code u * xsStride + (b >> 1)})
     * @param sums     the integer pass's sums as floats, {@code [units][4][P]}
     */
    private static void scaled4(float[] s, int units, float[] xs, int xsStride, int t0, int valid, float[] sums,
                                float[] out, int oo, int os) {
        int u0 = t0 * xsStride, u1 = (t0 + 1) * xsStride, u2 = (t0 + 2) * xsStride, u3 = (t0 + valid - 1) * xsStride;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int ib = b * 4 * P; // the integer sums of sub-block b
            int xb = b >> 1;
            FloatVector d0 = FloatVector.fromArray(F, s, b * P);
            FloatVector d1 = FloatVector.fromArray(F, s, b * P + L);
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 + xb]);
            a0 = FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0);
            b0 = FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0);
            xsv = FloatVector.broadcast(F, xs[u1 + xb]);
            a1 = FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1);
            b1 = FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1);
            xsv = FloatVector.broadcast(F, xs[u2 + xb]);
            a2 = FloatVector.fromArray(F, sums, ib + 2 * P).fma(d0.mul(xsv), a2);
            b2 = FloatVector.fromArray(F, sums, ib + 2 * P + L).fma(d1.mul(xsv), b2);
            xsv = FloatVector.broadcast(F, xs[u3 + xb]);
            a3 = FloatVector.fromArray(F, sums, ib + 3 * P).fma(d0.mul(xsv), a3);
            b3 = FloatVector.fromArray(F, sums, ib + 3 * P + L).fma(d1.mul(xsv), b3);
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

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int supers = units / SUBS;
        for (int c = 0; c < cols; c++) {
            float scale = d[scaleAt(row, c / QK, supers)] * sc[scaleAt(row, c / SUB, units)];
            // as ggml dequantizes: (d * (sc - 32)) * q3, the sign of a zero too
            dst[off + c] = Q4_0Matrix.nibble(ADJACENT, q, cols, row, c) * scale;
        }
    }
}
