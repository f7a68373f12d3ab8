package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.metrics.LatencySummary;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestModels;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** A pipeline of any number of stages gives the same tokens as one process, and as the reference. */
class PipelineGoldenTest {

    @ParameterizedTest(name = "{0} stages")
    @ValueSource(ints = {1, 2, 3, 5})
    void reproducesEveryGoldenCase(int stages) {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        for (Golden.Case c : Golden.greedyCases()) {
            List<SequenceState> seqs = h.runLocal(List.of(c.prompt()), c.maxNewTokens(), SamplingConfig.GREEDY);
            SequenceState s = seqs.get(0);
            assertArrayEquals(c.promptTokens(), s.promptTokens());
            assertArrayEquals(c.generatedTokens(), s.generatedTokens(), stages + " stages: \"" + c.prompt() + "\"");
            assertEquals(c.stoppedBy(), s.stoppedBy().json());
        }
        LatencySummary l = LatencySummary.read(h.runDir);
        for (int i = 1; i < stages; i++) {
            assertTrue(l.histograms().get("hop-stage" + (i - 1) + "-stage" + i).getTotalCount() > 0, "hop into stage " + i);
        }
    }

    /** Stages that warmed their kernels up on scratch sequences before serving give the reference's tokens. */
    @org.junit.jupiter.api.Test
    void warmedUpStagesReproduceTheGoldenTokens() {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), 2);
        h.pipeline = h.pipeline.withWarmupMillis(3000);
        for (Golden.Case c : Golden.greedyCases()) {
            SequenceState s = h.runLocal(List.of(c.prompt()), c.maxNewTokens(), SamplingConfig.GREEDY).get(0);
            assertArrayEquals(c.generatedTokens(), s.generatedTokens(), "warmed-up stages: \"" + c.prompt() + "\"");
        }
    }

    @ParameterizedTest(name = "{0} stages")
    @ValueSource(ints = {2, 3})
    void promptsLongerThanAFramePrefillInChunksAlongsideOthersDecoding(int stages) {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        io.tnsr.engine.pipeline.PipelineConfig p = h.pipeline;
        h.pipeline = new io.tnsr.engine.pipeline.PipelineConfig(p.host(), p.stages(), p.ringSize(), p.maxFrameBytes(), 4,
                p.maxSequencesPerFrame(), p.waitMode(), p.kvCacheTokens(), p.socketBufferBytes());
        h.microBatches = 1;
        List<Golden.Case> cases = Golden.greedyCases();
        List<String> prompts = cases.stream().map(Golden.Case::prompt).toList();
        List<SequenceState> seqs = h.runLocal(prompts, 60, SamplingConfig.GREEDY);
        for (int i = 0; i < cases.size(); i++) {
            int[] want = java.util.Arrays.copyOf(cases.get(i).generatedTokens(), 60);
            assertArrayEquals(want, seqs.get(i).generatedTokens(), "sequence " + i + " with 4-token frames");
        }
    }

    /** qwen2 (biases) and qwen3 (head size 128 over dim 256, Q/K norms, tied classifier) through stages: one process's tokens. */
    @ParameterizedTest(name = "{0}")
    @org.junit.jupiter.params.provider.CsvSource({"arch/qwen2-synth.gguf, 2", "arch/qwen3-synth.gguf, 3"})
    void qwenModelsGiveTheSameTokensAsOneProcess(String model, int stages) {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/" + model), stages);
        List<String> prompts = List.of("Once upon a time", "The dog ran", "A little girl named Lily");
        List<SequenceState> single = h.runSingle(prompts, 24, SamplingConfig.GREEDY);
        List<SequenceState> piped = h.runLocal(prompts, 24, SamplingConfig.GREEDY);
        for (int i = 0; i < prompts.size(); i++) {
            assertNull(piped.get(i).error());
            assertEquals(24, piped.get(i).generatedTokens().length);
            assertArrayEquals(single.get(i).generatedTokens(), piped.get(i).generatedTokens(), model + ", sequence " + i);
        }
    }

    /** Tokens chosen in the last stage (ids come back) or by the coordinator (logits come back): the same either way. */
    @ParameterizedTest(name = "{0} stages, sampled in the last stage: {1}")
    @org.junit.jupiter.params.provider.CsvSource({"2, true", "4, true", "2, false", "3, false"})
    void syntheticModelsGiveTheSameTokensAsOneProcessWhileSequencesJoinAndLeave(int stages, boolean sampleInLastStage) {
        PipelineHarness h = new PipelineHarness(TestModels.get(ModelSpec.tiny()), stages);
        h.sampleInLastStage = sampleInLastStage;
        h.microBatches = 3;
        h.batchSize = 2;
        List<String> prompts = new ArrayList<>();
        for (int i = 0; i < 9; i++) {
            prompts.add("the " + "quick ".repeat(i) + "fox " + i);
        }
        SamplingConfig sc = new SamplingConfig(0.9f, 20, 0.9f, 1234);
        List<SequenceState> single = h.runSingle(prompts, 24, sc);
        List<SequenceState> piped = h.runLocal(prompts, 24, sc);
        for (int i = 0; i < prompts.size(); i++) {
            assertNull(piped.get(i).error());
            assertArrayEquals(single.get(i).generatedTokens(), piped.get(i).generatedTokens(), "sequence " + i);
            assertEquals(single.get(i).stoppedBy(), piped.get(i).stoppedBy());
        }
    }

    /**
     * A cache of halves: through stages (1, 2 or 3, the stages' processes each keeping their own) the same tokens as one
     * process with such a cache, sampled in the last stage or by the coordinator.
     */
    @ParameterizedTest(name = "{0} stages, sampled in the last stage: {1}")
    @org.junit.jupiter.params.provider.CsvSource({"1, true", "2, true", "3, false"})
    void aCacheOfHalvesGivesTheSameTokensThroughStagesAsInOneProcess(int stages, boolean sampleInLastStage) {
        PipelineHarness h = new PipelineHarness(TestModels.get(ModelSpec.tiny()), stages);
        h.pipeline = h.pipeline.withKvCacheType(io.tnsr.engine.kvcache.KvCacheType.F16);
        h.sampleInLastStage = sampleInLastStage;
        h.microBatches = 2;
        h.batchSize = 2;
        List<String> prompts = List.of("the quick fox", "a", "the quick quick quick brown fox jumps", "hello there");
        SamplingConfig sc = new SamplingConfig(0.9f, 20, 0.9f, 99);
        List<SequenceState> single = h.runSingle(prompts, 24, sc);
        List<SequenceState> piped = h.runLocal(prompts, 24, sc);
        for (int i = 0; i < prompts.size(); i++) {
            assertNull(piped.get(i).error());
            assertArrayEquals(single.get(i).generatedTokens(), piped.get(i).generatedTokens(), "sequence " + i);
        }
    }

    @ParameterizedTest(name = "{0} stages")
    @ValueSource(ints = {1, 3})
    void sequencesFinishingAtDifferentTimesLeaveAndOthersJoin(int stages) {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        h.microBatches = 2;
        h.batchSize = 2;
        List<Golden.Case> cases = Golden.greedyCases();
        List<String> prompts = new ArrayList<>();
        for (int rep = 0; rep < 3; rep++) {
            for (Golden.Case c : cases) {
                prompts.add(c.prompt());
            }
        }
        List<SequenceState> seqs = h.runLocal(prompts, 300, SamplingConfig.GREEDY);
        for (int i = 0; i < seqs.size(); i++) {
            Golden.Case c = cases.get(i % cases.size());
            int[] got = seqs.get(i).generatedTokens();
            int n = Math.min(c.generatedTokens().length, got.length);
            assertArrayEquals(java.util.Arrays.copyOf(c.generatedTokens(), n), java.util.Arrays.copyOf(got, n), "sequence " + i);
            if (c.stoppedBy().equals("bos")) {
                assertEquals("bos", seqs.get(i).stoppedBy().json());
                assertEquals(c.generatedTokens().length, got.length);
            } else {
                assertEquals(300, got.length);
            }
        }
        assertEquals(seqs.size(), h.events.stream().filter(e -> e.startsWith("finished")).count());
    }
}
