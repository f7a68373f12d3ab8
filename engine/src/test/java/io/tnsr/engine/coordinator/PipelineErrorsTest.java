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
}
