package io.tnsr.engine.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class PipelineConfigTest {
    @TempDir
    Path tmp;

    @Test
    void evenSplitGivesTheFirstStagesTheExtraLayers() {
        List<StageSpec> s = PipelineConfig.evenSplit(5, 4);
        assertEquals(List.of(2, 1, 1, 1), s.stream().map(StageSpec::layerCount).toList());
        assertEquals(0, s.get(0).layerFrom());
        assertEquals(5, s.get(3).layerTo());
        assertThrows(IllegalArgumentException.class, () -> PipelineConfig.evenSplit(5, 6));
    }

    @Test
    void balancedSplitGivesTheLastStageFewerLayersForItsClassifier() {
        assertEquals(List.of(8, 4), PipelineConfig.balancedSplit(12, 2, 3.5).stream().map(StageSpec::layerCount).toList());
        assertEquals(List.of(2, 1, 1, 1), PipelineConfig.balancedSplit(5, 4, 0).stream().map(StageSpec::layerCount).toList());
        assertEquals(List.of(4, 4, 3, 1), PipelineConfig.balancedSplit(12, 4, 3.5).stream().map(StageSpec::layerCount).toList());
        assertEquals(List.of(12), PipelineConfig.balancedSplit(12, 1, 3.5).stream().map(StageSpec::layerCount).toList());
    }

    @Test
    void everyExampleConfigurationLoads() throws IOException {
        Path dir = Paths.get(System.getenv().getOrDefault("TNSR_REPO_ROOT", "..")).resolve("config");
        assertEquals(4, PipelineConfig.load(dir.resolve("four-stages.json"), 5).stages().size());
        assertEquals(8, PipelineConfig.load(dir.resolve("stories110M-two-stages.json"), 12).stages().get(1).layerFrom());
        assertEquals(WaitMode.SPIN, PipelineConfig.load(dir.resolve("spin-pinned.json"), 5).waitMode());
        PipelineConfig b = PipelineConfig.load(dir.resolve("bounded-memory.json"), 5);
        assertEquals(65536, b.socketBufferBytes());
        assertEquals(2, b.stages().size());
    }

    @Test
    void mistakesAreNamed() throws IOException {
        assertError("{\"stagez\": 2}", "unknown key 'stagez'");
        assertError("{\"stages\": [{\"layers\": [0, 2]}, {\"layers\": [3, 5]}]}", "contiguous");
        assertError("{\"stages\": [{\"layers\": [0, 4]}]}", "the model has 5 layers");
        assertError("{\"stages\": 1, \"ring_size\": 6}", "power of two");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"prot\": 1}]}", "stage 0: unknown key 'prot'");
        assertError("{\"stages\": 1,", "JSON");
    }

    private void assertError(String json, String expected) throws IOException {
        Path f = Files.writeString(tmp.resolve("c.json"), json);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PipelineConfig.load(f, 5));
        assertTrue(e.getMessage().contains(expected) && e.getMessage().contains("c.json"), e.getMessage());
    }
}
