package io.tnsr.engine.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class SpinPolicyTest {

    @Test
    void aStageSpinsPinnedOnlyWhenEveryStageHasACoreAndOneIsLeftOver() {
        SpinPolicy one = SpinPolicy.decide(PipelineConfig.defaults(5, 1, WaitMode.BLOCK), true, 2);
        assertEquals(List.of(WaitMode.SPIN), one.waits());
        assertEquals(List.of(1), one.cpus());
        assertNull(one.warning());
        assertEquals("stage0->CPU1", one.pinning());

        SpinPolicy four = SpinPolicy.decide(PipelineConfig.defaults(5, 4, WaitMode.BLOCK), true, 2);
        assertEquals(List.of(WaitMode.BACKOFF, WaitMode.BACKOFF, WaitMode.BACKOFF, WaitMode.BACKOFF), four.waits());
        assertEquals(List.of(-1, -1, -1, -1), four.cpus());
        assertTrue(four.warning().contains("4 busy-spinning") && four.warning().contains("2 CPUs"), four.warning());

        SpinPolicy roomy = SpinPolicy.decide(PipelineConfig.defaults(5, 4, WaitMode.BLOCK), true, 8);
        assertEquals(List.of(1, 2, 3, 4), roomy.cpus());
    }

    @Test
    void withoutSpinTheConfiguredWaitIsKeptAndConfiguredCpusAreHonoured() {
        assertEquals(List.of(WaitMode.BLOCK, WaitMode.BLOCK), SpinPolicy.decide(PipelineConfig.defaults(5, 2, WaitMode.BLOCK), false, 2).waits());
        PipelineConfig spinConfig = PipelineConfig.defaults(5, 1, WaitMode.SPIN)
                .withStages(List.of(new StageSpec(0, 5, 0, List.of(0), null)));
        SpinPolicy p = SpinPolicy.decide(spinConfig, false, 4);
        assertEquals(List.of(WaitMode.SPIN), p.waits());
        assertEquals(List.of(0), p.cpus());
    }
}
