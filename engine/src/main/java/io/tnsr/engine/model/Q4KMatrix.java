package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;

/**
 * Q4_K weights (ggml block_q4_K): super-blocks of 256 elements, 144 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qs: 128 bytes]}. Sub-block s (32 elements, s in [0, 8)) has a
 * 6-bit scale sc and min m packed in {@code scales} (see {@link #packedScale}); its element l is
 * {@code d * sc * q - dmin * m} with q the low (s even) or high (s odd) nibble of qs[32 * (s / 2) + l].
 *
 * <p>Repacked at load ({@link #repack}): the 128 bytes of nibbles of each super-block as they are, and per
 * sub-block the float products {@code d * sc} and {@code dmin * m}, so that no kernel unpacks a 6-bit field
 * (every 32 bytes of quants are 64 elements, the low nibbles sub-block 2p and the high nibbles sub-block 2p + 1,
 * each value {@code q * scale - min}); then into row panels like Q4_0's ({@link Q4_0Matrix}): per panel and
 * column, L bytes whose byte i holds row i's q in its low nibble and row L + i's in its high nibble, and per
 * panel the scales and the negated mins, {@code [subBlocks][P]} floats each.
 *
 * <p>Summation order of a (row, token): for each sub-block, {@code usum = fma(q[c], x[c], usum)} over its 32
 * columns in order from zero, then {@code acc = fma(usum, scale, acc)} and {@code acc = fma(-min, sx, acc)},
 * where sx is the token's sum of x over the sub-block's columns (in order, from zero; computed once per
 * matmul call for every token). The loops repeat Q4_0's on purpose (see there).
 */
final class Q4KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 144;
    private static final int SUB = 32; // elements per sub-block (one scale and min)
    /** Tokens per {@link #k2x4} call. */
    private static final int TOKENS = 4;

    private final int units;
    /** [panels][cols][L]: rows p * P + i (low nibble) and p * P + L + i (high) of column c at p * cols * L + c * L + i. */
    private final byte[] q;
    /** [panels][units][P]: the scale of row r's sub-block b at (r / P) * units * P + b * P + r % P. */
    private final float[] s;
    /** [panels][units][P]: minus the min of row r's sub-block b, laid out as {@link #s}. */
    private final float[] mneg;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];

    Q4KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.units = cols / SUB;
        packed.requireShape(name, rows, units, SUB / 2);
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": Q4_K needs a min per sub-block, but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.s = new float[arrayLength(name, rows, cols, (long) panels * units * P)];
        this.mneg = new float[s.length];
        byte[] quants = packed.quants(); // row r's at r * cols / 2: element c in byte (c / 64) * 32 + c % 32
        for (int r = 0; r < rows; r++) {
            int i = r % P;
            int base = (r / P) * cols * L + i % L;
            int shift = i < L ? 0 : 4;
            int keep = i < L ? 0xF0 : 0x0F; // the other row's nibble in the same byte
            for (int c = 0; c < cols; c++) {
                int b = quants[r * (cols / 2) + (c / 64) * 32 + c % 32];
                int n = (c / 32) % 2 == 0 ? b & 0xF : (b >> 4) & 0xF;
                int at = base + c * L;
                q[at] = (byte) (q[at] & keep | n << shift);
            }
            int sbase = (r / P) * units * P + i;
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

    @Override
    public GgmlType type() {
        return GgmlType.Q4_K;
    }

    /**
     * 6-bit field {@code k} (0..15: scales of sub-blocks 0..7, then their mins) of the 12 packed bytes at
     * {@code sb}: fields 0-3 and 8-11 are the low 6 bits of bytes 0-7; fields 4-7 and 12-15 take 4 bits from
     * bytes 8-11 (low nibble for scales, high for mins) and their top 2 bits from the top of bytes 0-7.
     */
    private static int packedScale(byte[] qs, int sb, int k) {
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

    /** Rows [0, L) of a panel column: the low nibbles of v. */
    private static FloatVector low(IntVector v) {
        return (FloatVector) v.and(0xF).convert(VectorOperators.I2F, 0);
    }

    /** Rows [L, P) of a panel column: the high nibbles of v. */
    private static FloatVector high(IntVector v) {
        return (FloatVector) v.lanewise(VectorOperators.ASHR, 4).and(0xF).convert(VectorOperators.I2F, 0);
    }

    /** sx[t * units + u] = sum of x[t] over sub-block u's columns, in order from zero, for t in [0, n). */
    @Override
    protected void prepare(float[] x, int xo, int n) {
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
    protected void panel(int p, float[] x, int xo, float[] out, int oo) {
        m1(q, s, mneg, sx, p * cols * L, p * units * P, units, x, xo, out, oo);
    }

    /** One panel (quants from {@code qo}, scales and mins from {@code so}) . one token: out[oo..oo+P). */
    private static void m1(byte[] q, float[] s, float[] mneg, float[] sx, int qo, int so, int units, float[] x, int xo,
                           float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            FloatVector s0 = FloatVector.zero(F), s1 = s0; // the sub-block's sums
            for (int k = b * SUB; k < b * SUB + SUB; k += 2) {
                for (int u = 0; u < 2; u++) {
                    int c = k + u;
                    FloatVector xv = FloatVector.broadcast(F, x[xo + c]);
                    IntVector v = Blocks.ints(q, qo + c * L);
                    s0 = low(v).fma(xv, s0);
                    s1 = high(v).fma(xv, s1);
                }
            }
            int sb = so + b * P;
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            a0 = s0.fma(FloatVector.fromArray(F, s, sb), a0);
            a1 = s1.fma(FloatVector.fromArray(F, s, sb + L), a1);
            a0 = FloatVector.fromArray(F, mneg, sb).fma(sxv, a0);
            a1 = FloatVector.fromArray(F, mneg, sb + L).fma(sxv, a1);
        }
        a0.intoArray(out, oo);
        a1.intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        k2x4(p, x, xo, sx, t0 * units, valid, out, oo, os);
    }

    /**
     * Panel p . tokens j in [0, valid) (valid 1..4) of x (token j at {@code xo + j * cols}, its sub-block sums at
     * {@code sums[sumo + j * units]}): out[oo + j * os + i] for the panel's P rows i. Missing tokens repeat the
     * last valid one and are not stored.
     */
    private void k2x4(int p, float[] x, int xo, float[] sums, int sumo, int valid, float[] out, int oo, int os) {
        byte[] q = this.q;
        float[] s = this.s;
        float[] mneg = this.mneg;
        int qo = p * cols * L;
        int so = p * units * P;
        int x0 = xo;
        int x1 = xo + Math.min(1, valid - 1) * cols;
        int x2 = xo + Math.min(2, valid - 1) * cols;
        int x3 = xo + Math.min(3, valid - 1) * cols;
        int y0 = sumo;                                   // token j's sub-block sums at y<j>
        int y1 = sumo + Math.min(1, valid - 1) * units;
        int y2 = sumo + Math.min(2, valid - 1) * units;
        int y3 = sumo + Math.min(3, valid - 1) * units;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // sub-block sums, rows [0, L)
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;                   // sub-block sums, rows [L, P)
            for (int c = b * SUB; c < b * SUB + SUB; c++) {
                IntVector v = Blocks.ints(q, qo + c * L);
                FloatVector w0 = low(v);
                FloatVector w1 = high(v);
                FloatVector xv = FloatVector.broadcast(F, x[x0 + c]);
                s0 = w0.fma(xv, s0); t0 = w1.fma(xv, t0);
                xv = FloatVector.broadcast(F, x[x1 + c]);
                s1 = w0.fma(xv, s1); t1 = w1.fma(xv, t1);
                xv = FloatVector.broadcast(F, x[x2 + c]);
                s2 = w0.fma(xv, s2); t2 = w1.fma(xv, t2);
                xv = FloatVector.broadcast(F, x[x3 + c]);
                s3 = w0.fma(xv, s3); t3 = w1.fma(xv, t3);
            }
            int sb = so + b * P;
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            a0 = s0.fma(d0, a0); b0 = t0.fma(d1, b0);
            a1 = s1.fma(d0, a1); b1 = t1.fma(d1, b1);
            a2 = s2.fma(d0, a2); b2 = t2.fma(d1, b2);
            a3 = s3.fma(d0, a3); b3 = t3.fma(d1, b3);
            d0 = FloatVector.fromArray(F, mneg, sb);
            d1 = FloatVector.fromArray(F, mneg, sb + L);
            FloatVector sxv = FloatVector.broadcast(F, sums[y0 + b]);
            a0 = d0.fma(sxv, a0); b0 = d1.fma(sxv, b0);
            sxv = FloatVector.broadcast(F, sums[y1 + b]);
            a1 = d0.fma(sxv, a1); b1 = d1.fma(sxv, b1);
            sxv = FloatVector.broadcast(F, sums[y2 + b]);
            a2 = d0.fma(sxv, a2); b2 = d1.fma(sxv, b2);
            sxv = FloatVector.broadcast(F, sums[y3 + b]);
            a3 = d0.fma(sxv, a3); b3 = d1.fma(sxv, b3);
        }
        a0.intoArray(out, oo);
        b0.intoArray(out, oo + L);
        if (valid > 1) {
            a1.intoArray(out, oo + os);
            b1.intoArray(out, oo + os + L);
        }
        if (valid > 2) {
            a2.intoArray(out, oo + 2 * os);
            b2.intoArray(out, oo + 2 * os + L);
        }
        if (valid > 3) {
            a3.intoArray(out, oo + 3 * os);
            b3.intoArray(out, oo + 3 * os + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int i = row % P;
        int base = (row / P) * cols * L + i % L;
        int sbase = (row / P) * units * P + i;
        for (int c = 0; c < cols; c++) {
            int v = q[base + c * L];
            int n = i < L ? v & 0xF : (v >> 4) & 0xF;
            int u = sbase + (c / SUB) * P;
            dst[off + c] = n * s[u] + mneg[u]; // q * scale - min, as the repack defines it
        }
    }
}
