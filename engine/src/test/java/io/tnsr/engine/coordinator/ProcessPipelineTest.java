package io.tnsr.engine.coordinator;

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
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Real stage processes (one JVM each), as run-pipeline starts them. */
@Timeout(180)
class ProcessPipelineTest {

    @Test
    void withoutRecoveryAStageKilledMidRunEndsTheRunWithAClearErrorAndNoProcessLeft() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 3);
        Path dir = Files.createTempDirectory("killed");
        PipelineRun.Settings s = settings(h.pipeline, model, dir, 10_000).withRecovery(RecoveryOptions.off());
        StageProcesses procs = new StageProcesses(h.pipeline, model, dir, s.waits(), s.cpus(), s.link());
        Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
        List<SequenceState> seqs = h.sequences(List.of("one", "two", "three"), 200, sampler);
        AtomicInteger tokens = new AtomicInteger();
        long t0 = System.nanoTime();
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineRun.run(procs, s, h.cfg, seqs,
                (seq, t) -> {
                    if (tokens.incrementAndGet() == 20) {
                        procs.process(1).destroyForcibly();
                    }
                }));
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertTrue(e.getMessage().contains("stage 1"), e.getMessage());
        assertTrue(seconds < 30, "ended in " + seconds + " s");
        for (int i = 0; i < 3; i++) {
            Process p = procs.process(i);
            assertFalse(p.isAlive(), "stage " + i + " still running");
        }
    }

    @Test
    void aStageKilledOrStoppedMidRunIsRestartedAndEverySequenceGivesTheTokensOfOneProcess() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 3);
        List<String> prompts = List.of("one", "two", "three", "four");
        List<SequenceState> alone = h.runSingle(prompts, 120, SamplingConfig.GREEDY);
        for (String signal : List.of("KILL", "STOP")) {
            Path dir = Files.createTempDirectory("recovered");
            PipelineRun.Settings s = settings(h.pipeline, model, dir, 10_000);
            StageProcesses procs = new StageProcesses(h.pipeline, model, dir, s.waits(), s.cpus(), s.link());
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
            List<SequenceState> seqs = h.sequences(prompts, 120, sampler);
            AtomicInteger tokens = new AtomicInteger();
            long[] lostPid = new long[1];
            PipelineRun.Outcome o = PipelineRun.run(procs, s, h.cfg, seqs, (seq, t) -> {
                if (tokens.incrementAndGet() == 40) {
                    lostPid[0] = procs.process(1).pid();
                    signal(signal, lostPid[0]);
                }
            });
            for (int i = 0; i < prompts.size(); i++) {
                assertArrayEquals(alone.get(i).generatedTokens(), seqs.get(i).generatedTokens(), signal + ": \"" + prompts.get(i) + "\"");
            }
            assertEquals(1, o.recoveries().size(), signal);
            assertEquals(List.of(1), o.recoveries().get(0).replaced(), signal);
            assertFalse(ProcessHandle.of(lostPid[0]).map(ProcessHandle::isAlive).orElse(false), signal + ": the lost process is gone");
            for (int i = 0; i < 3; i++) {
                assertFalse(procs.process(i).isAlive(), signal + ": stage " + i + " still running");
            }
        }
    }

    @Test
    void withoutRecoveryAStoppedStageIsReportedWithinTheLivenessBoundNamingItAndItsLink() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 3);
        Path dir = Files.createTempDirectory("stopped");
        PipelineRun.Settings s = settings(h.pipeline, model, dir, 10_000).withRecovery(RecoveryOptions.off());
        StageProcesses procs = new StageProcesses(h.pipeline, model, dir, s.waits(), s.cpus(), s.link());
        Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
        List<SequenceState> seqs = h.sequences(List.of("one", "two", "three"), 200, sampler);
        AtomicInteger tokens = new AtomicInteger();
        long[] stoppedAt = new long[1];
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineRun.run(procs, s, h.cfg, seqs,
                (seq, t) -> {
                    if (tokens.incrementAndGet() == 20) {
                        stoppedAt[0] = System.nanoTime();
                        signal("STOP", procs.process(1).pid());
                    }
                }));
        double seconds = (System.nanoTime() - stoppedAt[0]) / 1e9;
        assertTrue(e.getMessage().contains("no frame or heartbeat from stage1") && e.getMessage().contains("link stage1->stage2"),
                e.getMessage());
        double bound = s.link().livenessMillis() / 1000.0;
        assertTrue(seconds < bound + 2, "reported " + seconds + " s after SIGSTOP (bound " + bound + " s)");
        for (int i = 0; i < 3; i++) {
            assertFalse(procs.process(i).isAlive(), "stage " + i + " still running");
        }
    }

    private static void signal(String sig, long pid) {
        try {
            new ProcessBuilder("kill", "-" + sig, String.valueOf(pid)).start().waitFor(5, java.util.concurrent.TimeUnit.SECONDS);
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    @Test
    void anExternalStageThatNeverComesBackEndsTheRunWithinTheRecoveryTimeoutNamingIt() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 2);
        Path dir = Files.createTempDirectory("never");
        List<String> cmd = new java.util.ArrayList<>(io.tnsr.engine.process.ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx256m");
        cmd.addAll(io.tnsr.engine.process.ChildJvm.classPath());
        cmd.addAll(List.of(io.tnsr.engine.stage.StageMain.class.getName(), "--model", model.toString(), "--layers", "2:4"));
        Process external = new ProcessBuilder(cmd).redirectError(dir.resolve("external.log").toFile()).start();
        try {
            java.io.BufferedReader out = new java.io.BufferedReader(new java.io.InputStreamReader(external.getInputStream()));
            String listening = out.readLine();
            assertTrue(listening != null && listening.startsWith("LISTENING "), listening);
            String address = "127.0.0.1:" + listening.substring("LISTENING ".length()).trim();
            PipelineConfig pc = new PipelineConfig("127.0.0.1", List.of(new StageSpec(0, 2, 0, List.of(), null),
                    new StageSpec(2, 4, 0, List.of(), address)), 16, h.pipeline.maxFrameBytes(), h.pipeline.maxTokensPerFrame(),
                    h.pipeline.maxSequencesPerFrame(), WaitMode.BLOCK, 0, 0);
            PipelineRun.Settings s = settings(pc, model, dir, 10_000).withRecovery(new RecoveryOptions(3000, 3, 1000));
            StageProcesses procs = new StageProcesses(pc, model, dir, s.waits(), s.cpus(), s.link());
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
            List<SequenceState> seqs = h.sequences(List.of("one", "two"), 200, sampler);
            AtomicInteger tokens = new AtomicInteger();
            long[] killed = new long[1];
            PipelineException e = assertThrows(PipelineException.class, () -> PipelineRun.run(procs, s, h.cfg, seqs, (seq, t) -> {
                if (tokens.incrementAndGet() == 20) {
                    killed[0] = System.nanoTime();
                    external.destroyForcibly();
                }
            }));
            double seconds = (System.nanoTime() - killed[0]) / 1e9;
            assertTrue(e.getMessage().contains("recovery gave up") && e.getMessage().contains("stage1 (" + address + ") is down"),
                    e.getMessage());
            assertTrue(seconds < 3 + 5, "gave up " + seconds + " s after the stage died (recovery timeout 3 s)");
            assertFalse(procs.process(0).isAlive(), "the stage this side started is gone");
        } finally {
            external.destroyForcibly();
        }
    }

    @Test
    void aLostExternalStageIsReplacedByTheAlternativeTheConfigNames() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 2);
        List<String> prompts = List.of("one", "two", "three");
        List<SequenceState> alone = h.runSingle(prompts, 150, SamplingConfig.GREEDY);
        Path dir = Files.createTempDirectory("alternative");
        List<Process> externals = new java.util.ArrayList<>();
        try {
            List<String> addresses = new java.util.ArrayList<>();
            for (int k = 0; k < 2; k++) {
                List<String> cmd = new java.util.ArrayList<>(io.tnsr.engine.process.ChildJvm.options(a -> a.startsWith("-Xmx")));
                cmd.add("-Xmx256m");
                cmd.addAll(io.tnsr.engine.process.ChildJvm.classPath());
                cmd.addAll(List.of(io.tnsr.engine.stage.StageMain.class.getName(), "--model", model.toString(), "--layers", "2:4"));
                Process p = new ProcessBuilder(cmd).redirectError(dir.resolve("external" + k + ".log").toFile()).start();
                externals.add(p);
                String listening = new java.io.BufferedReader(new java.io.InputStreamReader(p.getInputStream())).readLine();
                assertTrue(listening != null && listening.startsWith("LISTENING "), listening);
                addresses.add("127.0.0.1:" + listening.substring("LISTENING ".length()).trim());
            }
            PipelineConfig pc = new PipelineConfig("127.0.0.1", List.of(new StageSpec(0, 2, 0, List.of(), null),
                    new StageSpec(2, 4, 0, List.of(), addresses.get(0), List.of(addresses.get(1)))), 16, h.pipeline.maxFrameBytes(),
                    h.pipeline.maxTokensPerFrame(), h.pipeline.maxSequencesPerFrame(), WaitMode.BLOCK, 0, 0);
            PipelineRun.Settings s = settings(pc, model, dir, 10_000);
            StageProcesses procs = new StageProcesses(pc, model, dir, s.waits(), s.cpus(), s.link());
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
            List<SequenceState> seqs = h.sequences(prompts, 150, sampler);
            AtomicInteger tokens = new AtomicInteger();
            PipelineRun.Outcome o = PipelineRun.run(procs, s, h.cfg, seqs, (seq, t) -> {
                if (tokens.incrementAndGet() == 30) {
                    externals.get(0).destroyForcibly();
                }
            });
            for (int i = 0; i < prompts.size(); i++) {
                assertArrayEquals(alone.get(i).generatedTokens(), seqs.get(i).generatedTokens(), prompts.get(i));
            }
            assertEquals(1, o.recoveries().size());
            assertEquals(List.of(), o.recoveries().get(0).replaced(), "nothing restarted: the alternative took over");
        } finally {
            for (Process p : externals) {
                p.destroyForcibly();
            }
        }
    }

    @Test
    void anUnreachableStageIsAClearErrorWithinTheConnectTimeout() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        int freePort;
        try (ServerSocket ss = new ServerSocket(0)) {
            freePort = ss.getLocalPort();
        }
        PipelineConfig pc = PipelineConfig.defaults(4, 2, WaitMode.BLOCK)
                .withStages(List.of(new StageSpec(0, 2, 0, List.of(), null), new StageSpec(2, 4, 0, List.of(), "127.0.0.1:" + freePort)));
        PipelineHarness h = new PipelineHarness(model, 2);
        Sampler sampler = new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize());
        long t0 = System.nanoTime();
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineRun.run(
                settings(pc, model, Files.createTempDirectory("unreach"), 2_000), h.cfg,
                h.sequences(List.of("x"), 5, sampler), (Generator.Listener) (seq, t) -> { }));
        assertTrue(e.getMessage().contains("cannot connect to 127.0.0.1:" + freePort), e.getMessage());
        assertTrue((System.nanoTime() - t0) / 1e9 < 30);
    }

    @Test
    void aStagesHeapLeavesRoomForTheModelsRepackedQuantizedTensors(@org.junit.jupiter.api.io.TempDir Path dir) throws Exception {
        Path model = dir.resolve("m.gguf");
        Files.write(model, new byte[8 << 20]);
        assertEquals(768 + 25, StageProcesses.heapMiB(model), "not a GGUF file: 768 MiB + 3.125 x its 8 MiB");
        assertEquals(768, StageProcesses.heapMiB(dir.resolve("missing.gguf")), "the stage reports a missing file itself");
        // a real file: each tensor at its type's ratio, plus the largest one's repack
        Path q2k = SharedData.path("models/quantized/q256-q2_k.gguf");
        long expected;
        try (io.tnsr.engine.gguf.GgufFile f = io.tnsr.engine.gguf.GgufFile.open(q2k)) {
            double sum = 0;
            double largest = 0;
            for (io.tnsr.engine.gguf.GgufTensorInfo t : f.tensors().values()) {
                double b = t.byteSize() * io.tnsr.engine.model.WeightMatrix.heapPerFileByte(t.type());
                sum += b;
                largest = Math.max(largest, b);
            }
            expected = 768 + ((long) (sum + largest) >> 20);
            assertTrue(sum > 2.5 * f.tensors().values().stream().filter(t -> t.type() != io.tnsr.engine.gguf.GgmlType.F32)
                    .mapToLong(io.tnsr.engine.gguf.GgufTensorInfo::byteSize).sum(), "Q2_K and Q3_K tensors take ~3x their bytes");
        }
        assertEquals(expected, StageProcesses.heapMiB(q2k));
        Path f16 = SharedData.path("models/stories260K.gguf");
        assertTrue(StageProcesses.heapMiB(f16) < 768 + 2 * (Files.size(f16) >> 20) + 1, "an F32 file: about its size");
    }

    private static PipelineRun.Settings settings(PipelineConfig pc, Path model, Path dir, long connectMs) {
        int n = pc.stages().size();
        return new PipelineRun.Settings(model, pc, Collections.nCopies(n, WaitMode.BLOCK), Collections.nCopies(n, -1),
                new Coordinator.Options(2, 0, pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(), pc.maxFrameBytes()),
                dir, 60_000, 20_000, connectMs, 0);
    }
}
