package io.tnsr.perf.kernels;

import io.tnsr.engine.forward.CachedAttention;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCacheType;
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
 * positions), for {@code sequences} sequences at position {@code position}: per sequence and layer, the engine's
 * {@link CachedAttention#row} over all heads, as {@code LayerRange} runs it on one thread. {@code kv}: a cache
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
    private CachedAttention attention;
    private float[] q;
    private float[] scores;
    private float[] out;

    @Setup
    public void setup() {
        int kvDim = HEADS * HEAD_DIM;
        int len = position + 1;
        pool = new KvCachePool(LAYERS, kvDim, 1024, PAGE, (long) sequences * (len + PAGE), KvCacheType.parse(kv, "kv"));
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
        attention = new CachedAttention(pool, HEADS, HEADS, HEAD_DIM, 1024 + PAGE);
        scores = new float[attention.scoresLength()];
        out = new float[HEADS * HEAD_DIM];
        JitWarmup.untilAllocationFree(kv + " cache, " + sequences + " x " + position, this::attend);
    }

    @Benchmark
    public float attend() {
        int len = position + 1;
        for (KvCachePool.KvCache kvc : caches) {
            for (int layer = 0; layer < LAYERS; layer++) {
                attention.row(kvc, layer, len, q, 0, 0, 1, scores, out, 0);
            }
        }
        return out[0];
    }
}
