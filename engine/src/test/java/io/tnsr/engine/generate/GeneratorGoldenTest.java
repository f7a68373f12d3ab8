package io.tnsr.engine.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.SharedData;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Greedy generation on the trained model reproduces llama2.c's run.c token for token. */
class GeneratorGoldenTest {

    private static List<SequenceState> run(List<Golden.Case> cases, int maxTokens, int maxSeqs) {
        try (GgufFile f = GgufFile.open(SharedData.path("models/stories260K.gguf"))) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            LayerRange range = new LayerRange(f, c, 0, c.layers(),
                    new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, 1 << 16), maxTokens, maxSeqs);
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, c.vocabSize());
            List<SequenceState> seqs = new ArrayList<>();
            for (Golden.Case gc : cases) {
                seqs.add(new SequenceState(seqs.size(), gc.prompt(), gc.promptTokens(), gc.maxNewTokens(),
                        c.contextLength(), 1, t -> t == 2, sampler));
            }
            new Generator(range, (s, t) -> { }).run(seqs);
            return seqs;
        }
    }

    private static void check(List<Golden.Case> cases, List<SequenceState> seqs) {
        for (int i = 0; i < cases.size(); i++) {
            Golden.Case gc = cases.get(i);
            SequenceState s = seqs.get(i);
            assertArrayEquals(gc.generatedTokens(), s.generatedTokens(), "generated tokens of \"" + gc.prompt() + "\"");
            assertEquals(gc.stoppedBy(), s.stoppedBy().json(), "stop reason of \"" + gc.prompt() + "\"");
        }
    }

    @Test
    void everyGoldenCaseOneAtATime() {
        for (Golden.Case gc : Golden.greedyCases()) {
            check(List.of(gc), run(List.of(gc), 64, 1));
        }
    }

    @Test
    void everyGoldenCaseBatchedTogetherWithSmallPrefillChunks() {
        List<Golden.Case> cases = Golden.greedyCases();
        check(cases, run(cases, 3, 8));
    }
}
