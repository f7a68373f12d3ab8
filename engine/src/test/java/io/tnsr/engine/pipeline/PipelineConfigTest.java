package io.tnsr.engine.pipeline;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.model.LlamaConfig;
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
        PipelineConfig hosts = PipelineConfig.load(dir.resolve("three-hosts.json"), 5);
        assertEquals(List.of("10.0.0.4:7001", "10.0.0.5:7001"), hosts.stages().get(2).addresses());
    }

    @Test
    void mistakesAreNamed() throws IOException {
        assertError("{\"stagez\": 2}", "unknown key 'stagez'");
        assertError("{\"stages\": [{\"layers\": [0, 2]}, {\"layers\": [3, 5]}]}", "contiguous");
        assertError("{\"stages\": [{\"layers\": [0, 4]}]}", "the model has 5 layers");
        assertError("{\"stages\": 1, \"ring_size\": 6}", "power of two");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"prot\": 1}]}", "stage 0: unknown key 'prot'");
        assertError("{\"stages\": 1,", "JSON");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"alternatives\": [\"h:1\"]}]}", "stage 0: alternatives are addresses of an external stage");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"external\": \"h:1\", \"alternatives\": [\"nohost\"]}]}",
                "stage 0: alternative \"nohost\" is not host:port");
    }

    /** Every number is range-checked by its key: nothing wraps (2^32 + 1 is not 1), nothing negative becomes a default. */
    @Test
    void numbersOutOfRangeAreErrorsNamingTheKey() throws IOException {
        assertError("{\"max_frame_bytes\": 4294967297}", "max_frame_bytes must be from 56 to 1073741824, got 4294967297");
        assertError("{\"max_frame_bytes\": 1e30}", "max_frame_bytes must be from 56 to 1073741824, got 1000000000000000000000000000000");
        assertError("{\"ring_size\": -4}", "ring_size must be a power of two from 2 to 65536, got -4");
        assertError("{\"ring_size\": 4294967312}", "ring_size must be a power of two from 2 to 65536, got 4294967312");
        assertError("{\"ring_size\": 2.5}", "ring_size must be a whole number, got 2.5");
        assertError("{\"max_tokens_per_frame\": 0}", "max_tokens_per_frame must be from 1 to 1048576, got 0");
        assertError("{\"max_sequences_per_frame\": 256}", "max_sequences_per_frame must be from 1 to 255, got 256");
        assertError("{\"kv_cache_tokens\": -1}", "kv_cache_tokens must be from 0 (auto) to 1099511627776, got -1");
        assertError("{\"socket_buffer_bytes\": -65536}",
                "socket_buffer_bytes must be from 0 (the OS default) to 2147483647, got -65536");
        assertError("{\"stall_threshold_us\": 99999999999999999999}",
                "stall_threshold_us must be from 1 to 3600000000, got 99999999999999999999");
        assertError("{\"stages\": 4294967297}", "stages must be from 1 to 5, got 4294967297");
        assertError("{\"stages\": [{\"layers\": [0, 4294967301]}]}", "stage 0: layers must be from 0 to 5, got 4294967301");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"port\": -1}]}",
                "stage 0: port must be from 0 (any free port) to 65535, got -1");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"cpus\": [4294967297]}]}",
                "stage 0: cpus must be from 0 to 65535, got 4294967297");
        assertError("{\"threads_per_stage\": -1}", "threads_per_stage must be from 0 (auto) to 256, got -1");
        assertError("{\"threads_per_stage\": 4294967298}", "threads_per_stage must be from 0 (auto) to 256, got 4294967298");
        assertError("{\"ring_size\": true}", "ring_size: ");
        assertError("{\"ring_size\": \"16\"}", "ring_size: must be a number at line 1, column 15");
        assertError("[1, 2]", "expected an object ({...}) at line 1, column 1");
        assertError("{\"ring_size\": 16} {}", "not valid JSON: more data after the JSON value at line 1, column 19");
        assertError("{\"ring_size\": 16", "not valid JSON: unexpected end of input at line 1, column 17");
        assertError("{\"stages\": [{\"layers\": [0, 5], \"port\": \"9000\"}]}", "port");
        assertError("{\"warmup_ms\": -1}", "warmup_ms must be from 0 (no warm-up) to 600000, got -1");
        Path f = Files.writeString(tmp.resolve("ok.json"),
                "{\"ring_size\": 8.0, \"kv_cache_tokens\": 4294967296, \"threads_per_stage\": 2, \"warmup_ms\": 5000}");
        PipelineConfig ok = PipelineConfig.load(f, 5);
        assertEquals(2, ok.threadsPerStage());
        assertEquals(5000, ok.warmupMillis());
        assertEquals(0, PipelineConfig.defaults(5, 1, ok.waitMode()).warmupMillis(), "no warm-up unless asked");
        assertEquals(5000, ok.withStages(ok.stages()).withThreadsPerStage(1).withWaitMode(ok.waitMode()).warmupMillis(),
                "kept through the with- methods");
        assertEquals(1, PipelineConfig.defaults(5, 1, ok.waitMode()).threadsPerStage(), "one thread unless asked");
        assertEquals(0, PipelineConfig.load(Files.writeString(tmp.resolve("auto.json"), "{}"), 5).threadsPerStage(),
                "a file without the key: auto");
        assertEquals(0, PipelineConfig.resolve(null, 1, 5).threadsPerStage(), "no file: auto");
        assertEquals(8, ok.ringSize());
        assertEquals(4294967296L, ok.kvCacheTokens());
        assertEquals(KvCacheType.F32, ok.kvCacheType(), "an exact cache unless asked");
        assertError("{\"kv_cache_type\": \"q8\"}", "\"kv_cache_type\": unknown KV cache type 'q8': f32 or f16");
        PipelineConfig halves = PipelineConfig.load(Files.writeString(tmp.resolve("f16.json"), "{\"kv_cache_type\": \"F16\"}"), 5);
        assertEquals(KvCacheType.F16, halves.kvCacheType());
        assertEquals(KvCacheType.F16, halves.withStages(halves.stages()).withThreadsPerStage(2).withWaitMode(ok.waitMode())
                .withWarmupMillis(10).kvCacheType(), "kept through the with- methods");
        assertEquals(KvCacheType.F32, halves.withKvCacheType(KvCacheType.F32).kvCacheType());
    }

    /**
     * max_frame_bytes must hold the frames the model needs: the last stage's logits (one vocabulary-sized row per
     * sequence) and the activations between stages; the sizes come from {@link FrameSizes}, as the stages' buffers do.
     */
    @Test
    void aMaxFrameBytesTooSmallForTheModelsFramesIsRefusedWithTheNumbers() {
        LlamaConfig bigVocab = new LlamaConfig(64, 5, 8, 4, 8, 172, 32000, 2048, 1e-5f, 10000f, 8);
        PipelineConfig oneMiB = new PipelineConfig("127.0.0.1", PipelineConfig.evenSplit(5, 2), 16, 1 << 20, 256, 32,
                WaitMode.BLOCK, 0, 0);
        assertEquals(56 + 32 * 32000 * 4 + 32 * 16 + 8, FrameSizes.logitsFrameBytes(32, 32000));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> oneMiB.checkFrames(bigVocab));
        assertTrue(e.getMessage().contains("max_frame_bytes is 1048576 but the last stage's logits frame needs 4096576 bytes")
                && e.getMessage().contains("max_sequences_per_frame 32 x vocabulary 32000"), e.getMessage());

        LlamaConfig smallVocab = new LlamaConfig(64, 5, 8, 4, 8, 172, 512, 2048, 1e-5f, 10000f, 8);
        PipelineConfig manyTokens = new PipelineConfig("127.0.0.1", PipelineConfig.evenSplit(5, 2), 16, 1 << 20, 4096, 32,
                WaitMode.BLOCK, 0, 0);
        e = assertThrows(IllegalArgumentException.class, () -> manyTokens.checkFrames(smallVocab));
        assertTrue(e.getMessage().contains("an activation frame between stages needs 1049152 bytes")
                && e.getMessage().contains("max_tokens_per_frame 4096 x hidden size 64"), e.getMessage());
        assertDoesNotThrow(() -> manyTokens.withStages(PipelineConfig.evenSplit(5, 1)).checkFrames(smallVocab),
                "one stage passes no activations");
        assertDoesNotThrow(() -> PipelineConfig.defaults(5, 4, WaitMode.BLOCK).checkFrames(bigVocab));

        LlamaConfig wide = new LlamaConfig(4096, 5, 32, 8, 128, 11008, 512, 2048, 1e-5f, 10000f, 128);
        PipelineConfig oneStage = new PipelineConfig("127.0.0.1", PipelineConfig.evenSplit(5, 1), 16, 1 << 30, 1 << 20, 32,
                WaitMode.BLOCK, 0, 0);
        e = assertThrows(IllegalArgumentException.class, () -> oneStage.checkFrames(wide));
        assertTrue(e.getMessage().contains("a stage's ring slot would take 17179873328 bytes"), e.getMessage());
    }

    private void assertError(String json, String expected) throws IOException {
        Path f = Files.writeString(tmp.resolve("c.json"), json);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> PipelineConfig.load(f, 5));
        assertTrue(e.getMessage().contains(expected) && e.getMessage().contains("c.json"), e.getMessage());
    }
}
