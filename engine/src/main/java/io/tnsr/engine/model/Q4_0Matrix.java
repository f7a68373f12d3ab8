package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;

/**
 * Q4_0 weights (ggml block_q4_0): blocks of 32 elements, 18 bytes each, {@code [d: f16][qs: 16 bytes]};
 * element i &lt; 16 = ((qs[i] &amp; 0xF) - 8) * d, element 16 + i = ((qs[i] &gt;&gt; 4) - 8) * d. Repacked at load
 * ({@link PackedBlocks}, then here) into row panels like Q8_0's ({@link Int8PanelMatrix}, {@link PanelKernels}): per
 * panel and column, L bytes whose byte i holds row i's {@code q - 8} in its low nibble and row L + i's in its
 * high nibble, both as signed 4-bit numbers; the scales as Q8_0's, {@code [blocks][P]} floats per panel.
 *
 * <p>Widening one column of a panel: one load, sign-extended to ints; {@code v >> 4} (arithmetic) is the high
 * rows' {@code q - 8}, {@code (v << 28) >> 28} the low rows'; no mask and no bias. Summation order: Q8_0's
 * (block sums over 32 columns, then one FMA with the scale per block), checked bit for bit by PanelMatricesTest.
 *
 * <p>The loops repeat {@link Int8PanelMatrix}'s on purpose: only the widening differs, and a loop shared through a
 * virtual or lambda call, or a branch on the type inside it, would leave vectors for C2 to box (the Vector
 * API's pitfall in JDK 17). One final class per type keeps each kernel monomorphic.
 */
final class Q4_0Matrix extends PanelMatrix {
    private static final int QK = 32;
    /** Tokens per {@link #k2x4} call. */
    private static final int TOKENS = 4;

    private final int blocks;
    /** [panels][cols][L]: rows p * P + i (low nibble) and p * P + L + i (high) of column c at p * cols * L + c * L + i. */
    private final byte[] q;
    /** [panels][blocks][P]: the scale of row r's block b at (r / P) * blocks * P + b * P + r % P. */
    private final float[] d;

    Q4_0Matrix(String name, int rows, int cols, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.blocks = cols / QK;
        packed.requireShape(name, rows, blocks, QK / 2);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        this.d = new float[arrayLength(name, rows, cols, (long) panels * blocks * P)];
        byte[] quants = packed.quants(); // block k's 16 bytes at k * 16: element i low nibble, 16 + i high
        float[] scales = packed.scales();
        for (int r = 0; r < rows; r++) {
            int i = r % P;
            int base = (r / P) * cols * L + i % L;
            int shift = i < L ? 0 : 4;
            int keep = i < L ? 0xF0 : 0x0F; // the other row's nibble in the same byte
            for (int c = 0; c < cols; c++) {
                int qb = (r * blocks + c / QK) * (QK / 2) + c % (QK / 2);
                int n = c % QK < QK / 2 ? quants[qb] & 0xF : (quants[qb] >> 4) & 0xF;
                int at = base + c * L;
                q[at] = (byte) (q[at] & keep | ((n - 8) & 0xF) << shift);
            }
            int sbase = (r / P) * blocks * P + i;
            for (int b = 0; b < blocks; b++) {
                d[sbase + b * P] = scales[r * blocks + b];
            }
        }
    }

    /** Heap bytes a rows x cols Q4_0 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + cols / QK * Float.BYTES);
    }

    @Override
    public GgmlType type() {
        return GgmlType.Q4_0;
    }

    /** Rows [0, L) of a panel column: the low nibbles of v, sign-extended. */
    private static FloatVector low(IntVector v) {
        return (FloatVector) v.lanewise(VectorOperators.LSHL, 28).lanewise(VectorOperators.ASHR, 28)
                .convert(VectorOperators.I2F, 0);
    }

    /** Rows [L, P) of a panel column: the high nibbles of v (sign-extended bytes), sign-extended. */
    private static FloatVector high(IntVector v) {
        return (FloatVector) v.lanewise(VectorOperators.ASHR, 4).convert(VectorOperators.I2F, 0);
    }

    @Override
    protected void panel(int p, float[] x, int xo, float[] out, int oo) {
        m1(q, d, p * cols * L, p * blocks * P, blocks, x, xo, out, oo);
    }

    /** One panel (quants from {@code qo}, scales from {@code so}) . one token: out[oo..oo+P). */
    private static void m1(byte[] q, float[] d, int qo, int so, int blocks, float[] x, int xo, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < blocks; b++) {
            FloatVector s0 = FloatVector.zero(F), s1 = s0; // the block's sums
            for (int k = b * QK; k < b * QK + QK; k += 2) {
                for (int u = 0; u < 2; u++) {
                    int c = k + u;
                    FloatVector xv = FloatVector.broadcast(F, x[xo + c]);
                    IntVector v = Blocks.ints(q, qo + c * L);
                    s0 = low(v).fma(xv, s0);
                    s1 = high(v).fma(xv, s1);
                }
            }
            a0 = s0.fma(FloatVector.fromArray(F, d, so + b * P), a0);
            a1 = s1.fma(FloatVector.fromArray(F, d, so + b * P + L), a1);
        }
        a0.intoArray(out, oo);
        a1.intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        k2x4(p, x, xo, valid, out, oo, os);
    }

    /**
     * Panel p . tokens j in [0, valid) (valid 1..4) of x (token j at {@code xo + j * cols}): out[oo + j * os + i]
     * for the panel's P rows i. Missing tokens repeat the last valid one and are not stored.
     */
    private void k2x4(int p, float[] x, int xo, int valid, float[] out, int oo, int os) {
        byte[] q = this.q;
        int qo = p * cols * L;
        int so = p * blocks * P;
        int x0 = xo;
        int x1 = xo + Math.min(1, valid - 1) * cols;
        int x2 = xo + Math.min(2, valid - 1) * cols;
        int x3 = xo + Math.min(3, valid - 1) * cols;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < blocks; b++) {
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // block sums, rows [0, L)
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;                   // block sums, rows [L, P)
            for (int c = b * QK; c < b * QK + QK; c++) {
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
            FloatVector d0 = FloatVector.fromArray(F, d, so + b * P);
            FloatVector d1 = FloatVector.fromArray(F, d, so + b * P + L);
            a0 = s0.fma(d0, a0); b0 = t0.fma(d1, b0);
            a1 = s1.fma(d0, a1); b1 = t1.fma(d1, b1);
            a2 = s2.fma(d0, a2); b2 = t2.fma(d1, b2);
            a3 = s3.fma(d0, a3); b3 = t3.fma(d1, b3);
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
        int sbase = (row / P) * blocks * P + i;
        for (int c = 0; c < cols; c++) {
            int v = q[base + c * L]; // sign-extended, as in the kernels
            int n = i < L ? v << 28 >> 28 : v >> 4;
            dst[off + c] = n * d[sbase + (c / QK) * P];
        }
    }
}
