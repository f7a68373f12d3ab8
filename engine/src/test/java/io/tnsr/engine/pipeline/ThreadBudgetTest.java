package io.tnsr.engine.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import org.junit.jupiter.api.Test;

class ThreadBudgetTest {

    @Test
    void stagesOfSeveralThreadsBeyondTheCoresAreAdvisedAgainst() {
        assertEquals("2 stages x 2 threads = 4 compute threads on 2 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 1, or fewer stages of more threads (for many sequences on 2 cores: --stages 1"
                        + " --threads-per-stage 2), keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(2), 2));
        assertEquals("2 stages x 4 threads = 8 compute threads on 4 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 2 keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(4), 4));
        assertEquals("1 stage x 4 threads = 4 compute threads on 2 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 2 keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 1, WaitMode.BLOCK).withThreadsPerStage(4), 2));
        assertEquals("4 stages x 2 threads = 8 compute threads on 2 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 1, or fewer stages of more threads (for many sequences on 2 cores: --stages 1"
                        + " --threads-per-stage 2), keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 4, WaitMode.BLOCK).withThreadsPerStage(2), 2));
    }

    @Test
    void layoutsWithinTheCoresAndStagesOfOneThreadAreLeftAlone() {
        assertNull(ThreadBudget.advice(PipelineConfig.defaults(12, 1, WaitMode.BLOCK).withThreadsPerStage(2), 2));
        assertNull(ThreadBudget.advice(PipelineConfig.defaults(12, 4, WaitMode.BLOCK), 2), "pipelining: no barrier");
        assertNull(ThreadBudget.advice(PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(2), 4));
    }

    @Test
    void autoSharesTheCpusAmongTheStagesStartedHereAndIsNeverAdvisedAgainst() {
        PipelineConfig one = PipelineConfig.defaults(12, 1, WaitMode.BLOCK).withThreadsPerStage(0);
        PipelineConfig three = PipelineConfig.defaults(12, 3, WaitMode.BLOCK).withThreadsPerStage(0);
        assertEquals(2, one.threadsPerStage(2), "16 sequences on 2 cores: one stage of two threads");
        assertEquals(1, one.threadsPerStage(1));
        assertEquals(256, one.threadsPerStage(1000), "at most threads_per_stage's bound");
        assertEquals(1, three.threadsPerStage(2), "more stages than CPUs: one thread each, pipelining");
        assertEquals(2, three.threadsPerStage(8), "8 CPUs over 3 stages: 2 each, within the cores");
        PipelineConfig halfHere = one.withStages(List.of(new StageSpec(0, 6, 0, List.of(), null),
                new StageSpec(6, 12, 0, List.of(), "10.0.0.2:7001")));
        assertEquals(4, halfHere.threadsPerStage(4), "the external stage runs on its own machine's CPUs");
        assertEquals(3, three.withThreadsPerStage(3).threadsPerStage(2), "a number given is kept");
        List<WaitMode> spinning = SpinPolicy.decide(three, true, 8).waits();
        assertEquals(List.of(WaitMode.SPIN, WaitMode.SPIN, WaitMode.SPIN), spinning);
        assertEquals(2, three.threadsPerStage(7, spinning), "spinning stages leave a CPU to the rest: 6 of 7 over 3");
        assertEquals(1, three.threadsPerStage(6, spinning));
        assertEquals(2, three.threadsPerStage(6, SpinPolicy.decide(three, false, 6).waits()));
        for (int cpus = 1; cpus <= 9; cpus++) {
            assertNull(ThreadBudget.advice(one, cpus));
            assertNull(ThreadBudget.advice(three, cpus));
        }
    }

    @Test
    void autoSharesTheCpusAmongEveryLocalStageWhateverTheMicroBatches() {
        // stages that take turns could each take every CPU, but a second thread per stage cost quantized weights of a
        // small model more than it gave (docs/pipelining.md): auto does not count turns, the option can
        PipelineConfig two = PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(0);
        List<WaitMode> blocking = List.of(WaitMode.BLOCK, WaitMode.BLOCK);
        assertEquals(1, two.threadsPerStage(2, blocking));
        assertEquals(2, two.threadsPerStage(4, blocking));
        assertEquals(2, two.withThreadsPerStage(2).threadsPerStage(2, blocking), "a number given is kept");
        assertEquals(1, two.computingStages(1));
        assertEquals(2, two.computingStages(5));
    }

    @Test
    void stagesThatTakeTurnsAreAdvisedOnTheThreadsComputingAtOnce() {
        PipelineConfig twoOfTwo = PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(2);
        assertNull(ThreadBudget.advice(twoOfTwo, 2, 1), "one micro-batch: 2 threads compute at a time");
        assertEquals(ThreadBudget.advice(twoOfTwo, 2), ThreadBudget.advice(twoOfTwo, 2, 2));
        assertEquals("2 stages x 2 threads = 4 compute threads on 2 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 1, or fewer stages of more threads (for many sequences on 2 cores: --stages 1"
                        + " --threads-per-stage 2), keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 4, WaitMode.BLOCK).withThreadsPerStage(2), 2, 2),
                "4 stages, 2 micro-batches: 2 of them compute at once");
        assertEquals("1 stage x 3 threads = 3 compute threads on 2 CPUs: every matmul's threads wait for one that is off"
                        + " its core; --threads-per-stage 2 keeps them within the cores",
                ThreadBudget.advice(PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(3), 2, 1));
    }

    @Test
    void oneProcessWithMoreThreadsThanCoresIsAdvisedAgainstAndWithinThemLeftAlone() {
        assertEquals("3 threads on 2 CPUs: every matmul's threads wait for one that is off its core; --threads 2 keeps"
                + " them within the cores", ThreadBudget.advice(3, 2));
        assertEquals("8 threads on 1 CPUs: every matmul's threads wait for one that is off its core; --threads 1 keeps"
                + " them within the cores", ThreadBudget.advice(8, 1));
        assertNull(ThreadBudget.advice(2, 2));
        assertNull(ThreadBudget.advice(1, 4));
    }

    @Test
    void externalStagesRunOnOtherMachinesAndDoNotCount() {
        PipelineConfig pc = PipelineConfig.defaults(12, 2, WaitMode.BLOCK).withThreadsPerStage(2)
                .withStages(List.of(new StageSpec(0, 6, 0, List.of(), null), new StageSpec(6, 12, 0, List.of(), "10.0.0.2:7001")));
        assertNull(ThreadBudget.advice(pc, 2));
    }
}
