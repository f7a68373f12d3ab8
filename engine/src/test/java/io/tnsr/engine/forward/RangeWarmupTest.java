package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.ChildProcess;
import io.tnsr.engine.testing.TestModels;
import io.tnsr.engine.process.ChildJvm;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/** A stage's warm-up runs its layers and leaves nothing behind that a real sequence could see. */
class RangeWarmupTest {
    private static final int[] PROMPT = {5, 17, 3, 42, 8, 11};

    /** A prompt as one block, then three decode steps, through the pipeline's ranges; every call's logits. */
    private static List<float[]> generate(InProcessPipeline p) {
        List<float[]> out = new ArrayList<>();
        Batch b = new Batch(4, 32);
        out.add(p.run(b.clear().add(0, 0, PROMPT.length, true), PROMPT));
        for (int pos = PROMPT.length; pos < PROMPT.length + 3; pos++) {
            out.add(p.run(b.clear().add(0, pos, 1, true), new int[] {pos * 3 + 1}));
        }
        return out;
    }

    @Test
    void aWarmedUpSplitGivesTheSameLogitsAsAColdOneAndHoldsNoCache() {
        try (GgufFile f = GgufFile.open(TestModels.get(ModelSpec.tiny().withType(GgmlType.Q4_0)));
             InProcessPipeline cold = new InProcessPipeline(f, 32, 4, 2);
             InProcessPipeline warm = new InProcessPipeline(f, 32, 4, 2)) {
            for (LayerRange r : warm.ranges) {
                RangeWarmup.Outcome o = new RangeWarmup(r).run(TimeUnit.MILLISECONDS.toNanos(300));
                assertTrue(o.rounds() >= 1, "layers [" + r.from() + ", " + r.to() + ") ran no round: " + o);
                assertEquals(null, o.note(), "nothing stopped it");
                assertEquals(0, r.cache().usedPages(), "KV cache pages left held by the scratch sequences");
                assertEquals(0, r.cache().liveSequences(), "scratch sequences left live");
            }
            List<float[]> expected = generate(cold);
            List<float[]> actual = generate(warm);
            for (int i = 0; i < expected.size(); i++) {
                assertArrayEquals(expected.get(i), actual.get(i), "call " + i + ": the warm-up changed a result");
            }
        }
    }

    /**
     * Once the warm-up has settled, a stage's first real calls run compiled code: batches and prompts of sizes the
     * warm-up did not run, whose last token groups are short or full, run no kernel boxed (a kernel that C2 compiled
     * without one of those tails would trap back to the interpreter, where every vector is an object). Each type in a
     * fresh JVM, as a stage runs: in this one, every other test's types and shapes have already shaped the profiles.
     */
    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"F32", "Q8_0", "Q4_0"})
    void afterASettledWarmUpOtherBatchAndPromptSizesRunCompiled(GgmlType type) throws Exception {
        Path model = TestModels.get(ModelSpec.tiny().withType(type));
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx512m");
        cmd.addAll(ChildJvm.classPath());
        cmd.addAll(List.of(WarmupAllocationProbe.class.getName(), model.toString()));
        ChildProcess probe = ChildProcess.run(type + "'s probe JVM", cmd, 120);
        String out = probe.output().trim();
        assertEquals(0, probe.exitCode(), type + ": " + out);
        assertTrue(out.endsWith("none boxed"), type + ": " + out);
    }

    @Test
    void aCacheTooSmallForTheScratchSequencesStopsTheWarmUpAndSaysWhy() {
        try (GgufFile f = GgufFile.open(TestModels.get(ModelSpec.tiny()))) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            // one page of 16 positions: the first round's prompt (as many tokens as a frame holds, 32) does not fit
            try (LayerRange r = new LayerRange(f, c, 0, c.layers(), new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, 16),
                    32, 4, 1, bytes -> { })) {
                RangeWarmup.Outcome o = new RangeWarmup(r).run(TimeUnit.SECONDS.toNanos(30));
                assertFalse(o.settled());
                assertNotNull(o.note(), "the reason it stopped");
                assertTrue(o.note().contains("sequence 0"), o.note());
                assertEquals(0, r.cache().usedPages(), "pages left held");
            }
        }
    }
}
