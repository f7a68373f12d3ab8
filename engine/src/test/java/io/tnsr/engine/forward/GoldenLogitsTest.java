package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.SharedData;
import org.junit.jupiter.api.Test;

/** The trained stories260K model against the logits llama2.c's run.c computed for "Once upon a time". */
class GoldenLogitsTest {

    @Test
    void logitsMatchTheReferenceAtEveryPosition() {
        float[][] expected = Golden.onceUponATimeLogits();
        Golden.Case c = Golden.greedyCases().get(0);
        assertEquals("Once upon a time", c.prompt());
        int[] tokens = new int[expected.length];
        for (int p = 0; p < tokens.length; p++) {
            tokens[p] = p < c.promptTokens().length ? c.promptTokens()[p] : c.generatedTokens()[p - c.promptTokens().length];
        }
        try (GgufFile file = GgufFile.open(SharedData.path("models/stories260K.gguf"))) {
            LlamaConfig cfg = LlamaConfig.fromGguf(file);
            LayerRange range = new LayerRange(file, cfg, 0, cfg.layers(),
                    new KvCachePool(cfg.layers(), cfg.kvDim(), cfg.contextLength(), 16, 4096), 64, 4);
            Batch batch = new Batch(4, 64);
            float[] x = new float[64 * cfg.dim()];
            float[] logits = new float[4 * cfg.vocabSize()];
            double worst = 0;
            for (int p = 0; p < tokens.length; p++) {
                batch.clear().add(7, p, 1, true);
                range.prepare(batch, tokens, p);
                range.embed(batch, tokens, p, x);
                range.forward(batch, x);
                range.logits(batch, x, logits);
                float[] row = java.util.Arrays.copyOf(logits, cfg.vocabSize());
                for (int i = 0; i < row.length; i++) {
                    worst = Math.max(worst, Math.abs(row[i] - expected[p][i]));
                }
                assertArrayEquals(expected[p], row, 1e-4f, "logits at position " + p);
            }
            System.out.println("stories260K golden logits: worst absolute difference " + worst);
        }
    }
}
