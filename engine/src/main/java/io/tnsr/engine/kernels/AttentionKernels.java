package io.tnsr.engine.kernels;

import io.tnsr.engine.memory.Region;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * One head's attention over one KV-cache page, with the sums of one dot product and one axpy per position (the order
 * of {@link VectorOps#dot}: chunks of L into one accumulator, its lanes added from lane 0, then the scalar tail) bit
 * for bit, but without their per-position costs: a division for the page, a fresh buffer's checks, a lane reduction.
 *
 * <p>Keys are stored transposed inside a page: for a head, {@code [headDim][pageTokens]} floats, so that dimension j
 * of L consecutive positions is one vector load; the rows are in {@link #scores}' read order ({@link #keyRow}). {@link #scores} then makes the positions the lanes: for each lane
 * index l of the one-position dot product it runs that lane's FMA chain (chunks c = 0, 1, ... of the head) for L
 * positions at once, and adds the chains in lane order, from zero: exactly what {@code reduceLanes(ADD)} does with
 * one position's accumulator (sequentially from lane 0; {@code AttentionKernelsTest} checks the bits against
 * the per-position loop). Measured at position 960 of stories110M: see docs/engine-speed.md. Hazard: a vector of
 * positions is computed and stored whole, so past {@code count} it reads stale keys and writes scores nobody may use.
 *
 * <p>Values are stored by position ({@code [position][headDim]} for a head, at any stride); {@link #accumulate}
 * keeps each chunk of the output in a register across all positions of a page instead of loading and storing it
 * per position (an axpy each), four chunks' FMA chains at a time.
 *
 * <pre>{@code
 * for each page p0 of the sequence (positions [p0, p0 + pageTokens), the last one cut at len):
 *     for each head h: scores(q, qo(h), page, keys(h), pageTokens, count, headDim, scale, scores, so(h) + p0)
 * for each head h: softmax(scores, so(h), len); out[oo(h)..oo(h) + headDim) = 0
 * for each page: for each head h: accumulate(out, oo(h), scores, so(h) + p0, page, values(h), stride, count, headDim)
 * }</pre>
 * Pages outside, heads inside: a page's keys (and values) for all heads of a layer are one contiguous run (48 KB for
 * stories110M) instead of one 4 KB run per head, which the prefetcher follows: the outputs 30 -> 15 ns per head and
 * position over a model-sized cache at position 960; with the keys in read order ({@link #keyRow}) the scores 31 ->
 * ~15. (A 16-chain scores loop over keys in dimension order read as well, but in a JVM that had run F16 matrices
 * first its compiled code allocated ~320 bytes per call: not kept.)
 */
public final class AttentionKernels {
    private static final VectorSpecies<Float> F = VectorOps.F;
    private static final int L = F.length();

    private AttentionKernels() {
    }

    /** Whether pages of {@code pageTokens} positions hold whole vectors of positions (else the scalar path runs). */
    public static boolean vectorized(int pageTokens) {
        return pageTokens % L == 0 && L % 4 == 0;
    }

    /**
     * scores[so + i] = scale * (q[qo..qo+headDim) . key of position i), for positions i in [0, count) of a page whose
     * keys for this head start at byte {@code keys}: dimension j of position i at
     * {@code keys + (keyRow(j, headDim) * pageTokens + i) * 4}.
     * With {@link #vectorized} pages, {@code scores} must have room up to the end of the page (a whole vector of
     * positions is stored; those past {@code count} hold nothing meaningful).
     */
    public static void scores(float[] q, int qo, Region page, int keys, int pageTokens, int count, int headDim,
                              float scale, float[] scores, int so) {
        if (!vectorized(pageTokens)) {
            for (int i = 0; i < count; i++) {
                scores[so + i] = scalarScore(q, qo, page, keys + i * Float.BYTES, pageTokens, headDim) * scale;
            }
            return;
        }
        int chunks = headDim >= L ? headDim / L : 0; // VectorOps.dot: whole chunks only when headDim >= L
        int dimStride = pageTokens * Float.BYTES;
        for (int i = 0; i < count; i += L) {
            int base = keys + i * Float.BYTES;
            FloatVector s = FloatVector.zero(F);
            // Lane l of the one-position accumulator, for L positions at once: its own FMA chain over the chunks,
            // four lanes' chains interleaved (one chain at a time ran 1.5x slower: each waited on the last), then
            // added to s in lane order.
            for (int l = 0; chunks > 0 && l < L; l += 4) {
                FloatVector l0 = FloatVector.zero(F), l1 = l0, l2 = l0, l3 = l0;
                for (int c = 0, j = l; c < chunks; c++, j += L) {
                    int o = base + (l * chunks + c * 4) * dimStride; // keyRow(j): the rows in this loop's order
                    l0 = FloatVector.broadcast(F, q[qo + j]).fma(key(page, o), l0);
                    l1 = FloatVector.broadcast(F, q[qo + j + 1]).fma(key(page, o + dimStride), l1);
                    l2 = FloatVector.broadcast(F, q[qo + j + 2]).fma(key(page, o + 2 * dimStride), l2);
                    l3 = FloatVector.broadcast(F, q[qo + j + 3]).fma(key(page, o + 3 * dimStride), l3);
                }
                // -0 + s is s: the adds' receiver is a fresh vector, never the loop-carried s (see PanelKernels).
                s = FloatVector.broadcast(F, -0f).add(s).add(l0).add(l1).add(l2).add(l3);
            }
            for (int j = chunks * L; j < headDim; j++) { // the scalar tail: s += q * k, two roundings
                s = FloatVector.broadcast(F, -0f).add(s).add(key(page, base + j * dimStride).mul(q[qo + j]));
            }
            FloatVector.broadcast(F, scale).mul(s).intoArray(scores, so + i);
        }
    }

    /** One dimension of L consecutive positions' keys, at byte {@code offset}. */
    private static FloatVector key(Region page, int offset) {
        return page.floats(F, offset);
    }

    /**
     * The row, inside a head's transposed key block, that holds dimension {@code j} (of {@code headDim}): the order in
     * which {@link #scores} reads them, so that its reads run front to back. The four-chain loop takes lanes l..l+3
     * of chunk 0, 1, ... (dimensions l + c * L + k), then the next four lanes: dimension l + c * L + k (l a multiple
     * of 4, k < 4) is row l * chunks + 4c + k; the tail past the whole chunks, and heads narrower than a vector or
     * vectors of fewer than 4 lanes, keep their order. Reading dimensions 0-3, 16-19, 32-35, 48-51, 4-7, ... in
     * place of rows 0..63 cost 31 instead of ~15 ns per head and position over a model-sized cache.
     */
    public static int keyRow(int j, int headDim) {
        int chunks = headDim >= L ? headDim / L : 0;
        if (j >= chunks * L || L % 4 != 0) {
            return j;
        }
        int l = j % L;
        return (l & ~3) * chunks + (j / L) * 4 + (l & 3);
    }

    /** q . one position's transposed key, in the order of the vector path (lane chains over chunks, lanes, tail). */
    static float scalarScore(float[] q, int qo, Region page, int key, int pageTokens, int headDim) {
        int chunks = headDim >= L ? headDim / L : 0;
        float s = 0f;
        for (int l = 0; l < L && chunks > 0; l++) {
            float lane = 0f;
            for (int c = 0, j = l; c < chunks; c++, j += L) {
                lane = Math.fma(q[qo + j], page.getFloat(key + keyRow(j, headDim) * pageTokens * Float.BYTES), lane);
            }
            s += lane;
        }
        for (int j = chunks * L; j < headDim; j++) {
            s += q[qo + j] * page.getFloat(key + j * pageTokens * Float.BYTES);
        }
        return s;
    }

    /**
     * out[oo..oo+headDim) += w[wo + i] * value of position i, for i in [0, count) in order, as one vector axpy per
     * position would (fma per chunk, y + w * v for the tail): the value of position i at byte
     * {@code values + i * stride}.
     */
    public static void accumulate(float[] out, int oo, float[] w, int wo, Region page, int values, int stride,
                                  int count, int headDim) {
        int d = 0;
        if (headDim >= L) {
            int bound = F.loopBound(headDim);
            for (; d + 4 * L <= bound; d += 4 * L) { // four chunks per pass: four independent FMA chains
                FloatVector a0 = FloatVector.fromArray(F, out, oo + d);
                FloatVector a1 = FloatVector.fromArray(F, out, oo + d + L);
                FloatVector a2 = FloatVector.fromArray(F, out, oo + d + 2 * L);
                FloatVector a3 = FloatVector.fromArray(F, out, oo + d + 3 * L);
                for (int i = 0, o = values + d * Float.BYTES; i < count; i++, o += stride) {
                    FloatVector wi = FloatVector.broadcast(F, w[wo + i]);
                    a0 = page.floats(F, o).fma(wi, a0);
                    a1 = page.floats(F, o + L * Float.BYTES).fma(wi, a1);
                    a2 = page.floats(F, o + 2 * L * Float.BYTES).fma(wi, a2);
                    a3 = page.floats(F, o + 3 * L * Float.BYTES).fma(wi, a3);
                }
                FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo + d);
                FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + d + L);
                FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + d + 2 * L);
                FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + d + 3 * L);
            }
            for (; d < bound; d += L) {
                FloatVector acc = FloatVector.fromArray(F, out, oo + d);
                for (int i = 0, o = values + d * Float.BYTES; i < count; i++, o += stride) {
                    acc = page.floats(F, o).fma(FloatVector.broadcast(F, w[wo + i]), acc);
                }
                FloatVector.broadcast(F, -0f).add(acc).intoArray(out, oo + d);
            }
        }
        for (; d < headDim; d++) {
            float y = out[oo + d];
            for (int i = 0, o = values + d * Float.BYTES; i < count; i++, o += stride) {
                y += w[wo + i] * page.getFloat(o);
            }
            out[oo + d] = y;
        }
    }
}
