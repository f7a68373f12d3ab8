package io.tnsr.engine.model;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Matrix x matrix micro-kernels over a <em>tile</em>: up to {@link #TILE_ROWS} weight rows already
 * widened to floats in a small heap array (L1-resident), against n tokens. Every weight type fills the tile
 * with its own decoder ({@link WeightMatrix#decodeRow}) and then shares these kernels, so a prefill or a
 * micro-batch decodes each weight once per matmul and then reuses it for every token from L1.
 *
 * <p>The summation order of one (row, token) product is the contract of the whole engine (see
 * {@link WeightMatrix}): one accumulator vector of {@code L} lanes, {@code acc = w * x + acc} over the
 * column chunks [0, L), [L, 2L)... in order, then {@link #sum(FloatVector)}, then the scalar tail
 * {@code s += w * x} for the columns past the last whole chunk. The one-token kernels of each type
 * (which read weights straight from the mapped file) follow the same order, so the results of a row do
 * not depend on which kernel, or which grouping of tokens, produced them.
 *
 * <p>Register budget (AVX-512: 32 registers): 4 x 4 accumulators + 4 weight vectors + 1 token vector.
 */
final class TileKernels {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int L = F.length();
    /** Rows per tile. */
    static final int TILE_ROWS = 4;

    private TileKernels() {
    }

    /** The horizontal sum of a row's accumulator: the one reduction every kernel uses. */
    static float sum(FloatVector acc) {
        return acc.reduceLanes(VectorOperators.ADD);
    }

    /**
     * out[t * outStride + r] (from {@code oo}) = row r of the tile . x[t] (from {@code xo}, token stride
     * {@code cols}), for r in [0, tileRows), t in [0, n).
     *
     * @param w tile: [tileRows][cols] floats
     */
    static void rows(float[] w, int tileRows, int cols, float[] x, int xo, int n, float[] out, int oo, int outStride) {
        if (tileRows == TILE_ROWS) {
            int t = 0;
            for (; t + 4 <= n; t += 4) {
                k4x4(w, cols, x, xo + t * cols, out, oo + t * outStride, outStride);
            }
            for (; t < n; t++) {
                k4x1(w, cols, x, xo + t * cols, out, oo + t * outStride);
            }
            return;
        }
        for (int r = 0; r < tileRows; r++) {
            for (int t = 0; t < n; t++) {
                out[oo + t * outStride + r] = k1x1(w, r * cols, cols, x, xo + t * cols);
            }
        }
    }

    /** One tile row (from {@code wo}) . one token. */
    static float k1x1(float[] w, int wo, int cols, float[] x, int xo) {
        FloatVector a = FloatVector.zero(F);
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            a = FloatVector.fromArray(F, w, wo + c).fma(FloatVector.fromArray(F, x, xo + c), a);
        }
        float s = sum(a);
        for (; c < cols; c++) {
            s += w[wo + c] * x[xo + c];
        }
        return s;
    }

    /** 4 tile rows . one token: out[oo + r]. */
    private static void k4x1(float[] w, int cols, float[] x, int xo, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F);
        FloatVector a1 = a0;
        FloatVector a2 = a0;
        FloatVector a3 = a0;
        int c = 0;
        for (int bound = F.loopBound(cols); c < bound; c += L) {
            FloatVector xv = FloatVector.fromArray(F, x, xo + c);
            a0 = FloatVector.fromArray(F, w, c).fma(xv, a0);
            a1 = FloatVector.fromArray(F, w, cols + c).fma(xv, a1);
            a2 = FloatVector.fromArray(F, w, 2 * cols + c).fma(xv, a2);
            a3 = FloatVector.fromArray(F, w, 3 * cols + c).fma(xv, a3);
        }
        out[oo] = tail(sum(a0), w, 0, x, xo, c, cols);
        out[oo + 1] = tail(sum(a1), w, cols, x, xo, c, cols);
        out[oo + 2] = tail(sum(a2), w, 2 * cols, x, xo, c, cols);
        out[oo + 3] = tail(sum(a3), w, 3 * cols, x, xo, c, cols);
    }

    /** 4 tile rows . 4 tokens: out[oo + t * outStride + r]. Each weight and token vector loaded once per chunk. */
    private static void k4x4(float[] w, int cols, float[] x, int xo, float[] out, int oo, int outStride) {
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
            FloatVector xv = FloatVector.fromArray(F, x, xo + c);
            a00 = w0.fma(xv, a00); a10 = w1.fma(xv, a10); a20 = w2.fma(xv, a20); a30 = w3.fma(xv, a30);
            xv = FloatVector.fromArray(F, x, xo + cols + c);
            a01 = w0.fma(xv, a01); a11 = w1.fma(xv, a11); a21 = w2.fma(xv, a21); a31 = w3.fma(xv, a31);
            xv = FloatVector.fromArray(F, x, xo + 2 * cols + c);
            a02 = w0.fma(xv, a02); a12 = w1.fma(xv, a12); a22 = w2.fma(xv, a22); a32 = w3.fma(xv, a32);
            xv = FloatVector.fromArray(F, x, xo + 3 * cols + c);
            a03 = w0.fma(xv, a03); a13 = w1.fma(xv, a13); a23 = w2.fma(xv, a23); a33 = w3.fma(xv, a33);
        }
        store4(out, oo, sum(a00), sum(a10), sum(a20), sum(a30), w, x, xo, c, cols);
        store4(out, oo + outStride, sum(a01), sum(a11), sum(a21), sum(a31), w, x, xo + cols, c, cols);
        store4(out, oo + 2 * outStride, sum(a02), sum(a12), sum(a22), sum(a32), w, x, xo + 2 * cols, c, cols);
        store4(out, oo + 3 * outStride, sum(a03), sum(a13), sum(a23), sum(a33), w, x, xo + 3 * cols, c, cols);
    }

    /** Finishes 4 rows of one token with their scalar tails and stores them at out[oo..oo+4). */
    private static void store4(float[] out, int oo, float s0, float s1, float s2, float s3,
                               float[] w, float[] x, int xo, int c, int cols) {
        out[oo] = tail(s0, w, 0, x, xo, c, cols);
        out[oo + 1] = tail(s1, w, cols, x, xo, c, cols);
        out[oo + 2] = tail(s2, w, 2 * cols, x, xo, c, cols);
        out[oo + 3] = tail(s3, w, 3 * cols, x, xo, c, cols);
    }

    /** s + the products of columns [c, cols) of the tile row at {@code wo} and x, in column order. */
    private static float tail(float s, float[] w, int wo, float[] x, int xo, int c, int cols) {
        for (; c < cols; c++) {
            s += w[wo + c] * x[xo + c];
        }
        return s;
    }
}
