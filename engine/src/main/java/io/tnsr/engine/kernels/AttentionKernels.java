package io.tnsr.engine.kernels;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * One head's attention over one KV-cache page, with the sums of one dot product and one axpy per position (the order
 * of {@link VectorOps#dot}: chunks of L into one accumulator, its lanes added from lane 0, then the scalar tail) bit
 * for bit, but without their per-position costs: a division for the page, a fresh buffer's checks, a lane reduction.
 *
 * <p>Keys are stored transposed inside a page: for a head, {@code [headDim][pageTokens]} floats, so that dimension j
 * of L consecutive positions is one vector load. {@link #scores} then makes the positions the lanes: for each lane
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
 * stories110M) instead of one 4 KB run per head, which the prefetcher follows (with {@link #scores}'s in-order reads:
 * 62 -> 27 ns per head and position over a model-sized cache at position 960).
 */
public final class AttentionKernels {
    private static final VectorSpecies<Float> F = VectorOps.F;
    private static final int L = F.length();
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private AttentionKernels() {
    }

    /** Whether pages of {@code pageTokens} positions hold whole vectors of positions (else the scalar path runs). */
    public static boolean vectorized(int pageTokens) {
        return pageTokens % L == 0 && L % 4 == 0;
    }

    /**
     * scores[so + i] = scale * (q[qo..qo+headDim) . key of position i), for positions i in [0, count) of a page whose
     * keys for this head start at byte {@code keys}: dimension j of position i at {@code keys + (j * pageTokens + i) * 4}.
     * With {@link #vectorized} pages, {@code scores} must have room up to the end of the page (a whole vector of
     * positions is stored; those past {@code count} hold nothing meaningful).
     */
    public static void scores(float[] q, int qo, ByteBuffer page, int keys, int pageTokens, int count, int headDim,
                              float scale, float[] scores, int so) {
        if (!vectorized(pageTokens)) {
            for (int i = 0; i < count; i++) {
                scores[so + i] = scalarScore(q, qo, page, keys + i * Float.BYTES, pageTokens, headDim) * scale;
            }
            return;
        }
        int chunks = headDim >= L ? headDim / L : 0; // VectorOps.dot: whole chunks only when headDim >= L
        if (L == 16 && chunks > 0) {
            scores16(q, qo, page, keys, pageTokens, count, headDim, chunks, scale, scores, so);
            return;
        }
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
                    int o = base + j * dimStride;
                    l0 = FloatVector.broadcast(F, q[qo + j]).fma(key(page, o), l0);
                    l1 = FloatVector.broadcast(F, q[qo + j + 1]).fma(key(page, o + dimStride), l1);
                    l2 = FloatVector.broadcast(F, q[qo + j + 2]).fma(key(page, o + 2 * dimStride), l2);
                    l3 = FloatVector.broadcast(F, q[qo + j + 3]).fma(key(page, o + 3 * dimStride), l3);
                }
                s = s.add(l0).add(l1).add(l2).add(l3);
            }
            for (int j = chunks * L; j < headDim; j++) { // the scalar tail: s += q * k, two roundings
                s = s.add(key(page, base + j * dimStride).mul(q[qo + j]));
            }
            s.mul(scale).intoArray(scores, so + i);
        }
    }

    /**
     * {@link #scores} with 16 lanes (AVX-512): all 16 lane chains at once, so that the head's key dimensions are read
     * in order, one 4 KB run front to back (the four-chain loop above visits dimensions 0-3, 16-19, 32-35, ... then
     * 4-7, ...: over a model-sized cache, 31 vs 14 ns per head and position). Same sums: each lane's chain over the
     * chunks from zero, the chains added to zero in lane order.
     */
    private static void scores16(float[] q, int qo, ByteBuffer page, int keys, int pageTokens, int count, int headDim,
                                 int chunks, float scale, float[] scores, int so) {
        int ds = pageTokens * Float.BYTES; // bytes from one dimension's positions to the next dimension's
        for (int i = 0; i < count; i += 16) {
            int base = keys + i * Float.BYTES;
            FloatVector z = FloatVector.zero(F);
            FloatVector c0 = z, c1 = z, c2 = z, c3 = z, c4 = z, c5 = z, c6 = z, c7 = z; // lane l's chain: c<l>
            FloatVector c8 = z, c9 = z, c10 = z, c11 = z, c12 = z, c13 = z, c14 = z, c15 = z;
            for (int c = 0; c < chunks; c++) {
                int j = qo + c * 16;
                int o = base + c * 16 * ds;
                c0 = FloatVector.broadcast(F, q[j]).fma(key(page, o), c0);
                c1 = FloatVector.broadcast(F, q[j + 1]).fma(key(page, o + ds), c1);
                c2 = FloatVector.broadcast(F, q[j + 2]).fma(key(page, o + 2 * ds), c2);
                c3 = FloatVector.broadcast(F, q[j + 3]).fma(key(page, o + 3 * ds), c3);
                c4 = FloatVector.broadcast(F, q[j + 4]).fma(key(page, o + 4 * ds), c4);
                c5 = FloatVector.broadcast(F, q[j + 5]).fma(key(page, o + 5 * ds), c5);
                c6 = FloatVector.broadcast(F, q[j + 6]).fma(key(page, o + 6 * ds), c6);
                c7 = FloatVector.broadcast(F, q[j + 7]).fma(key(page, o + 7 * ds), c7);
                c8 = FloatVector.broadcast(F, q[j + 8]).fma(key(page, o + 8 * ds), c8);
                c9 = FloatVector.broadcast(F, q[j + 9]).fma(key(page, o + 9 * ds), c9);
                c10 = FloatVector.broadcast(F, q[j + 10]).fma(key(page, o + 10 * ds), c10);
                c11 = FloatVector.broadcast(F, q[j + 11]).fma(key(page, o + 11 * ds), c11);
                c12 = FloatVector.broadcast(F, q[j + 12]).fma(key(page, o + 12 * ds), c12);
                c13 = FloatVector.broadcast(F, q[j + 13]).fma(key(page, o + 13 * ds), c13);
                c14 = FloatVector.broadcast(F, q[j + 14]).fma(key(page, o + 14 * ds), c14);
                c15 = FloatVector.broadcast(F, q[j + 15]).fma(key(page, o + 15 * ds), c15);
            }
            FloatVector s = z.add(c0).add(c1).add(c2).add(c3).add(c4).add(c5).add(c6).add(c7)
                    .add(c8).add(c9).add(c10).add(c11).add(c12).add(c13).add(c14).add(c15);
            for (int j = chunks * 16; j < headDim; j++) { // the scalar tail: s += q * k, two roundings
                s = s.add(key(page, base + j * ds).mul(q[qo + j]));
            }
            s.mul(scale).intoArray(scores, so + i);
        }
    }

    /** One dimension of L consecutive positions' keys, at byte {@code offset}. */
    private static FloatVector key(ByteBuffer page, int offset) {
        return FloatVector.fromByteBuffer(F, page, offset, LE);
    }

    /** q . one position's transposed key, in the order of the vector path (lane chains over chunks, lanes, tail). */
    static float scalarScore(float[] q, int qo, ByteBuffer page, int key, int pageTokens, int headDim) {
        int chunks = headDim >= L ? headDim / L : 0;
        float s = 0f;
        for (int l = 0; l < L && chunks > 0; l++) {
            float lane = 0f;
            for (int c = 0, j = l; c < chunks; c++, j += L) {
                lane = Math.fma(q[qo + j], page.getFloat(key + j * pageTokens * Float.BYTES), lane);
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
    public static void accumulate(float[] out, int oo, float[] w, int wo, ByteBuffer page, int values, int stride,
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
                    a0 = FloatVector.fromByteBuffer(F, page, o, LE).fma(wi, a0);
                    a1 = FloatVector.fromByteBuffer(F, page, o + L * Float.BYTES, LE).fma(wi, a1);
                    a2 = FloatVector.fromByteBuffer(F, page, o + 2 * L * Float.BYTES, LE).fma(wi, a2);
                    a3 = FloatVector.fromByteBuffer(F, page, o + 3 * L * Float.BYTES, LE).fma(wi, a3);
                }
                a0.intoArray(out, oo + d);
                a1.intoArray(out, oo + d + L);
                a2.intoArray(out, oo + d + 2 * L);
                a3.intoArray(out, oo + d + 3 * L);
            }
            for (; d < bound; d += L) {
                FloatVector acc = FloatVector.fromArray(F, out, oo + d);
                for (int i = 0, o = values + d * Float.BYTES; i < count; i++, o += stride) {
                    acc = FloatVector.fromByteBuffer(F, page, o, LE).fma(FloatVector.broadcast(F, w[wo + i]), acc);
                }
                acc.intoArray(out, oo + d);
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
