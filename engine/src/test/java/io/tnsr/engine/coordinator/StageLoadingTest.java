package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.stage.StageOptions;
import io.tnsr.engine.stage.StageRuntime;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The stages' start-up loading progress: counted by each stage into its counters file, summed by the coordinator. */
@Timeout(60)
class StageLoadingTest {

    @Test
    void stagesCountTheBytesTheyLoadAndTheCoordinatorSumsThem() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        Path runDir = Files.createTempDirectory("stage-loading");
        assertEquals(0, StageLoading.loaded(runDir, 0, 1), "no stage has written its counters yet");

        long expected;
        try (GgufFile f = GgufFile.open(model)) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            expected = LayerRange.loadBytes(f, c, 0, 1) + LayerRange.loadBytes(f, c, 1, c.layers());
            assertEquals(f.tensorBytes(), LayerRange.loadBytes(f, c, 0, c.layers()),
                    "the whole model loads every tensor of the file once");
        }
        try (StageRuntime s0 = new StageRuntime(options(model, 0, 1, 0, runDir));
             StageRuntime s1 = new StageRuntime(options(model, 1, 4, 1, runDir))) {
            assertTrue(expected > 0);
            assertEquals(expected, StageLoading.total(runDir, 0, 1), "the totals the stages published");
            assertEquals(expected, StageLoading.loaded(runDir, 0, 1), "once built, every stage has loaded all of it");
            assertEquals(StageLoading.loaded(runDir, 0), StageLoading.total(runDir, 0));
        }
    }

    @Test
    void aRangeTellsItsListenerAfterEachPartUpToItsLoadBytes() {
        for (boolean tied : new boolean[] {false, true}) {
            Path model = TestModels.get(new ModelSpec("synthetic-tiny", 64, 4, 4, 2, 160, 512, 256, tied, GgmlType.F32, 7, false));
            try (GgufFile f = GgufFile.open(model)) {
                LlamaConfig c = LlamaConfig.fromGguf(f);
                for (int[] r : new int[][] {{0, 4}, {0, 2}, {2, 4}, {1, 3}}) {
                    List<Long> seen = new ArrayList<>();
                    new LayerRange(f, c, r[0], r[1], new KvCachePool(r[1] - r[0], c.kvDim(), c.contextLength(), 16, 64), 8, 2,
                            seen::add);
                    String what = (tied ? "tied" : "untied") + " [" + r[0] + ", " + r[1] + ")";
                    int parts = (r[1] - r[0]) + (r[0] == 0 ? 1 : 0) + (r[1] == c.layers() ? 1 : 0);
                    assertEquals(parts, seen.size(), what + ": once per layer, embedding and classifier: " + seen);
                    for (int i = 1; i < seen.size(); i++) {
                        assertTrue(seen.get(i) >= seen.get(i - 1), what + ": counts up " + seen);
                    }
                    assertEquals(LayerRange.loadBytes(f, c, r[0], r[1]), seen.get(seen.size() - 1), what + ": ends at the total");
                }
            }
        }
    }

    private static StageOptions options(Path model, int from, int to, int index, Path runDir) {
        return StageOptions.builder(model, from, to).stage(index, 2).metricsDir(runDir).kvCacheTokens(256).once(true).build();
    }
}
