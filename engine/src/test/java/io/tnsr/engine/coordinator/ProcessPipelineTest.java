package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
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

    /**
     * A stage busy on one frame for over twice the liveness bound, but heartbeating meanwhile, is slow, not hung:
     * nothing reports its link, its downstream logs it as alive but slow, and every sequence ends with the tokens
     * of one process. Stage1's compute thread alone is held in its layers ({@link PausedStage}); its other threads,
     * the liveness thread among them, run on. Recovery is off, so a false report would fail the run.
     */
    @Test
    void aStageBusyOnOneFrameLongerThanTheLivenessBoundButHeartbeatingIsNotReportedAndTheRunCompletes() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 3);
        List<String> prompts = List.of("one", "two", "three");
        List<SequenceState> alone = h.runSingle(prompts, 120, SamplingConfig.GREEDY);
        Path dir = Files.createTempDirectory("slow");
        try (PausedStage slow = PausedStage.start(model, dir, false)) {
            PipelineRun.Settings s = slow.settings(h);
            StageProcesses procs = new StageProcesses(s.config(), model, dir, s.waits(), s.cpus(), s.link());
            List<SequenceState> seqs = h.sequences(prompts, 120, new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize()));
            PipelineRun.Outcome o = PipelineRun.run(procs, s, h.cfg, seqs, (seq, t) -> slow.tokens.incrementAndGet());

            long held = slow.heldMillis();
            assertTrue(held >= PausedStage.HOLD_MILLIS, "stage1 was held in one frame for " + held + " ms");
            assertTrue(slow.tokensAtPause.get() > 0 && slow.tokensAtPause.get() < slow.tokens.get(),
                    "held mid-run: " + slow.tokensAtPause.get() + " of " + slow.tokens.get() + " tokens before");
            for (int i = 0; i < prompts.size(); i++) {
                assertArrayEquals(alone.get(i).generatedTokens(), seqs.get(i).generatedTokens(), "\"" + prompts.get(i) + "\"");
            }
            assertEquals(List.of(), o.recoveries());
            String downstreamLog = slow.downstreamLog();
            assertTrue(downstreamLog.contains("stage1 (") && downstreamLog.contains("is alive but slow"), downstreamLog);
            assertFalse(downstreamLog.contains("is hung or the link is down"), downstreamLog);
            // A slow frame is logged at most once per liveness bound while it lasts, and not again once stage1's frames
            // flow (its lines end "(N frames done)", N the frames stage1 had finished before it).
            Map<String, Long> linesPerFrame = downstreamLog.lines().filter(l -> l.contains("is alive but slow"))
                    .collect(java.util.stream.Collectors.groupingBy(l -> l.substring(l.lastIndexOf('(')),
                            java.util.stream.Collectors.counting()));
            assertTrue(linesPerFrame.values().stream().allMatch(k -> k <= PausedStage.HOLD_MILLIS / PausedStage.LIVENESS_MILLIS),
                    linesPerFrame + "\n" + downstreamLog);
        }
    }

    /**
     * The contrast to the slow stage above: the same stage held at the same point with every thread stopped, so that
     * no heartbeat leaves it, is reported within the liveness bound, naming it and its link.
     */
    @Test
    void aStageHeldInOneFrameWithEveryThreadStoppedIsReportedWithinTheLivenessBoundNamingItAndItsLink() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        PipelineHarness h = new PipelineHarness(model, 3);
        Path dir = Files.createTempDirectory("hung");
        try (PausedStage hung = PausedStage.start(model, dir, true)) {
            PipelineRun.Settings s = hung.settings(h);
            StageProcesses procs = new StageProcesses(s.config(), model, dir, s.waits(), s.cpus(), s.link());
            List<SequenceState> seqs = h.sequences(List.of("one", "two", "three"), 120,
                    new Sampler(SamplingConfig.GREEDY, h.cfg.vocabSize()));
            PipelineException e = assertThrows(PipelineException.class, () -> PipelineRun.run(procs, s, h.cfg, seqs, (seq, t) -> { }));
            assertTrue(hung.pausedAtNanos() != 0, "stage1 was held");
            double seconds = (System.nanoTime() - hung.pausedAtNanos()) / 1e9;
            assertTrue(e.getMessage().contains("no frame or heartbeat from stage1") && e.getMessage().contains("link stage1->stage2"),
                    e.getMessage());
            double bound = PausedStage.LIVENESS_MILLIS / 1000.0;
            assertTrue(seconds < bound + 2, "reported " + seconds + " s after stage1 stopped (bound " + bound + " s)");
        }
    }

    /**
     * Stages 1 and 2 of a three-stage pipeline of the tiny model (layers [1, 3) and [3, 4)), started here as external
     * stages with a liveness bound of {@value #LIVENESS_MILLIS} ms; stage1 runs under the JDWP agent. Through the
     * debugger interface its {@code LayerRange.forward} gets a one-off breakpoint at the {@value #HOLD_AT_FRAME}th
     * frame, which holds either the compute thread alone (a slow step: the liveness thread heartbeats on) or every
     * thread (a hung process, as SIGSTOP) for {@value #HOLD_MILLIS} ms. Stage0 is the run's own stage process.
     */
    private static final class PausedStage implements AutoCloseable {
        static final long LIVENESS_MILLIS = 1500;
        static final long HOLD_MILLIS = 2 * LIVENESS_MILLIS + 1000;
        static final int HOLD_AT_FRAME = 40;

        private final Path dir;
        private final List<Process> processes = new java.util.ArrayList<>();
        private final List<String> addresses = new java.util.ArrayList<>();
        private com.sun.jdi.VirtualMachine vm;
        private Thread holder;
        /** The run's tokens so far (its listener counts them), and how many there were when stage1 was held. */
        final AtomicInteger tokens = new AtomicInteger();
        final AtomicInteger tokensAtPause = new AtomicInteger(-1);
        private final java.util.concurrent.atomic.AtomicLong pausedAt = new java.util.concurrent.atomic.AtomicLong();
        private final java.util.concurrent.atomic.AtomicLong held = new java.util.concurrent.atomic.AtomicLong();

        private PausedStage(Path dir) {
            this.dir = dir;
        }

        static PausedStage start(Path model, Path dir, boolean everyThread) throws Exception {
            PausedStage p = new PausedStage(dir);
            try {
                int jdwp = p.startStage(model, 1, "1:3", true);
                p.startStage(model, 2, "3:4", false);
                p.hold(jdwp, everyThread);
                return p;
            } catch (Exception | Error e) {
                p.close();
                throw e;
            }
        }

        /** Starts stage {@code index} holding {@code layers}; returns its JDWP port when debuggable, else -1. */
        private int startStage(Path model, int index, String layers, boolean debuggable) throws IOException {
            List<String> cmd = new java.util.ArrayList<>(io.tnsr.engine.process.ChildJvm.options(a -> a.startsWith("-Xmx")));
            cmd.add("-Xmx256m");
            if (debuggable) {
                cmd.add("-agentlib:jdwp=transport=dt_socket,server=y,suspend=n,address=127.0.0.1:0");
            }
            cmd.addAll(io.tnsr.engine.process.ChildJvm.classPath());
            cmd.addAll(List.of(io.tnsr.engine.stage.StageMain.class.getName(), "--model", model.toString(), "--layers", layers,
                    "--stage-index", String.valueOf(index), "--stage-count", "3", "--liveness-ms", String.valueOf(LIVENESS_MILLIS),
                    "--parent-pid", String.valueOf(ProcessHandle.current().pid())));
            Process proc = new ProcessBuilder(cmd).redirectError(dir.resolve("stage" + index + ".log").toFile()).start();
            processes.add(proc);
            java.io.BufferedReader out = new java.io.BufferedReader(new java.io.InputStreamReader(proc.getInputStream()));
            int jdwp = -1;
            for (String line; (line = out.readLine()) != null; ) {   // bounded by the test's timeout; the stage exits on failure
                if (line.startsWith("Listening for transport dt_socket at address: ")) {
                    jdwp = Integer.parseInt(line.substring(line.lastIndexOf(' ') + 1).trim());
                } else if (line.startsWith("LISTENING ")) {
                    addresses.add("127.0.0.1:" + line.substring("LISTENING ".length()).trim());
                    return jdwp;
                }
            }
            throw new IllegalStateException("stage" + index + " ended before listening; its log: " + dir.resolve("stage" + index + ".log"));
        }

        /** Attaches to stage1 and arms the breakpoint; a thread holds the stage when it is hit, then lets it go. */
        private void hold(int jdwpPort, boolean everyThread) throws Exception {
            com.sun.jdi.connect.AttachingConnector socket = com.sun.jdi.Bootstrap.virtualMachineManager().attachingConnectors().stream()
                    .filter(c -> c.transport().name().equals("dt_socket")).findFirst().orElseThrow();
            Map<String, com.sun.jdi.connect.Connector.Argument> args = socket.defaultArguments();
            args.get("hostname").setValue("127.0.0.1");
            args.get("port").setValue(String.valueOf(jdwpPort));
            args.get("timeout").setValue("10000");
            vm = socket.attach(args);
            com.sun.jdi.ReferenceType range = vm.classesByName(io.tnsr.engine.forward.LayerRange.class.getName()).get(0);
            com.sun.jdi.Method forward = range.methodsByName("forward").get(0);
            com.sun.jdi.request.BreakpointRequest bp = vm.eventRequestManager().createBreakpointRequest(forward.location());
            bp.setSuspendPolicy(everyThread ? com.sun.jdi.request.EventRequest.SUSPEND_ALL
                    : com.sun.jdi.request.EventRequest.SUSPEND_EVENT_THREAD);
            bp.addCountFilter(HOLD_AT_FRAME);
            bp.enable();
            holder = new Thread(() -> {
                try {
                    long deadline = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(120);
                    while (System.nanoTime() < deadline) {
                        com.sun.jdi.event.EventSet events = vm.eventQueue().remove(200);
                        if (events == null) {
                            continue;
                        }
                        boolean hit = false;
                        for (com.sun.jdi.event.Event ev : events) {
                            hit |= ev instanceof com.sun.jdi.event.BreakpointEvent;
                        }
                        if (hit) {
                            long t0 = System.nanoTime();
                            pausedAt.set(t0);
                            tokensAtPause.set(tokens.get());
                            Thread.sleep(HOLD_MILLIS);
                            held.set((System.nanoTime() - t0) / 1_000_000);
                        }
                        events.resume();
                        if (hit) {
                            return;
                        }
                    }
                } catch (InterruptedException | com.sun.jdi.VMDisconnectedException e) {
                    // the test ended, or stage1 did
                }
            }, "stage1-holder");
            holder.setDaemon(true);
            holder.start();
        }

        /** The run's settings: stage0 started by the run, stages 1 and 2 these; recovery off; the short liveness bound. */
        PipelineRun.Settings settings(PipelineHarness h) {
            PipelineConfig pc = new PipelineConfig("127.0.0.1", List.of(new StageSpec(0, 1, 0, List.of(), null),
                    new StageSpec(1, 3, 0, List.of(), addresses.get(0)), new StageSpec(3, 4, 0, List.of(), addresses.get(1))), 16,
                    h.pipeline.maxFrameBytes(), h.pipeline.maxTokensPerFrame(), h.pipeline.maxSequencesPerFrame(), WaitMode.BLOCK, 0, 0);
            return new PipelineRun.Settings(h.model, pc, Collections.nCopies(3, WaitMode.BLOCK), Collections.nCopies(3, -1),
                    new Coordinator.Options(2, 0, pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(), pc.maxFrameBytes()), dir,
                    60_000, 20_000, 10_000, 0, new LinkOptions(LinkKey.NONE, LIVENESS_MILLIS, LinkOptions.DEFAULT_HANDSHAKE_MILLIS,
                    10_000, null), RecoveryOptions.off());
        }

        /** How long stage1 was held, in ms, once the hold is over (0: it never was). */
        long heldMillis() throws InterruptedException {
            holder.join(HOLD_MILLIS + 5000);
            return held.get();
        }

        long pausedAtNanos() {
            return pausedAt.get();
        }

        /** Stage2's log (stderr) so far. */
        String downstreamLog() throws IOException {
            return Files.readString(dir.resolve("stage2.log"));
        }

        @Override
        public void close() {
            if (holder != null) {
                holder.interrupt();
            }
            if (vm != null) {
                try {
                    vm.dispose();   // lets every held thread go
                } catch (com.sun.jdi.VMDisconnectedException ignored) {
                    // stage1 is gone already
                }
            }
            for (Process p : processes) {
                p.destroyForcibly();
            }
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
        assertEquals(768 + 20, StageProcesses.heapMiB(model), "not a GGUF file: 768 MiB + 2.5 x its 8 MiB");
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
            assertTrue(sum > 1.5 * f.tensors().values().stream().filter(t -> t.type() != io.tnsr.engine.gguf.GgmlType.F32)
                    .mapToLong(io.tnsr.engine.gguf.GgufTensorInfo::byteSize).sum(), "Q2_K and Q3_K tensors take 1.5-2x their bytes");
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
