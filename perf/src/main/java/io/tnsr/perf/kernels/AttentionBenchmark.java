package io.tnsr.perf.kernels;

import io.tnsr.engine.kernels.AttentionKernels;
import io.tnsr.engine.kernels.HalfAttentionKernels;
import io.tnsr.engine.kernels.VectorOps;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.memory.Region;
import io.tnsr.perf.JitWarmup;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One decode token's attention over a KV cache, at stories110M's shape (12 layers, 12 heads of 64, pages of 16
 * positions), for {@code sequences} sequences at position {@code position}: per sequence and layer, every head's
 * scores page by page, its softmax, and its outputs page by page, as {@code LayerRange} runs them. {@code kv}: a cache
 * of floats or of halves; the halves read half the bytes and widen each value in registers. Setup calls it until C2
 * runs it ({@link JitWarmup}), so that the measured code is the steady state's.
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -p position=512 AttentionBenchmark
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class AttentionBenchmark {
    private static final int LAYERS = 12;
    private static final int HEADS = 12;
    private static final int HEAD_DIM = 64;
    private static final int PAGE = KvCachePool.DEFAULT_PAGE_TOKENS;

    @Param({"f32", "f16"})
    public String kv;

    @Param({"64", "512"})
    public int position;

    @Param({"4"})
    public int sequences;

    private KvCachePool pool;
    private KvCachePool.KvCache[] caches;
    private boolean halves;
    private float[] q;
    private float[] scores;
    private float[] out;

    @Setup
    public void setup() {
        int kvDim = HEADS * HEAD_DIM;
        int len = position + 1;
        pool = new KvCachePool(LAYERS, kvDim, 1024, PAGE, (long) sequences * (len + PAGE), KvCacheType.parse(kv, "kv"));
        halves = pool.halves();
        caches = new KvCachePool.KvCache[sequences];
        SplittableRandom r = new SplittableRandom(11);
        float[] key = new float[kvDim];
        float[] value = new float[kvDim];
        for (int s = 0; s < sequences; s++) {
            caches[s] = pool.getOrCreate(s);
            pool.reserve(caches[s], len);
            for (int p = 0; p < len; p++) {
                for (int layer = 0; layer < LAYERS; layer++) {
                    for (int j = 0; j < kvDim; j++) {
                        key[j] = (float) r.nextGaussian();
                        value[j] = (float) r.nextGaussian();
                    }
                    pool.write(caches[s], layer, p, HEAD_DIM, key, 0, value, 0);
                }
            }
            caches[s].written(len);
        }
        q = new float[HEADS * HEAD_DIM];
        for (int j = 0; j < q.length; j++) {
            q[j] = (float) r.nextGaussian() * 0.1f;
        }
        scores = new float[HEADS * (1024 + PAGE)];
        out = new float[HEADS * HEAD_DIM];
        JitWarmup.untilAllocationFree(kv + " cache, " + sequences + " x " + position, this::attend);
    }

    @Benchmark
    public float attend() {
        int len = position + 1;
        int stride = HEAD_DIM * pool.type().bytes();
        int scoreStride = 1024 + PAGE;
        float scale = 0.125f;
        for (KvCachePool.KvCache kvc : caches) {
            for (int layer = 0; layer < LAYERS; layer++) {
                for (int p0 = 0; p0 < len; p0 += PAGE) {
                    Region page = kvc.page(p0);
                    int count = Math.min(PAGE, len - p0);
                    for (int h = 0; h < HEADS; h++) {
                        int keys = pool.keyOffset(layer, h * HEAD_DIM);
                        if (halves) {
                            HalfAttentionKernels.scores(q, h * HEAD_DIM, page, keys, PAGE, count, HEAD_DIM, scale, scores,
                                    h * scoreStride + p0);
                        } else {
                            AttentionKernels.scores(q, h * HEAD_DIM, page, keys, PAGE, count, HEAD_DIM, scale, scores,
                                    h * scoreStride + p0);
                        }
                    }
                }
                for (int h = 0; h < HEADS; h++) {
                    VectorOps.softmax(scores, h * scoreStride, len);
                    java.util.Arrays.fill(out, h * HEAD_DIM, h * HEAD_DIM + HEAD_DIM, 0f);
                }
                for (int p0 = 0; p0 < len; p0 += PAGE) {
                    Region page = kvc.page(p0);
                    int count = Math.min(PAGE, len - p0);
                    for (int h = 0; h < HEADS; h++) {
                        int values = pool.valueOffset(layer, h * HEAD_DIM);
                        if (halves) {
                            HalfAttentionKernels.accumulate(out, h * HEAD_DIM, scores, h * scoreStride + p0, page, values,
                                    stride, count, HEAD_DIM);
                        } else {
                            AttentionKernels.accumulate(out, h * HEAD_DIM, scores, h * scoreStride + p0, page, values,
                                    stride, count, HEAD_DIM);
                        }
                    }
                }
            }
        }
        return out[0];
    }
}
