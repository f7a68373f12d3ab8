package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import jdk.incubator.vector.FloatVector;

/**
 * Where the byte-scale types keep a row's sub-block scales and mins (Q4_K, Q5_K, Q2_K: sc and m as bytes per
 * sub-block, d and -dmin as floats per super-block, {@link #putSuperBlock}), and the float pass of the "scale and min"
 * types' four-token batched kernels (Q4_K and Q4_1, Q5_K, Q2_K), after their
 * integer pass has put each sub-block's sums in {@code sums}: per (row, token), over the sub-blocks in order,
 * {@code acc = fma(fma(scale, bias, -min), sx, fma(isum, scale * xs, acc))}, as each type's one-token kernel orders
 * it, so the same bits. A static method over arrays and scalars: no vector crosses the call, whether C2 inlines it
 * into a type's kernel or not.
 */
final class ScaleMinTotals {
    private ScaleMinTotals() {
    }

    /** Where row r's sc of sub-block u is in a {@code [panels][units][2][P]} array of scale bytes; its m is P on. */
    static int scaleAt(int r, int u, int units) {
        return ((r / P) * units + u) * 2 * P + r % P;
    }

    /** Where row r's d of super-block k is in a {@code [panels][supers][2][P]} array of floats; its -dmin is P on. */
    static int superAt(int r, int k, int supers) {
        return ((r / P) * supers + k) * 2 * P + r % P;
    }

    /**
     * Row r's super-block k into those two arrays: its {@code subs} sc from {@code quants[at]} on and its m the
     * {@code subs} bytes after them into sm, its d and -dmin into dd.
     */
    static void putSuperBlock(byte[] sm, float[] dd, int units, int subs, int r, int k, byte[] quants, int at, float d,
                              float dmin) {
        for (int j = 0; j < subs; j++) {
            int u = scaleAt(r, k * subs + j, units);
            sm[u] = quants[at + j];
            sm[u + P] = quants[at + subs + j];
        }
        int da = superAt(r, k, units / subs);
        dd[da] = d;
        dd[da + P] = -dmin;
    }

    /**
     * One panel's scales and negated mins as floats for the batched kernels of the types that keep them as bytes
     * (Q4_K, Q5_K, Q2_K): {@code ps[b * P + i] = d * sc} and {@code pm[b * P + i] = -dmin * m} for sub-block b
     * and row i, the products their one-token kernels make in registers (exact: an f16 times a small integer).
     *
     * @param sm   the rows' sc, then their m, per sub-block: {@code [units][2][P]} of this panel from {@code mo}
     * @param dd   the rows' d, then their -dmin, per super-block: {@code [units / subs][2][P]} from {@code dn}
     * @param subs sub-blocks per super-block
     */
    static void expand(byte[] sm, float[] dd, int mo, int dn, int units, int subs, float[] ps, float[] pm) {
        for (int b = 0; b < units; b++) {
            int sb = mo + b * 2 * P;
            int dk = dn + b / subs * 2 * P;
            for (int h = 0; h < P; h += L) {
                Blocks.signedBytes(sm, sb + h).mul(FloatVector.fromArray(F, dd, dk + h)).intoArray(ps, b * P + h);
                Blocks.signedBytes(sm, sb + P + h).mul(FloatVector.fromArray(F, dd, dk + P + h)).intoArray(pm, b * P + h);
            }
        }
    }

    /**
     * Panel rows [0, P) . tokens t0 + j, j in [0, valid) (valid 3..4; a missing fourth repeats the third and is not
     * stored): out[oo + j * os + i].
     *
     * @param s       scales, {@code [units][P]} of this panel from {@code so}
     * @param mneg    negated mins, laid out as s
     * @param bias    what the integer sums left out of each quant: 8 (Q4_K, Q4_1), 16 (Q5_K), 2 (Q2_K)
     * @param xs      the activations' scales: token u, sub-block b at {@code u * xsStride + (b >> xsShift)}
     * @param sx      each token's sum of x over each sub-block: token u, sub-block b at {@code u * units + b}
     * @param sums    the integer pass's sums as floats, {@code [units][4][P]}
     */
    static void four(float[] s, float[] mneg, int so, int units, float bias, float[] xs, int xsStride, int xsShift,
                     float[] sx, int t0, int valid, float[] sums, float[] out, int oo, int os) {
        int u0 = t0, u1 = t0 + 1, u2 = t0 + 2, u3 = t0 + valid - 1;
        FloatVector bv = FloatVector.broadcast(F, bias);
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = so + b * P;
            int ib = b * 4 * P; // the integer sums of sub-block b
            int xb = b >> xsShift;
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(bv, FloatVector.fromArray(F, mneg, sb)); // bias * scale - min
            FloatVector m1 = d1.fma(bv, FloatVector.fromArray(F, mneg, sb + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * xsStride + xb]);
            FloatVector sxv = FloatVector.broadcast(F, sx[u0 * units + b]);
            a0 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0));
            b0 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0));
            xsv = FloatVector.broadcast(F, xs[u1 * xsStride + xb]);
            sxv = FloatVector.broadcast(F, sx[u1 * units + b]);
            a1 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1));
            b1 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1));
            xsv = FloatVector.broadcast(F, xs[u2 * xsStride + xb]);
            sxv = FloatVector.broadcast(F, sx[u2 * units + b]);
            a2 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + 2 * P).fma(d0.mul(xsv), a2));
            b2 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + 2 * P + L).fma(d1.mul(xsv), b2));
            xsv = FloatVector.broadcast(F, xs[u3 * xsStride + xb]);
            sxv = FloatVector.broadcast(F, sx[u3 * units + b]);
            a3 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + 3 * P).fma(d0.mul(xsv), a3));
            b3 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + 3 * P + L).fma(d1.mul(xsv), b3));
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
}
