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
 * {@link WeightMatrix}): two accumulator vectors of {@code L} lanes, the even column chunks [0, L), [2L, 3L)...
 * summed in order into the first ({@code acc = w * x + acc}) and the odd ones into the second, then
 * {@link #sum(FloatVector, FloatVector)}, then the scalar tail {@code s += w * x} for the columns past the last
 * whole chunk. Two chains, because one FMA chain per row caps a one-token kernel at L elements per FMA
 * latency. The one-token kernels of each type (which read weights straight from the mapped file, one row at
 * a time: interleaving several rows' streams was measured 3x slower than one sequential stream here) follow
 * the same order, so the results of a row do not depend on which kernel, or which grouping of tokens,
 * produced them.
 *
 * <p>Register budget (AVX-512: 32 registers): 4 rows x 2 tokens x 2 chains = 16 accumulators, 4 weight
 * vectors, 2 token vectors. A 4 x 3 kernel (24 accumulators) was measured 6x slower: C2 (JDK 17) spills or
 * boxes the vectors. On L1-resident data the 4 x 2 kernel runs at about 60% of the FMA probe's peak.
 */
final class TileKernels {
    static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int L = F.length();
    /** Rows per tile. */
    static final int TILE_ROWS = 4;

    private TileKernels() {
    }

    /** The sum of a row's two accumulators: the one reduction every kernel uses. */
    static float sum(FloatVector even, FloatVector odd) {
        return even.add(odd).reduceLanes(VectorOperators.ADD);
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
            for (; t + 2 <= n; t += 2) {
                k4x2(w, cols, x, xo + t * cols, out, oo + t * outStride, outStride);
            }
            if (t < n) {
                k4x2(w, cols, x, xo + t * cols, out, oo + t * outStride, -1);
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
        FloatVector b = a;
        int c = 0;
        for (int bound = cols - cols % (2 * L); c < bound; c += 2 * L) {
            a = FloatVector.fromArray(F, w, wo + c).fma(FloatVector.fromArray(F, x, xo + c), a);
            b = FloatVector.fromArray(F, w, wo + c + L).fma(FloatVector.fromArray(F, x, xo + c + L), b);
        }
        if (c + L <= cols) {
            a = FloatVector.fromArray(F, w, wo + c).fma(FloatVector.fromArray(F, x, xo + c), a);
            c += L;
        }
        return tail(sum(a, b), w, wo, x, xo, c, cols);
    }

    /**
     * 4 tile rows . 2 tokens: out[oo + t * outStride + r]; {@code outStride < 0}: one token only (the second is
     * computed on the first's data and dropped). Each weight and token vector is loaded once per chunk.
     */
    private static void k4x2(float[] w, int cols, float[] x, int xo, float[] out, int oo, int outStride) {
        int xo1 = outStride < 0 ? xo : xo + cols;
        FloatVector a00 = FloatVector.zero(F), a01 = a00, a10 = a00, a11 = a00; // a<row><token>: even chunks
        FloatVector a20 = a00, a21 = a00, a30 = a00, a31 = a00;
        FloatVector b00 = a00, b01 = a00, b10 = a00, b11 = a00;                 // b<row><token>: odd chunks
        FloatVector b20 = a00, b21 = a00, b30 = a00, b31 = a00;
        int c = 0;
        for (int bound = cols - cols % (2 * L); c < bound; c += 2 * L) {
            FloatVector x0 = FloatVector.fromArray(F, x, xo + c);
            FloatVector x1 = FloatVector.fromArray(F, x, xo1 + c);
            FloatVector w0 = FloatVector.fromArray(F, w, c);
            a00 = w0.fma(x0, a00); a01 = w0.fma(x1, a01);
            FloatVector w1 = FloatVector.fromArray(F, w, cols + c);
            a10 = w1.fma(x0, a10); a11 = w1.fma(x1, a11);
            FloatVector w2 = FloatVector.fromArray(F, w, 2 * cols + c);
            a20 = w2.fma(x0, a20); a21 = w2.fma(x1, a21);
            FloatVector w3 = FloatVector.fromArray(F, w, 3 * cols + c);
            a30 = w3.fma(x0, a30); a31 = w3.fma(x1, a31);
            x0 = FloatVector.fromArray(F, x, xo + c + L);
            x1 = FloatVector.fromArray(F, x, xo1 + c + L);
            w0 = FloatVector.fromArray(F, w, c + L);
            b00 = w0.fma(x0, b00); b01 = w0.fma(x1, b01);
            w1 = FloatVector.fromArray(F, w, cols + c + L);
            b10 = w1.fma(x0, b10); b11 = w1.fma(x1, b11);
            w2 = FloatVector.fromArray(F, w, 2 * cols + c + L);
            b20 = w2.fma(x0, b20); b21 = w2.fma(x1, b21);
            w3 = FloatVector.fromArray(F, w, 3 * cols + c + L);
            b30 = w3.fma(x0, b30); b31 = w3.fma(x1, b31);
        }
        if (c + L <= cols) {
            FloatVector x0 = FloatVector.fromArray(F, x, xo + c);
            FloatVector x1 = FloatVector.fromArray(F, x, xo1 + c);
            FloatVector w0 = FloatVector.fromArray(F, w, c);
            a00 = w0.fma(x0, a00); a01 = w0.fma(x1, a01);
            FloatVector w1 = FloatVector.fromArray(F, w, cols + c);
            a10 = w1.fma(x0, a10); a11 = w1.fma(x1, a11);
            FloatVector w2 = FloatVector.fromArray(F, w, 2 * cols + c);
            a20 = w2.fma(x0, a20); a21 = w2.fma(x1, a21);
            FloatVector w3 = FloatVector.fromArray(F, w, 3 * cols + c);
            a30 = w3.fma(x0, a30); a31 = w3.fma(x1, a31);
            c += L;
        }
        store4(out, oo, sum(a00, b00), sum(a10, b10), sum(a20, b20), sum(a30, b30), w, x, xo, c, cols);
        if (outStride >= 0) {
            store4(out, oo + outStride, sum(a01, b01), sum(a11, b11), sum(a21, b21), sum(a31, b31), w, x, xo1, c, cols);
        }
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
