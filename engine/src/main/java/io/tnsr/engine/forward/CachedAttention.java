package io.tnsr.engine.forward;

import io.tnsr.engine.kernels.AttentionKernels;
import io.tnsr.engine.kernels.HalfAttentionKernels;
import io.tnsr.engine.kernels.VectorOps;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCachePool.KvCache;
import io.tnsr.engine.memory.Region;
import java.util.Arrays;

/**
 * One token's attention over its sequence's KV cache in one layer, for some of its heads: the part of a layer that
 * reads the cache, shared by {@link LayerRange} and the attention benchmark.
 *
 * <p>Page by page, each head of the page in turn (a page's keys, then its values, for all heads are one contiguous
 * run): a head's scores for a whole page at a time (positions as lanes, from the transposed keys), then its softmax,
 * then its output in registers across a page's values: the same sums as one dot product and one axpy per position,
 * without a division, a fresh buffer's checks and a lane reduction per position ({@link AttentionKernels}; a cache of
 * halves, {@link HalfAttentionKernels}). Each head is computed whole by the caller's thread, so results keep their
 * bits whichever thread computes it.
 */
public final class CachedAttention {
    private final KvCachePool cache;
    private final int heads;
    private final int groupSize;   // query heads per KV head
    private final int headDim;
    private final float scale;     // 1 / sqrt(headDim)
    private final int scoreStride; // floats from one head's scores to the next's in a scores array

    /**
     * @param scoreStride room for one head's scores: at least the longest sequence rounded up to whole pages
     *                    ({@link AttentionKernels#scores} stores a vector of positions at a time)
     */
    public CachedAttention(KvCachePool cache, int heads, int kvHeads, int headDim, int scoreStride) {
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException(heads + " query heads do not share " + kvHeads + " KV heads evenly");
        }
        this.cache = cache;
        this.heads = heads;
        this.groupSize = heads / kvHeads;
        this.headDim = headDim;
        this.scale = (float) (1.0 / Math.sqrt(headDim));
        this.scoreStride = scoreStride;
    }

    /** Floats a scores array needs: one stride per head. */
    public int scoresLength() {
        return Math.multiplyExact(heads, scoreStride);
    }

    /**
     * Heads h0, h0 + hStep, ... of one token that sees positions [0, len) of {@code kv} in layer {@code layer}: its
     * queries at {@code q[qo + h * headDim..]}, its output to {@code out[oo + h * headDim..]}; {@code scores} is the
     * calling thread's scratch ({@link #scoresLength}).
     */
    public void row(KvCache kv, int layer, int len, float[] q, int qo, int h0, int hStep, float[] scores, float[] out,
                    int oo) {
        int hd = headDim;
        int pageTokens = cache.pageTokens();
        int stride = hd * cache.type().bytes(); // bytes from one position's values to the next (one head's) in a page
        boolean halves = cache.halves();
        for (int p0 = 0; p0 < len; p0 += pageTokens) {
            Region page = kv.page(p0);
            int count = Math.min(pageTokens, len - p0);
            for (int h = h0; h < heads; h += hStep) {
                int keys = cache.keyOffset(layer, h / groupSize * hd);
                if (halves) {
                    HalfAttentionKernels.scores(q, qo + h * hd, page, keys, pageTokens, count, hd, scale, scores,
                            h * scoreStride + p0);
                } else {
                    AttentionKernels.scores(q, qo + h * hd, page, keys, pageTokens, count, hd, scale, scores,
                            h * scoreStride + p0);
                }
            }
        }
        for (int h = h0; h < heads; h += hStep) {
            VectorOps.softmax(scores, h * scoreStride, len);
            Arrays.fill(out, oo + h * hd, oo + h * hd + hd, 0f);
        }
        for (int p0 = 0; p0 < len; p0 += pageTokens) {
            Region page = kv.page(p0);
            int count = Math.min(pageTokens, len - p0);
            for (int h = h0; h < heads; h += hStep) {
                int values = cache.valueOffset(layer, h / groupSize * hd);
                if (halves) {
                    HalfAttentionKernels.accumulate(out, oo + h * hd, scores, h * scoreStride + p0, page, values, stride,
                            count, hd);
                } else {
                    AttentionKernels.accumulate(out, oo + h * hd, scores, h * scoreStride + p0, page, values, stride,
                            count, hd);
                }
            }
        }
    }
}
