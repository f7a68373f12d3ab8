package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.StopReason;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class PipelineErrorsTest {

    @Test
    void aStageOutOfKvCacheFailsThatSequenceWithTheStagesMessageAndTheOthersFinish() {
        PipelineHarness h = new PipelineHarness(TestModels.get(ModelSpec.tiny()), 2);
        PipelineConfig p = h.pipeline;
        h.pipeline = new PipelineConfig(p.host(), p.stages(), p.ringSize(), p.maxFrameBytes(), p.maxTokensPerFrame(),
                p.maxSequencesPerFrame(), p.waitMode(), 64, 0); // 4 pages of 16 positions per stage
        h.microBatches = 1;
        String longPrompt = "once upon a time there was a very long prompt that needs more than sixty four positions "
                + "of cache in every stage of this small pipeline, so it cannot run";
        List<SequenceState> seqs = h.runLocal(List.of("hi", longPrompt, "yo"), 8, SamplingConfig.GREEDY);
        SequenceState bad = seqs.get(1);
        assertEquals(StopReason.ERROR, bad.stoppedBy());
        assertTrue(bad.error().contains("stage0") && bad.error().contains("KV cache is full"), bad.error());
        for (int i : new int[] {0, 2}) {
            assertNull(seqs.get(i).error(), "sequence " + i);
            assertEquals(8, seqs.get(i).generatedCount());
        }
    }

    /**
     * A model that overflows for one sequence (here: a NaN in the embedding of a token only its prompt holds) fails
     * that sequence, with a message naming it and its position, wherever its token is chosen: the single-process
     * generator, the coordinator, the last stage. The others keep the tokens they get on the clean model.
     */
    @Test
    void aSequenceWhoseLogitsCannotBeSampledFailsAloneWhereverTokensAreChosen() {
        List<String> prompts = List.of("hi", "once upon a time", "yo");
        int maxTokens = 8;
        PipelineHarness clean = new PipelineHarness(TestModels.get(ModelSpec.tiny()), 2);
        SamplingConfig seeded = new SamplingConfig(0.8f, 40, 0.95f, 11);
        List<SequenceState> greedyClean = clean.runSingle(prompts, maxTokens, SamplingConfig.GREEDY);
        List<SequenceState> seededClean = clean.runSingle(prompts, maxTokens, seeded);
        java.util.Set<Integer> used = new java.util.HashSet<>(); // every token the other two sequences ever feed
        for (List<SequenceState> run : List.of(greedyClean, seededClean)) {
            for (int i : new int[] {0, 2}) {
                for (int t : run.get(i).promptTokens()) {
                    used.add(t);
                }
                for (int t : run.get(i).generatedTokens()) {
                    used.add(t);
                }
            }
        }
        int[] own = greedyClean.get(1).promptTokens();
        int poison = -1;
        for (int k = own.length - 1; k > 0 && poison < 0; k--) {
            poison = used.contains(own[k]) ? -1 : own[k];
        }
        assertTrue(poison > 0, "a token of prompt 1 that the others never feed");
        PipelineHarness h = new PipelineHarness(TestModels.poisoned(ModelSpec.tiny(), poison), 2);
        for (String where : List.of("single", "last stage", "coordinator", "last stage, seeded")) {
            SamplingConfig sc = where.endsWith("seeded") ? seeded : SamplingConfig.GREEDY;
            h.sampleInLastStage = !where.equals("coordinator");
            List<SequenceState> seqs = where.equals("single") ? h.runSingle(prompts, maxTokens, sc) : h.runLocal(prompts, maxTokens, sc);
            SequenceState bad = seqs.get(1);
            assertEquals(StopReason.ERROR, bad.stoppedBy(), where);
            assertTrue(bad.error().contains("sequence 1 at position " + (own.length - 1) + ": ")
                    && bad.error().contains("logits are NaN"), where + ": " + bad.error());
            assertEquals(0, bad.generatedCount(), where);
            assertEquals(where.startsWith("last stage"), bad.error().startsWith("stage1: "), where + ": " + bad.error());
            List<SequenceState> want = sc == seeded ? seededClean : greedyClean;
            for (int i : new int[] {0, 2}) {
                assertNull(seqs.get(i).error(), where + ", sequence " + i);
                assertEquals(java.util.Arrays.toString(want.get(i).generatedTokens()),
                        java.util.Arrays.toString(seqs.get(i).generatedTokens()), where + ", sequence " + i);
            }
        }
    }
}
