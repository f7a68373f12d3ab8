package io.tnsr.engine.kernels;

import static io.tnsr.engine.kernels.AttentionKernels.keyRow;
import static io.tnsr.engine.kernels.AttentionKernels.vectorized;

import io.tnsr.engine.memory.Region;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * {@link AttentionKernels} over a page of halves (a {@link io.tnsr.engine.kvcache.KvCacheType#F16} cache): the same
 * layout with two bytes per element, the same loops and sums, each vector of halves widened to floats in registers as
 * it is loaded (as F16 weights are). The results are therefore those {@link AttentionKernels} gives on a page of floats
 * holding the same rounded values ({@code AttentionKernelsTest}). A class of its own, not a flag: a vector that could
 * come from either kind of load would meet the other at a merge point, which C2 (JDK 17) cannot type exactly, and it
 * would box it; this way the float kernels compile as before, whatever else a JVM has run.
 *
 * <pre>{@code
 * for each page p0: for each head h: scores(q, qo(h), page, keys(h), pageTokens, count, headDim, scale, scores, so(h) + p0)
 * softmax per head, outputs zeroed
 * for each page: for each head h: accumulate(out, oo(h), scores, so(h) + p0, page, values(h), stride, count, headDim)
 * }</pre>
 */
public final class HalfAttentionKernels {
    private static final VectorSpecies<Float> F = VectorOps.F;
    private static final int L = F.length();
    private static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    /** L halves: as many short lanes as F has, but at least 64 bits (then masked to the first L). */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(Math.max(64, F.vectorBitSize() / 2)));
    private static final boolean PARTIAL = S.length() > L;
    private static final VectorMask<Short> FIRST_L = S.indexInRange(0, L);

    private HalfAttentionKernels() {
    }

    /**
     * {@link AttentionKernels#scores} over halves: dimension j of position i at {@code keys + (keyRow(j, headDim) *
     * pageTokens + i) * 2}.
     */
    public static void scores(float[] q, int qo, Region page, int keys, int pageTokens, int count, int headDim,
                              float scale, float[] scores, int so) {
        if (!vectorized(pageTokens)) {
            for (int i = 0; i < count; i++) {
                scores[so + i] = scalarScore(q, qo, page, keys + i * 2, pageTokens, headDim) * scale;
            }
            return;
        }
        int chunks = headDim >= L ? headDim / L : 0;
        int dimStride = pageTokens * 2;
        for (int i = 0; i < count; i += L) {
            int base = keys + i * 2;
            FloatVector s = FloatVector.zero(F);
            for (int l = 0; chunks > 0 && l < L; l += 4) {
                FloatVector l0 = FloatVector.zero(F), l1 = l0, l2 = l0, l3 = l0;
                for (int c = 0, j = l; c < chunks; c++, j += L) {
                    int o = base + (l * chunks + c * 4) * dimStride;
                    l0 = FloatVector.broadcast(F, q[qo + j]).fma(load(page, o), l0);
                    l1 = FloatVector.broadcast(F, q[qo + j + 1]).fma(load(page, o + dimStride), l1);
                    l2 = FloatVector.broadcast(F, q[qo + j + 2]).fma(load(page, o + 2 * dimStride), l2);
                    l3 = FloatVector.broadcast(F, q[qo + j + 3]).fma(load(page, o + 3 * dimStride), l3);
                }
                s = FloatVector.broadcast(F, -0f).add(s).add(l0).add(l1).add(l2).add(l3);
            }
            for (int j = chunks * L; j < headDim; j++) {
                s = FloatVector.broadcast(F, -0f).add(s).add(load(page, base + j * dimStride).mul(q[qo + j]));
            }
            FloatVector.broadcast(F, scale).mul(s).intoArray(scores, so + i);
        }
    }

    /**
     * L halves at byte {@code offset} as floats: sign-extended to ints, shifted so that the sign lands in bit 31 and
     * exponent and mantissa in a float's, the sign copies between cleared, scaled by 2^112; exact for every finite half.
     */
    private static FloatVector load(Region page, int offset) {
        ShortVector h = PARTIAL ? page.shorts(S, offset, FIRST_L) : page.shorts(S, offset);
        return ((IntVector) h.convertShape(VectorOperators.S2I, I, 0)).lanewise(VectorOperators.LSHL, 13).and(0x8FFFE000)
                .reinterpretAsFloats().mul(0x1p112f);
    }

    /** {@link AttentionKernels#scalarScore} over halves. */
    static float scalarScore(float[] q, int qo, Region page, int key, int pageTokens, int headDim) {
        int chunks = headDim >= L ? headDim / L : 0;
        float s = 0f;
        for (int l = 0; l < L && chunks > 0; l++) {
            float lane = 0f;
            for (int c = 0, j = l; c < chunks; c++, j += L) {
                lane = Math.fma(q[qo + j], Float16.toFloat(page.getShort(key + keyRow(j, headDim) * pageTokens * 2)), lane);
            }
            s += lane;
        }
        for (int j = chunks * L; j < headDim; j++) {
            s += q[qo + j] * Float16.toFloat(page.getShort(key + j * pageTokens * 2));
        }
        return s;
    }

    /** {@link AttentionKernels#accumulate} over halves: the value of position i at byte {@code values + i * stride}. */
    public static void accumulate(float[] out, int oo, float[] w, int wo, Region page, int values, int stride,
                                  int count, int headDim) {
        int d = 0;
        if (headDim >= L) {
            int bound = F.loopBound(headDim);
            for (; d + 4 * L <= bound; d += 4 * L) {
                FloatVector a0 = FloatVector.fromArray(F, out, oo + d);
                FloatVector a1 = FloatVector.fromArray(F, out, oo + d + L);
                FloatVector a2 = FloatVector.fromArray(F, out, oo + d + 2 * L);
                FloatVector a3 = FloatVector.fromArray(F, out, oo + d + 3 * L);
                for (int i = 0, o = values + d * 2; i < count; i++, o += stride) {
                    FloatVector wi = FloatVector.broadcast(F, w[wo + i]);
                    a0 = load(page, o).fma(wi, a0);
                    a1 = load(page, o + L * 2).fma(wi, a1);
                    a2 = load(page, o + 2 * L * 2).fma(wi, a2);
                    a3 = load(page, o + 3 * L * 2).fma(wi, a3);
                }
                FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo + d);
                FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + d + L);
                FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + d + 2 * L);
                FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + d + 3 * L);
            }
            for (; d < bound; d += L) {
                FloatVector acc = FloatVector.fromArray(F, out, oo + d);
                for (int i = 0, o = values + d * 2; i < count; i++, o += stride) {
                    acc = load(page, o).fma(FloatVector.broadcast(F, w[wo + i]), acc);
                }
                FloatVector.broadcast(F, -0f).add(acc).intoArray(out, oo + d);
            }
        }
        for (; d < headDim; d++) {
            float y = out[oo + d];
            for (int i = 0, o = values + d * 2; i < count; i++, o += stride) {
                y += w[wo + i] * Float16.toFloat(page.getShort(o));
            }
            out[oo + d] = y;
        }
    }
}
