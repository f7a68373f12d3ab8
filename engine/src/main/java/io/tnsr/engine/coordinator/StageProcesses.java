package io.tnsr.engine.coordinator;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.process.ChildJvm;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.stage.StageMain;
import io.tnsr.engine.util.ConsoleLog;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/**
 * Starts one JVM per stage ({@link StageMain}), wires them into a chain, and watches them.
 *
 * <p>Start-up, bounded by the start-up timeout: all stage processes start at once ({@code --once}: one session,
 * then exit); each loads its layers, binds its port, says {@code LISTENING <port>} and then {@code READY}. The
 * coordinator then connects them ({@link PipelineLinks}). A stage that says {@code FAILED <why>} or exits makes the
 * whole start fail with its reason. External stages in the config are not started, only listed.
 *
 * <p>{@link #close()} ends every process still running: politely (SIGTERM) first, then by force. A JVM
 * shutdown hook does the same if the tool itself is interrupted; each stage also exits on its own when its
 * parent process disappears.
 */
public final class StageProcesses implements Stages {
    /** A line a stage printed, or its exit; {@code generation} counts the stage's restarts. */
    private record Event(int stage, int generation, String line) {
    }

    private final PipelineConfig config;
    private final Path model;
    private final Path metricsDir;
    private final List<WaitMode> waits;
    private final List<Integer> cpus;
    private final LinkOptions link;
    private final Process[] processes;
    private final int[] ports;
    private final long[] exitNanos;   // when each process was seen to end (0 = running)
    private final int[] generation;   // restarts of each stage: events of an earlier process are ignored
    private final int[] alternative;  // which address of an external stage is in use (index into its addresses)
    private final BlockingQueue<Event> events = new LinkedBlockingQueue<>();
    private final Thread hook = new Thread(() -> {
        System.err.println("run-pipeline: interrupted; stopping the stage processes");
        destroyAll();
    }, "stage-reaper");
    private volatile boolean stopping;

    public StageProcesses(PipelineConfig config, Path model, Path metricsDir, List<WaitMode> waits, List<Integer> cpus,
                          LinkOptions link) {
        this.config = config;
        this.model = model;
        this.metricsDir = metricsDir;
        this.waits = waits;
        this.cpus = cpus;
        this.link = link;
        this.processes = new Process[config.stages().size()];
        this.ports = new int[config.stages().size()];
        this.exitNanos = new long[config.stages().size()];
        this.generation = new int[config.stages().size()];
        this.alternative = new int[config.stages().size()];
    }

    @Override
    public void start(long timeoutMillis) {
        Runtime.getRuntime().addShutdownHook(hook);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        List<StageSpec> stages = config.stages();
        int n = stages.size();
        try (StageLoading loading = StageLoading.start(model, metricsDir, stages)) {
            for (int i = 0; i < n; i++) {
                StageSpec s = stages.get(i);
                if (s.external() != null) {
                    continue;
                }
                spawn(i, s);
            }
            await("READY", deadline, (i, rest) -> { }, loading::update);
        }
    }

    /** Starts stage i's process and the threads that read its stdout and its stderr. */
    private void spawn(int i, StageSpec s) {
        List<String> cmd = command(i, s);
        try {
            Process p = new ProcessBuilder(cmd).start();
            processes[i] = p;
            int gen = generation[i];
            Thread reader = new Thread(() -> pump(i, gen, p), "stage" + i + "-stdout");
            reader.setDaemon(true);
            reader.start();
            Thread errors = new Thread(() -> copyErrors(p), "stage" + i + "-stderr");
            errors.setDaemon(true);
            errors.start();
        } catch (IOException e) {
            throw new PipelineException("cannot start stage " + i + ": " + e.getMessage(), e);
        }
    }

    @Override
    public boolean replaceable(int i) {
        return config.stages().get(i).external() == null;
    }

    @Override
    public synchronized void replace(int i, long timeoutMillis) {
        if (!replaceable(i)) {
            throw new PipelineException("stage " + i + " is external (" + config.stages().get(i).external() + "): it cannot be restarted from here");
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        Process old = processes[i];
        if (old != null && old.isAlive()) {
            old.destroyForcibly();
            try {
                old.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new PipelineException("interrupted while replacing stage " + i);
            }
        }
        generation[i]++;
        synchronized (exitNanos) {
            exitNanos[i] = 0;
        }
        spawn(i, config.stages().get(i));
        awaitOne(i, deadline);
    }

    /** Waits until the current process of stage i says READY (its LISTENING port recorded), or fails or exits. */
    private void awaitOne(int i, long deadline) {
        while (true) {
            long left = deadline - System.nanoTime();
            Event e;
            try {
                e = left <= 0 ? null : events.poll(left, TimeUnit.NANOSECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new PipelineException("interrupted while restarting stage " + i);
            }
            if (e == null) {
                throw new PipelineException("timed out waiting for the restarted stage " + i + " to be ready");
            }
            if (e.stage != i || e.generation != generation[i]) {
                continue;   // another stage's line, or the replaced process's last words
            }
            if (e.line.startsWith("LISTENING ")) {
                ports[i] = Integer.parseInt(e.line.substring("LISTENING ".length()).trim());
            } else if (e.line.startsWith("READY")) {
                return;
            } else if (e.line.startsWith("FAILED ")) {
                throw new PipelineException("the restarted stage " + i + " failed: " + e.line.substring(7));
            } else if (e.line.startsWith("EXITED ")) {
                throw new PipelineException("the restarted stage " + i + " exited with status " + e.line.substring(7));
            }
        }
    }

    private String address(int i) {
        StageSpec s = config.stages().get(i);
        return s.external() != null ? s.addresses().get(alternative[i] % s.addresses().size()) : config.host() + ":" + ports[i];
    }

    @Override
    public synchronized String nextAddress(int i) {
        if (config.stages().get(i).external() != null) {
            alternative[i]++;
        }
        return address(i);
    }

    @Override
    public List<String> addresses() {
        List<String> a = new ArrayList<>();
        for (int i = 0; i < ports.length; i++) {
            a.add(address(i));
        }
        return a;
    }

    /**
     * A stage's heap limit: 768 MiB for the runtime, plus room for the tensors that are repacked onto the heap at load
     * ({@link WeightMatrix#heapBytes}: each type's own ratio to its bytes in the file, from F32's 1.02 to Q2_K's 3.06;
     * F16 stays mapped). Sized from the whole file, an upper bound for any layer range: a limit, not memory the JVM
     * takes up front. A file that cannot be read counts its size at the largest ratio (the stage reports it itself).
     */
    static long heapMiB(Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            return 768 + (WeightMatrix.heapBytes(f) >> 20);
        } catch (RuntimeException e) { // GgufException, UncheckedIOException: not a readable GGUF file
            long fileBytes;
            try {
                fileBytes = Files.size(model);
            } catch (IOException missing) {
                fileBytes = 0;
            }
            return 768 + ((long) (fileBytes * WeightMatrix.HEAP_PER_FILE_BYTE) >> 20);
        }
    }

    private List<String> command(int i, StageSpec s) {
        List<String> cmd = ChildJvm.options(a -> a.startsWith("-Xmx") || a.startsWith("-XX:MaxDirectMemorySize"));
        cmd.add("-Xmx" + heapMiB(model) + "m");
        cmd.add("-XX:MaxDirectMemorySize=4g");
        cmd.addAll(ChildJvm.classPath());
        cmd.add(StageMain.class.getName());
        cmd.addAll(List.of("--model", model.toString(),
                "--layers", s.layerFrom() + ":" + s.layerTo(),
                "--stage-index", String.valueOf(i),
                "--stage-count", String.valueOf(config.stages().size()),
                "--listen", config.host() + ":" + s.port(),
                "--once",
                "--ring-size", String.valueOf(config.ringSize()),
                "--max-frame-bytes", String.valueOf(config.maxFrameBytes()),
                "--max-tokens-per-frame", String.valueOf(config.maxTokensPerFrame()),
                "--max-sequences-per-frame", String.valueOf(config.maxSequencesPerFrame()),
                "--wait", waits.get(i).name().toLowerCase(Locale.ROOT),
                "--cpu", String.valueOf(cpus.get(i)),
                "--threads", String.valueOf(config.threadsPerStage(Runtime.getRuntime().availableProcessors(), waits)),
                "--kv-cache-tokens", String.valueOf(config.kvCacheTokens()),
                "--kv-cache-type", config.kvCacheType().key(),
                "--metrics-dir", metricsDir.toString(),
                "--socket-buffer-bytes", String.valueOf(config.socketBufferBytes()),
                "--stall-threshold-us", String.valueOf(config.stallThresholdMicros()),
                "--warmup-ms", String.valueOf(config.warmupMillis()),
                "--parent-pid", String.valueOf(ProcessHandle.current().pid()),
                "--connect-timeout-ms", String.valueOf(link.connectMillis()),
                "--liveness-ms", String.valueOf(link.livenessMillis()),
                "--handshake-timeout-ms", String.valueOf(link.handshakeMillis())));
        if (link.keyFile() != null) {
            cmd.addAll(List.of("--key-file", link.keyFile().toString()));
        } else if (!LinkKey.isLoopback(config.host())) {
            cmd.add("--insecure");   // the coordinator refused to start without a key unless told --insecure
        }
        if (link.fingerprintCache() != null) {
            cmd.addAll(List.of("--fingerprint-cache", link.fingerprintCache().toString()));
        }
        if (!ConsoleLog.verbose()) {
            cmd.add("--quiet");
        }
        return cmd;
    }

    /**
     * A stage's stderr, line by line, to this process's ({@link ConsoleLog#show}, so that a progress bar stays whole),
     * without the JVM's incubator-module warning, which every stage would print once.
     */
    private static void copyErrors(Process p) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (!line.startsWith("WARNING: Using incubator modules")) {
                    ConsoleLog.show(line);
                }
            }
        } catch (IOException ignored) {
            // the process went away; its exit is reported by pump
        }
    }

    private void pump(int i, int gen, Process p) {
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                events.add(new Event(i, gen, line));
            }
        } catch (IOException ignored) {
            // the process went away; its exit is reported below
        }
        try {
            int status = p.waitFor();
            synchronized (exitNanos) {
                if (gen == generation[i]) {
                    exitNanos[i] = System.nanoTime();
                }
            }
            events.add(new Event(i, gen, "EXITED " + status));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private interface OnLine {
        void accept(int stage, String rest);
    }

    /** How often {@link #await} calls its tick while it waits (the loading bar's refresh). */
    private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(200);

    /**
     * Waits until every spawned stage printed {@code word}; a failure or exit of any is an error. {@code tick} runs
     * every {@link #TICK_NANOS} while nothing arrives.
     */
    private void await(String word, long deadline, OnLine onLine, Runnable tick) {
        boolean[] seen = new boolean[processes.length];
        int missing = 0;
        for (Process p : processes) {
            missing += p == null ? 0 : 1;
        }
        while (missing > 0) {
            long left = deadline - System.nanoTime();
            Event e;
            try {
                e = left <= 0 ? null : events.poll(Math.min(left, TICK_NANOS), TimeUnit.NANOSECONDS);
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new PipelineException("interrupted while starting the stages");
            }
            if (e == null && left > TICK_NANOS) {
                tick.run();
                continue;
            }
            if (e == null) {
                StringBuilder who = new StringBuilder();
                for (int i = 0; i < seen.length; i++) {
                    if (processes[i] != null && !seen[i]) {
                        who.append(who.length() == 0 ? "" : ", ").append("stage ").append(i);
                    }
                }
                throw new PipelineException("timed out waiting for " + who + " to be " + word.toLowerCase(Locale.ROOT));
            }
            if (e.line.startsWith("FAILED ")) {
                throw new PipelineException("stage " + e.stage + " failed: " + e.line.substring(7));
            }
            if (e.line.startsWith("EXITED ")) {
                throw new PipelineException("stage " + e.stage + " exited during start-up with status "
                        + e.line.substring(7) + " (see its log above)");
            }
            if (e.line.startsWith("LISTENING ")) {
                ports[e.stage] = Integer.parseInt(e.line.substring("LISTENING ".length()).trim());
            }
            if (e.line.startsWith(word) && !seen[e.stage]) {
                seen[e.stage] = true;
                missing--;
                onLine.accept(e.stage, e.line.substring(word.length()));
            }
        }
    }

    /** Null while every stage runs; otherwise every stage that ended, the first one first. */
    @Override
    public String deadStage() {
        if (stopping) {
            return null;
        }
        List<Integer> dead = new ArrayList<>();
        for (int i = 0; i < processes.length; i++) {
            if (processes[i] != null && !processes[i].isAlive()) {
                dead.add(i);
            }
        }
        if (dead.isEmpty()) {
            return null;
        }
        synchronized (exitNanos) {
            dead.sort((a, b) -> Long.compare(exitNanos[a] == 0 ? Long.MAX_VALUE : exitNanos[a],
                    exitNanos[b] == 0 ? Long.MAX_VALUE : exitNanos[b]));
        }
        StringBuilder sb = new StringBuilder();
        for (int i : dead) {
            Process p = processes[i];
            int status = p.exitValue();
            sb.append(sb.length() == 0 ? "" : "; then ").append("stage ").append(i).append(" (pid ").append(p.pid())
                    .append(status > 128 ? ") was killed by signal " + (status - 128) : ") exited with status " + status);
        }
        return sb.toString();
    }

    /** The process of stage i (null for an external stage). */
    public Process process(int i) {
        return processes[i];
    }

    @Override
    public boolean awaitExit(long timeoutMillis) {
        stopping = true;
        return waitAll(timeoutMillis);
    }

    /** Waits up to the timeout for every process to end; true if they all did. */
    private boolean waitAll(long timeoutMillis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        try {
            for (Process p : processes) {
                long left = deadline - System.nanoTime();
                if (p != null && (left <= 0 || !p.waitFor(left, TimeUnit.NANOSECONDS))) {
                    return false;
                }
            }
            return true;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * SIGTERM to every stage still running (each flushes its metrics), then SIGKILL after 3 s; a stopped process
     * (SIGSTOP: it cannot act on SIGTERM) is killed at once.
     */
    private void destroyAll() {
        stopping = true;
        for (Process p : processes) {
            if (p != null && p.isAlive()) {
                if (stopped(p.pid())) {
                    p.destroyForcibly();
                } else {
                    p.destroy();
                }
            }
        }
        if (!waitAll(3000)) {
            for (Process p : processes) {
                if (p != null) {
                    p.destroyForcibly();
                }
            }
        }
    }

    /** Whether the process is stopped (state T in /proc; false where there is no /proc). */
    private static boolean stopped(long pid) {
        try {
            String stat = Files.readString(Path.of("/proc", String.valueOf(pid), "stat"));
            int end = stat.lastIndexOf(')');
            return end > 0 && end + 2 < stat.length() && stat.charAt(end + 2) == 'T';
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    @Override
    public void close() {
        destroyAll();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException ignored) {
            // already shutting down
        }
    }
}
