package io.tnsr.engine.model;

import io.tnsr.engine.kernels.VectorOps;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Matrix x matrix micro-kernels over a <em>tile</em>: up to {@link #TILE_ROWS} weight rows already
 * widened to floats in a small heap array (L1-resident), against n tokens: F16's path for several tokens (every
 * other type has row panels, {@link PanelKernels}). {@link WeightMatrix#decodeRow} fills the tile, so a prefill
 * or a micro-batch decodes each weight once per matmul and then reuses it for every token from L1.
 *
 * <p>The summation order of one (row, token) product is the contract of the whole engine (see
 * {@link WeightMatrix}): one accumulator vector of {@code L} lanes, {@code acc = w * x + acc} over the column
 * chunks [0, L), [L, 2L)... in order, then a lane reduction, then the scalar tail {@code s += w * x} for the
 * columns past the last whole chunk. F16's one-token kernel (which reads weights straight from the file's bytes,
 * one row at a time) follows the same order, so the results of a row do not depend on which kernel, or which
 * grouping of tokens, produced them.
 *
 * <p>Register budget (AVX-512: 32 registers): 16 accumulators (4 rows x 4 tokens) plus 4 weight vectors and a
 * token vector. A 4 x 3 x 2 kernel (24 accumulators) was measured 6x slower: C2 (JDK 17) spills or boxes the
 * vectors.
 */
final class TileKernels {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int L = F.length();
    /** Rows per tile. */
    static final int TILE_ROWS = 4;

    private TileKernels() {
    }

    /** Floats of the lane scratch that {@link #group} and {@link #k1x1} need: 16 accumulators of L lanes. */
    static final int LANES_SCRATCH = 16 * L;

    /**
     * The lane reduction every one-chain kernel ends with, on lanes the kernel stored at lanes[o..o+L): lane 0 first,
     * added in order, as {@link VectorOps#sumLanes} adds them. Kernels store their accumulators and sum them here
     * rather than pass a vector to a method: a vector argument of a call C2 does not inline is boxed (in k4x4, 16
     * calls per 4 x 4 block, that was 7 MB per prefill token on JDK 17 and 25).
     */
    static float sumLanes(float[] lanes, int o) {
        float s = lanes[o];
        for (int i = 1; i < L; i++) {
            s += lanes[o + i];
        }
        return s;
    }

    /** Tokens one kernel call carries: {@link #group} g covers tokens [g * GROUP, (g + 1) * GROUP). */
    static final int GROUP = 4;

    /**
     * out[t * outStride + r] (from {@code oo}) = row r of the tile . x[t] (from {@code xo}, token stride
     * {@code cols}), for r in [0, tileRows) and the tokens t of group g (of n tokens in all).
     *
     * @param w tile: [tileRows][cols] floats
     */
    static void group(float[] w, int tileRows, int cols, float[] x, int xo, int n, int g, float[] out, int oo,
                      int outStride, float[] lanes) {
        int t0 = g * GROUP;
        int valid = Math.min(GROUP, n - t0);
        if (tileRows == TILE_ROWS) {
            k4x4(w, cols, x, xo, t0, valid, out, oo, outStride, lanes);
            return;
        }
        for (int r = 0; r < tileRows; r++) {
            for (int t = t0; t < t0 + valid; t++) {
                out[oo + t * outStride + r] = k1x1(w, r * cols, cols, x, xo + t * cols, lanes);
            }
        }
    }

    /** One tile row (from {@code wo}) . one token. */
    static float k1x1(float[] w, int wo, int cols, float[] x, int xo, float[] lanes) {
        FloatVector a = FloatVector.zero(F);
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            a = FloatVector.fromArray(F, w, wo + c).fma(FloatVector.fromArray(F, x, xo + c), a);
        }
        FloatVector.broadcast(F, -0f).add(a).intoArray(lanes, 0);
        return tail(sumLanes(lanes, 0), w, wo, x, xo, c, cols);
    }

    /**
     * 4 tile rows . tokens [t0, t0 + valid) (valid in 1..4), one chain: out[oo + t * outStride + r]. Missing
     * tokens repeat the last valid one and are not stored. Each weight and token vector loaded once per chunk.
     */
    private static void k4x4(float[] w, int cols, float[] x, int xo, int t0, int valid, float[] out, int oo,
                             int outStride, float[] lanes) {
        int x0 = xo + t0 * cols;
        int x1 = xo + (t0 + Math.min(1, valid - 1)) * cols;
        int x2 = xo + (t0 + Math.min(2, valid - 1)) * cols;
        int x3 = xo + (t0 + Math.min(3, valid - 1)) * cols;
        FloatVector a00 = FloatVector.zero(F), a01 = a00, a02 = a00, a03 = a00; // a<row><token>
        FloatVector a10 = a00, a11 = a00, a12 = a00, a13 = a00;
        FloatVector a20 = a00, a21 = a00, a22 = a00, a23 = a00;
        FloatVector a30 = a00, a31 = a00, a32 = a00, a33 = a00;
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            FloatVector w0 = FloatVector.fromArray(F, w, c);
            FloatVector w1 = FloatVector.fromArray(F, w, cols + c);
            FloatVector w2 = FloatVector.fromArray(F, w, 2 * cols + c);
            FloatVector w3 = FloatVector.fromArray(F, w, 3 * cols + c);
            FloatVector xv = FloatVector.fromArray(F, x, x0 + c);
            a00 = w0.fma(xv, a00); a10 = w1.fma(xv, a10); a20 = w2.fma(xv, a20); a30 = w3.fma(xv, a30);
            xv = FloatVector.fromArray(F, x, x1 + c);
            a01 = w0.fma(xv, a01); a11 = w1.fma(xv, a11); a21 = w2.fma(xv, a21); a31 = w3.fma(xv, a31);
            xv = FloatVector.fromArray(F, x, x2 + c);
            a02 = w0.fma(xv, a02); a12 = w1.fma(xv, a12); a22 = w2.fma(xv, a22); a32 = w3.fma(xv, a32);
            xv = FloatVector.fromArray(F, x, x3 + c);
            a03 = w0.fma(xv, a03); a13 = w1.fma(xv, a13); a23 = w2.fma(xv, a23); a33 = w3.fma(xv, a33);
        }
        // lanes[(token * 4 + row) * L ...]: stored from -0 + acc (the same bits, a vector whose class C2 knows)
        FloatVector z = FloatVector.broadcast(F, -0f);
        z.add(a00).intoArray(lanes, 0); z.add(a10).intoArray(lanes, L);
        z.add(a20).intoArray(lanes, 2 * L); z.add(a30).intoArray(lanes, 3 * L);
        z.add(a01).intoArray(lanes, 4 * L); z.add(a11).intoArray(lanes, 5 * L);
        z.add(a21).intoArray(lanes, 6 * L); z.add(a31).intoArray(lanes, 7 * L);
        z.add(a02).intoArray(lanes, 8 * L); z.add(a12).intoArray(lanes, 9 * L);
        z.add(a22).intoArray(lanes, 10 * L); z.add(a32).intoArray(lanes, 11 * L);
        z.add(a03).intoArray(lanes, 12 * L); z.add(a13).intoArray(lanes, 13 * L);
        z.add(a23).intoArray(lanes, 14 * L); z.add(a33).intoArray(lanes, 15 * L);
        int o = oo + t0 * outStride;
        store4(out, o, lanes, 0, w, x, x0, c, cols);
        if (valid > 1) {
            store4(out, o + outStride, lanes, 4 * L, w, x, x1, c, cols);
        }
        if (valid > 2) {
            store4(out, o + 2 * outStride, lanes, 8 * L, w, x, x2, c, cols);
        }
        if (valid > 3) {
            store4(out, o + 3 * outStride, lanes, 12 * L, w, x, x3, c, cols);
        }
    }

    /**
     * Finishes 4 rows of one token (their stored lanes from lanes[lo], row by row) with their scalar tails and stores
     * them at out[oo..oo+4).
     */
    private static void store4(float[] out, int oo, float[] lanes, int lo,
                               float[] w, float[] x, int xo, int c, int cols) {
        out[oo] = tail(sumLanes(lanes, lo), w, 0, x, xo, c, cols);
        out[oo + 1] = tail(sumLanes(lanes, lo + L), w, cols, x, xo, c, cols);
        out[oo + 2] = tail(sumLanes(lanes, lo + 2 * L), w, 2 * cols, x, xo, c, cols);
        out[oo + 3] = tail(sumLanes(lanes, lo + 3 * L), w, 3 * cols, x, xo, c, cols);
    }

    /** s + the products of columns [c, cols) of the tile row at {@code wo} and x, in column order. */
    private static float tail(float s, float[] w, int wo, float[] x, int xo, int c, int cols) {
        for (; c < cols; c++) {
            s += w[wo + c] * x[xo + c];
        }
        return s;
    }
}
