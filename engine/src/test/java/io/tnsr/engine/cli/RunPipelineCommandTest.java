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
import java.util.stream.Stream;
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
        assertEquals(1L, json.get("micro_batches"));
        assertEquals((long) Math.max(1, Runtime.getRuntime().availableProcessors() / 2), json.get("threads_per_stage"),
                "auto: the CPUs shared between the two stages");
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
     * A stage process whose matmuls two threads share gives the golden tokens, as one thread does; without
     * --threads-per-stage a lone stage takes every CPU; a bad value is refused by name.
     */
    @Test
    void aStageOfTwoThreadsTellsTheGoldenStory() throws Exception {
        Golden.Case c = Golden.greedyCases().get(1);
        Object[] r = runCli("--stages", "1", "--threads-per-stage", "2", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--prompt", c.prompt(), "--temperature", "0", "--max-tokens", String.valueOf(c.maxNewTokens()), "--json");
        assertEquals(0, r[0], (String) r[2]);
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals(2L, json.get("threads_per_stage"));
        Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
        assertArrayEquals(c.generatedTokens(), TestJson.ints(seq.get("generated_tokens")));
        Object[] auto = runCli("--stages", "1", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--prompt", c.prompt(), "--temperature", "0", "--max-tokens", String.valueOf(c.maxNewTokens()), "-v");
        assertEquals(0, auto[0], (String) auto[2]);
        int cpus = Runtime.getRuntime().availableProcessors();
        assertTrue(((String) auto[2]).contains(", " + cpus + (cpus == 1 ? " thread" : " threads") + " per stage (auto),"),
                "by default one stage takes every CPU: " + auto[2]);
        for (String value : new String[] {"257", "-1", "two"}) {
            Object[] bad = runCli("--stages", "1", "--threads-per-stage", value, "--model",
                    SharedData.path("models/stories260K.gguf").toString(), "--prompt", c.prompt());
            assertEquals(2, bad[0], "a usage error");
            assertTrue(((String) bad[2]).contains("--threads-per-stage: must be auto (or 0, the same) or a number of threads from 1 to 256, got '"
                    + value + "'"), (String) bad[2]);
        }
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
        Path tmp = Files.createTempDirectory("interrupted-run"); // the tool's own temporary directory
        cmd.addAll(List.of("-Djava.io.tmpdir=" + tmp, "-cp", System.getProperty("java.class.path"),
                RunPipelineCommand.class.getName(),
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
            try (var left = Files.list(tmp)) { // the run's metrics directory went with it
                assertEquals(List.of(), left.toList());
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
     * An external stage dies mid-run and never comes back: the recovery gives up after --recovery-timeout, the tool
     * exits 3 with an error naming the stage, and no stage process is left.
     */
    @Test
    void aStageThatNeverComesBackEndsTheRunWithStatus3NamingItAndNoProcessLeft() throws Exception {
        ModelSpec t = ModelSpec.tiny();
        Path model = TestModels.get(new ModelSpec(t.name(), t.dim(), t.layers(), t.heads(), t.kvHeads(), t.ffnDim(),
                t.vocabSize(), 8192, t.tied(), t.type(), t.seed(), false));
        List<String> cmd = new java.util.ArrayList<>(io.tnsr.engine.process.ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx256m");
        cmd.addAll(io.tnsr.engine.process.ChildJvm.classPath());
        cmd.addAll(List.of(io.tnsr.engine.stage.StageMain.class.getName(), "--model", model.toString(), "--layers", "2:4"));
        Process external = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        try {
            String listening = new java.io.BufferedReader(new java.io.InputStreamReader(external.getInputStream())).readLine();
            assertTrue(listening != null && listening.startsWith("LISTENING "), listening);
            String address = "127.0.0.1:" + listening.substring("LISTENING ".length()).trim();
            Path config = Files.createTempFile("pipeline", ".json");
            Files.writeString(config, "{\"stages\": [{\"layers\": [0, 2]}, {\"layers\": [2, 4], \"external\": \"" + address + "\"}]}");
            java.util.Set<Long> before = ProcessHandle.current().descendants().map(ProcessHandle::pid)
                    .collect(java.util.stream.Collectors.toSet());
            java.io.ByteArrayOutputStream text = new java.io.ByteArrayOutputStream();
            java.util.concurrent.CompletableFuture<Object[]> run = java.util.concurrent.CompletableFuture.supplyAsync(() -> CliRun.run(
                    new RunPipelineCommand(), text, "--config", config.toString(), "--model", model.toString(), "--prompt", "go",
                    "--max-tokens", "8000", "--ignore-eos", "--recovery-timeout", "3"));
            long deadline = System.nanoTime() + 60_000_000_000L;
            while (text.size() < 100 && !run.isDone() && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            assertTrue(text.size() >= 100, "the story is being told");
            List<ProcessHandle> started = ProcessHandle.current().descendants().filter(p -> !before.contains(p.pid())).toList();
            assertEquals(1, started.size(), "the tool started stage 0");
            external.destroyForcibly();
            long killed = System.nanoTime();
            Object[] r = run.get(60, java.util.concurrent.TimeUnit.SECONDS);
            double seconds = (System.nanoTime() - killed) / 1e9;
            assertEquals(3, r[0], (String) r[2]);
            assertTrue(seconds < 3 + 5, "ended " + seconds + " s after the stage died (recovery timeout 3 s)");
            String error = (String) r[2];
            assertTrue(error.contains("recovery gave up") && error.contains("stage1 (" + address + ") is down"), error);
            for (ProcessHandle p : started) {
                p.onExit().get(10, java.util.concurrent.TimeUnit.SECONDS);
                assertFalse(p.isAlive(), "stage process " + p.pid() + " ended with the tool");
            }
        } finally {
            external.destroyForcibly();
        }
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

    /**
     * With --json, a run that fails after some sequences finished still prints them: one sequence at a time (one
     * micro-batch of one), stage 1's process is killed once two have finished, with recovery off. Exit 3; the
     * finished sequences carry the tokens one process gives, the others end with the error naming stage 1.
     */
    @Test
    void withJsonARunThatFailsMidwayPrintsTheFinishedSequencesAndTheErrorOfTheRest() throws Exception {
        ModelSpec t = ModelSpec.tiny();
        Path model = TestModels.get(new ModelSpec(t.name(), t.dim(), t.layers(), t.heads(), t.kvHeads(), t.ffnDim(),
                t.vocabSize(), 8192, t.tied(), t.type(), t.seed(), false));
        int maxTokens = 600;
        List<String> prompts = List.of("one", "two", "three", "four");
        List<String> promptArgs = new java.util.ArrayList<>();
        for (String p : prompts) {
            promptArgs.addAll(List.of("--prompt", p));
        }
        Path hist = Files.createTempDirectory("hist");
        List<String> args = new java.util.ArrayList<>(List.of("--stages", "2", "--model", model.toString(), "--temperature", "0",
                "--max-tokens", String.valueOf(maxTokens), "--ignore-eos", "--micro-batches", "1", "--batch-size", "1",
                "--recovery-timeout", "0", "--json", "--histograms", hist.toString()));
        args.addAll(promptArgs);
        java.util.concurrent.CompletableFuture<Object[]> run = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> runCli(args.toArray(String[]::new)));

        // Stage 1 runs a frame per step; two sequences take fewer than 2 x maxTokens steps (a prompt is one frame).
        Path counters = hist.resolve("stage1-metrics" + io.tnsr.engine.metrics.CounterFile.SUFFIX);
        long frames = 0;
        long deadline = System.nanoTime() + 120_000_000_000L;
        while (frames < 2L * maxTokens + 20 && !run.isDone() && System.nanoTime() < deadline) {
            Thread.sleep(5);
            try {
                io.tnsr.engine.metrics.CounterFile.Reading r = io.tnsr.engine.metrics.CounterFile.read(counters).get("stage1-frames");
                frames = r == null ? 0 : r.value();
            } catch (java.io.IOException notYet) {
                // the stage has not created it, or not sized it yet
            }
        }
        assertFalse(run.isDone(), "the run was still going after " + frames + " frames");
        List<ProcessHandle> stage1 = ProcessHandle.current().descendants().filter(p -> commandLine(p).contains(" --stage-index 1 ")).toList();
        assertEquals(1, stage1.size(), "stage 1's process");
        stage1.get(0).destroyForcibly();

        Object[] r = run.get(120, java.util.concurrent.TimeUnit.SECONDS);
        String err = (String) r[2];
        assertEquals(3, r[0], err);
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertTrue(((String) json.get("error")).contains("stage 1"), json.get("error")::toString);
        List<?> seqs = (List<?>) json.get("sequences");
        assertEquals(prompts.size(), seqs.size());
        Object[] alone = CliRun.run(new GenerateCommand(), java.util.stream.Stream.concat(Stream.of("--model", model.toString(),
                "--temperature", "0", "--max-tokens", String.valueOf(maxTokens), "--ignore-eos", "--json"), promptArgs.stream())
                .toArray(String[]::new));
        assertEquals(0, alone[0], (String) alone[2]);
        List<?> single = (List<?>) ((Map<?, ?>) TestJson.parse(((String) alone[1]).strip())).get("sequences");
        int finished = 0;
        for (int i = 0; i < seqs.size(); i++) {
            Map<?, ?> seq = (Map<?, ?>) seqs.get(i);
            if ("error".equals(seq.get("stopped_by"))) {
                String why = (String) seq.get("error");
                assertTrue(why.startsWith("the pipeline failed") && why.contains("stage 1"), json::toString);
                int[] some = TestJson.ints(seq.get("generated_tokens"));   // what came before the failure, if anything
                int[] all = TestJson.ints(((Map<?, ?>) single.get(i)).get("generated_tokens"));
                assertArrayEquals(java.util.Arrays.copyOf(all, some.length), some, "sequence " + i + ", cut short");
            } else {
                finished++;
                assertEquals(((Map<?, ?>) single.get(i)).get("stopped_by"), seq.get("stopped_by"), json::toString);
                assertArrayEquals(TestJson.ints(((Map<?, ?>) single.get(i)).get("generated_tokens")),
                        TestJson.ints(seq.get("generated_tokens")), "sequence " + i + ", finished before the failure");
            }
        }
        assertTrue(finished >= 2 && finished < prompts.size(), finished + " of " + prompts.size() + " finished: " + json);
    }

    /** A process's whole command line (ProcessHandle.Info cuts long ones short), words joined by spaces; Linux. */
    private static String commandLine(ProcessHandle p) {
        try {
            return new String(Files.readAllBytes(Path.of("/proc", String.valueOf(p.pid()), "cmdline")),
                    java.nio.charset.StandardCharsets.UTF_8).replace('\0', ' ');
        } catch (java.io.IOException e) {
            return "";   // ended already
        }
    }
}
