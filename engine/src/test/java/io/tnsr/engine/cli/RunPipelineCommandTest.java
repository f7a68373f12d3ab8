package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import io.tnsr.engine.testing.TestModels;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code tools/run-pipeline}: real stage processes (one JVM each), as the command starts them. */
@Timeout(180)
class RunPipelineCommandTest {

    static Object[] runCli(String... args) {
        return CliRun.run(new RunPipelineCommand(), args);
    }

    @Test
    void runPipelineWithTwoStageProcessesTellsTheGoldenStoryAsJson() throws Exception {
        Golden.Case c = Golden.greedyCases().get(2);
        Path hist = Files.createTempDirectory("hist");
        Object[] r = runCli("--stages", "2", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--prompt", c.prompt(), "--temperature", "0", "--max-tokens", String.valueOf(c.maxNewTokens()), "--json",
                "--histograms", hist.toString());
        assertEquals(0, r[0], (String) r[2]);
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals(2L, json.get("stages"));
        Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
        assertArrayEquals(c.generatedTokens(), TestJson.ints(seq.get("generated_tokens")));
        assertEquals(c.stoppedBy(), seq.get("stopped_by"));
        assertEquals(c.text(), c.prompt() + seq.get("text"));
        Map<?, ?> latency = (Map<?, ?>) json.get("latency");
        for (String hop : List.of("hop-coordinator-stage0", "hop-stage0-stage1", "hop-stage1-coordinator")) {
            Map<?, ?> h = (Map<?, ?>) latency.get(hop);
            assertNotNull(h, hop + " in " + latency.keySet());
            assertTrue(((Number) h.get("count")).longValue() >= c.generatedTokens().length, hop);
        }
        assertTrue(Files.exists(hist.resolve("hop-stage0-stage1.hlog")));
        assertEquals(2, ((List<?>) json.get("stage_compute_share")).size());
    }

    /**
     * A qwen3 model (head size 128: Q 512 wide over a hidden dim of 256) through three stage processes gives
     * llama.cpp's greedy tokens (index.json; this model's are clear of near-ties, see LlamaCppLogitsTest).
     */
    @Test
    void qwen3ThroughThreeStageProcessesGivesLlamaCppsGreedyTokens() throws Exception {
        Map<?, ?> index = (Map<?, ?>) TestJson.read(SharedData.path("golden/llama-cpp-logits/index.json"));
        Map<?, ?> m = (Map<?, ?>) ((Map<?, ?>) index.get("models")).get("arch/qwen3-synth.gguf");
        int[] greedy = TestJson.ints(m.get("greedy"));
        Object[] r = runCli("--stages", "3", "--model", SharedData.path("models/arch/qwen3-synth.gguf").toString(),
                "--prompt", (String) index.get("prompt"), "--temperature", "0", "--max-tokens", String.valueOf(greedy.length),
                "--json");
        assertEquals(0, r[0], (String) r[2]);
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals(3L, json.get("stages"));
        Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
        assertArrayEquals(TestJson.ints(m.get("prompt_tokens")), TestJson.ints(seq.get("prompt_tokens")));
        assertArrayEquals(greedy, TestJson.ints(seq.get("generated_tokens")));
    }

    @Test
    void interruptingTheToolEndsEveryStageProcess() throws Exception {
        ModelSpec t = ModelSpec.tiny();
        Path model = TestModels.get(new ModelSpec(t.name(), t.dim(), t.layers(), t.heads(), t.kvHeads(), t.ffnDim(),
                t.vocabSize(), 8192, t.tied(), t.type(), t.seed(), false));
        List<String> cmd = new java.util.ArrayList<>(List.of(
                java.nio.file.Paths.get(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-javaagent") && !a.startsWith("-agentlib")).toList());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), RunPipelineCommand.class.getName(),
                "--stages", "3", "--model", model.toString(), "--prompt", "go", "--max-tokens", "8000", "--ignore-eos"));
        Process tool = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        try {
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (tool.descendants().count() < 3 && System.nanoTime() < deadline) {
                Thread.sleep(100);
            }
            List<ProcessHandle> stages = tool.descendants().toList();
            assertEquals(3, stages.size(), "three stage processes running");
            Thread.sleep(1000);
            tool.destroy(); // SIGTERM, as Ctrl-C or a supervisor would
            assertTrue(tool.waitFor(20, java.util.concurrent.TimeUnit.SECONDS), "the tool ends");
            for (ProcessHandle p : stages) {
                p.onExit().get(10, java.util.concurrent.TimeUnit.SECONDS);
                assertFalse(p.isAlive(), "stage process " + p.pid() + " ended with the tool");
            }
        } finally {
            tool.destroyForcibly();
        }
    }

    @Test
    void aPortAlreadyInUseIsAClearError() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        try (ServerSocket taken = new ServerSocket()) {
            taken.bind(new InetSocketAddress("127.0.0.1", 0));
            int port = taken.getLocalPort();
            Path config = Files.createTempFile("pipeline", ".json");
            Files.writeString(config, "{\"stages\": [{\"layers\": [0, 2]}, {\"layers\": [2, 4], \"port\": " + port + "}]}");
            Object[] r = runCli("--config", config.toString(), "--model", model.toString(), "--prompt", "x", "--max-tokens", "3");
            assertEquals(3, r[0]);
            String err = (String) r[2];
            assertTrue(err.contains("stage 1 failed: cannot listen on 127.0.0.1:" + port), err);

            // with --json, stdout still holds one JSON object: the error, and every sequence with how it ended
            Object[] j = runCli("--config", config.toString(), "--model", model.toString(), "--prompt", "x", "--prompt", "y",
                    "--max-tokens", "3", "--json");
            assertEquals(3, j[0]);
            Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) j[1]).strip());
            assertTrue(((String) json.get("error")).contains("cannot listen on 127.0.0.1:" + port), json::toString);
            List<?> seqs = (List<?>) json.get("sequences");
            assertEquals(2, seqs.size());
            for (Object o : seqs) {
                assertEquals("error", ((Map<?, ?>) o).get("stopped_by"), json::toString);
                assertTrue(((String) ((Map<?, ?>) o).get("error")).startsWith("the pipeline failed"), json::toString);
            }
        }
    }

    /** A max_frame_bytes too small for the model's logits is refused before any stage process starts: one line, status 2. */
    @Test
    void aMaxFrameBytesTooSmallForTheModelIsRefusedBeforeAnyStageStarts() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        Path config = Files.createTempFile("pipeline", ".json");
        Files.writeString(config, "{\"stages\": 2, \"max_frame_bytes\": 4096}");
        Object[] r = runCli("--config", config.toString(), "--model", model.toString(), "--prompt", "x", "--max-tokens", "3");
        String err = (String) r[2];
        assertEquals(2, r[0], err);
        assertEquals(1, err.strip().lines().count(), err);
        assertTrue(err.contains("max_frame_bytes is 4096 but the last stage's logits frame needs 66112 bytes"), err);
        assertFalse(err.contains("stage0"), "no stage started: " + err);
    }

    /**
     * External stages only, one at an address that is not loopback, and no --key-file: refused before connecting, one
     * line naming the stage, its address and both ways out; with --insecure the run goes ahead and says so loudly.
     */
    @Test
    void anExternalStageOnANonLoopbackAddressNeedsAKeyOrInsecure() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        Path config = Files.createTempFile("pipeline", ".json");
        // 192.0.2.0/24 is reserved for documentation: nothing is sent there, the refusal comes first.
        Files.writeString(config, "{\"stages\": [{\"layers\": [0, 2], \"external\": \"127.0.0.1:9\"},"
                + " {\"layers\": [2, 4], \"external\": \"192.0.2.7:7001\"}]}");
        Object[] r = runCli("--config", config.toString(), "--model", model.toString(), "--prompt", "x", "--max-tokens", "3");
        String err = (String) r[2];
        assertEquals(2, r[0], err);
        assertEquals(1, err.strip().lines().count(), err);
        assertTrue(err.contains("stage1 at 192.0.2.7:7001 is not at a loopback address")
                && err.contains("--key-file") && err.contains("--insecure"), err);
        assertFalse(err.contains("stage0 at"), "the loopback stage is not named: " + err);

        // --insecure: said loudly, then the run goes on. 0.0.0.0 is not loopback, yet Linux connects it to this host,
        // where nothing listens on that port, so the run ends when the stages cannot be reached (nothing leaves the host).
        int closed;
        try (ServerSocket s = new ServerSocket(0)) {
            closed = s.getLocalPort();
        }
        Files.writeString(config, "{\"stages\": [{\"layers\": [0, 4], \"external\": \"0.0.0.0:" + closed + "\"}]}");
        r = runCli("--config", config.toString(), "--model", model.toString(), "--prompt", "x", "--max-tokens", "3", "--insecure",
                "--startup-timeout", "2", "--connect-timeout", "1", "--recovery-timeout", "0");
        err = (String) r[2];
        assertEquals(3, r[0], err);
        assertTrue(err.contains("WARNING: run-pipeline connects to stage0 at 0.0.0.0:" + closed + " WITHOUT AUTHENTICATION (--insecure)"),
                err);
    }
}
