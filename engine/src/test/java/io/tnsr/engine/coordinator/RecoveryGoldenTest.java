package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.SharedData;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * A stage is lost in the middle of a run (its threads stop and its sockets close, as in a crash) and the
 * coordinator replaces it and replays the running sequences: every sequence still gives the golden tokens, with 2, 3
 * and 5 stages, whether the stage was lost during a prefill, during decode, or with several micro-batches in flight.
 */
@Timeout(300)
class RecoveryGoldenTest {

    @ParameterizedTest(name = "{0} stages, stage {1} lost {2}")
    @CsvSource({
        "2, 0, during prefill", "2, 1, during decode", "2, 1, with micro-batches in flight",
        "3, 0, during prefill", "3, 2, during decode", "3, 1, with micro-batches in flight",
        "5, 0, during prefill", "5, 4, during decode", "5, 2, with micro-batches in flight"})
    void everySequenceGivesTheGoldenTokensAfterAStageIsReplaced(int stages, int lost, String when) {
        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        List<Golden.Case> cases = new ArrayList<>(Golden.greedyCases());
        int killAtToken;
        switch (when) {
            case "during prefill" -> {
                // 4-token frames: the 11-token prompt takes three steps in its micro-batch, and the 5-token one two in
                // the other; when the short one's first token comes back, the long one's prefill is in flight.
                PipelineConfig p = h.pipeline;
                h.pipeline = new PipelineConfig(p.host(), p.stages(), p.ringSize(), p.maxFrameBytes(), 4, p.maxSequencesPerFrame(),
                        p.waitMode(), p.kvCacheTokens(), p.socketBufferBytes());
                h.microBatches = 2;
                h.batchSize = 1;
                cases = List.of(cases.get(0), cases.get(2), cases.get(1));
                killAtToken = 1;
            }
            case "during decode" -> {
                h.microBatches = 1;
                killAtToken = 60;
            }
            default -> {
                h.microBatches = 3;
                h.batchSize = 1;
                killAtToken = 100;
            }
        }
        LocalStages local = new LocalStages(h.pipeline, h.model, h.runDir);
        Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
        List<SequenceState> seqs = h.sequences(cases.stream().map(Golden.Case::prompt).toList(), cases.get(0).maxNewTokens(), sampler);
        // every case with its own limit
        seqs.clear();
        for (Golden.Case c : cases) {
            seqs.add(new SequenceState(seqs.size(), c.prompt(), h.tok.encode(c.prompt(), true), c.maxNewTokens(),
                    h.cfg.contextLength(), h.tok.bos(), h.tok::isEndOfGeneration, sampler));
        }
        AtomicInteger tokens = new AtomicInteger();
        int[] atKill = new int[2];   // sequences still prefilling, sequences running, when the stage was lost
        Generator.Listener listener = new Generator.Listener() {
            @Override
            public void onToken(SequenceState seq, int token) {
                if (tokens.incrementAndGet() == killAtToken) {
                    for (SequenceState s : seqs) {
                        atKill[0] += !s.finished() && s.generatedCount() == 0 ? 1 : 0;
                        atKill[1] += !s.finished() ? 1 : 0;
                    }
                    local.kill(lost);
                }
            }

            @Override
            public void onFinished(SequenceState seq) {
            }
        };
        PipelineRun.Outcome outcome = PipelineRun.run(local, h.settings(), h.cfg, seqs, listener);
        for (int i = 0; i < cases.size(); i++) {
            Golden.Case c = cases.get(i);
            assertArrayEquals(c.generatedTokens(), seqs.get(i).generatedTokens(), "\"" + c.prompt() + "\" after stage " + lost
                    + " of " + stages + " was lost " + when);
            assertEquals(c.stoppedBy(), seqs.get(i).stoppedBy().json());
        }
        assertEquals(1, outcome.recoveries().size(), "one recovery");
        assertEquals(List.of(lost), outcome.recoveries().get(0).replaced(), "the lost stage was replaced");
        switch (when) {
            case "during prefill" -> assertTrue(atKill[0] >= 1, "a prompt was being prefilled when the stage was lost");
            case "during decode" -> assertEquals(0, atKill[0], "every running sequence was decoding");
            default -> assertTrue(atKill[1] >= 3, atKill[1] + " sequences ran, one per micro-batch: the others' steps were in flight");
        }
        for (int i = 0; i < stages; i++) {
            assertEquals(0, local.stage(i).kvPagesAtShutdown(), "stage " + i + "'s KV pool at the end of the run");
        }
    }

    /**
     * Seeded sampling: each sequence's random state is untouched by the steps that were lost (nothing was sampled from
     * them), so after the replay it draws exactly what an uninterrupted run draws.
     */
    @ParameterizedTest(name = "{0} stages, stage {1} lost")
    @CsvSource({"3, 1", "5, 3"})
    void seededSequencesGiveTheTokensOfAnUninterruptedRun(int stages, int lost) {
        SamplingConfig seeded = new SamplingConfig(0.9f, 40, 0.95f, 42);
        List<String> prompts = List.of("Once upon a time", "One day, a little boy named Tim", "", "The cat");
        PipelineHarness whole = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        whole.microBatches = 2;
        List<SequenceState> want = whole.runLocal(prompts, 200, seeded);

        PipelineHarness h = new PipelineHarness(SharedData.path("models/stories260K.gguf"), stages);
        h.microBatches = 2;
        LocalStages local = new LocalStages(h.pipeline, h.model, h.runDir);
        List<SequenceState> seqs = h.sequences(prompts, 200, new Sampler(seeded, h.cfg.vocabSize()));
        AtomicInteger tokens = new AtomicInteger();
        PipelineRun.Outcome outcome = PipelineRun.run(local, h.settings(), h.cfg, seqs, new Generator.Listener() {
            @Override
            public void onToken(SequenceState seq, int token) {
                if (tokens.incrementAndGet() == 150) {
                    local.kill(lost);
                }
            }

            @Override
            public void onFinished(SequenceState seq) {
            }
        });
        assertEquals(1, outcome.recoveries().size());
        for (int i = 0; i < prompts.size(); i++) {
            assertArrayEquals(want.get(i).generatedTokens(), seqs.get(i).generatedTokens(), "seeded \"" + prompts.get(i) + "\"");
        }
    }
}
