package io.tnsr.engine.forward;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.model.LlamaConfig;
import java.util.Arrays;

/**
 * Test driver: a model split into layer ranges run one after another by one calling thread, as stages would (each
 * range's matmuls shared with {@code threads - 1} workers of its own when threads > 1).
 */
final class InProcessPipeline implements AutoCloseable {
    final LlamaConfig cfg;
    final LayerRange[] ranges;
    final float[] x;
    final float[] logits;

    InProcessPipeline(GgufFile file, int maxTokens, int maxSeqs, int... bounds) {
        this(1, file, maxTokens, maxSeqs, bounds);
    }

    InProcessPipeline(int threads, GgufFile file, int maxTokens, int maxSeqs, int... bounds) {
        this(KvCacheType.F32, threads, file, maxTokens, maxSeqs, bounds);
    }

    /** With KV caches of {@code kv} elements. */
    InProcessPipeline(KvCacheType kv, int threads, GgufFile file, int maxTokens, int maxSeqs, int... bounds) {
        cfg = LlamaConfig.fromGguf(file);
        ranges = new LayerRange[bounds.length + 1];
        int from = 0;
        for (int i = 0; i <= bounds.length; i++) {
            int to = i < bounds.length ? bounds[i] : cfg.layers();
            ranges[i] = new LayerRange(file, cfg, from, to,
                    new KvCachePool(to - from, cfg.kvDim(), cfg.contextLength(), 16, 1 << 16, kv), maxTokens, maxSeqs, threads,
                    bytes -> { });
            from = to;
        }
        x = new float[maxTokens * cfg.dim()];
        logits = new float[maxSeqs * cfg.vocabSize()];
    }

    /** Runs the batch over tokens; returns a copy of the logits rows. */
    float[] run(Batch batch, int[] tokens) {
        for (LayerRange r : ranges) {
            r.prepare(batch, r.isFirst() ? tokens : null, 0);
            if (r.isFirst()) {
                r.embed(batch, tokens, 0, x);
            }
            r.forward(batch, x);
            if (r.isLast()) {
                int rows = r.logits(batch, x, logits);
                return Arrays.copyOf(logits, rows * cfg.vocabSize());
            }
        }
        throw new AssertionError("no last range");
    }

    @Override
    public void close() {
        for (LayerRange r : ranges) {
            r.close();
        }
    }
}
