package io.tnsr.engine.coordinator;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.gguf.ModelFingerprint;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.metrics.Correction;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.metrics.LatencySummary;
import io.tnsr.engine.metrics.MetricsLog;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.util.ConsoleLog;
import io.tnsr.engine.util.Jackson;
import io.tnsr.wire.FrameChannel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiFunction;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * One run of a pipeline: start the stage processes, connect, generate, shut down, collect the metrics.
 *
 * <p>Metrics: every process writes its interval logs into {@code runDir}; this class adds the run facts
 * ({@code run.json}: loop mode, rate, hosts, stall threshold) at the start and, once every process has closed
 * its logs, reads them back once ({@link LatencySummary}) and exports {@code <metric>.hgrm} and
 * {@code summary.json} from that same reading.
 * A lost stage (dead, hung past the liveness bound, or cut off) is replaced and the running sequences replayed
 * ({@link PipelineRecovery}, {@link Coordinator.Recovery}) unless recovery is off; the watchdog stands aside while a
 * recovery runs. Every wait is bounded: start-up by {@code startupTimeoutMillis}, each answer from the pipeline by
 * {@code stallTimeoutMillis} (a watchdog closes the connections when a stage dies or stops answering, which
 * ends the coordinator's blocking read), and the final exits by a few seconds before processes are killed.
 */
public final class PipelineRun {

    /**
     * How to run. {@code runDir} receives every metric log (and stays when it is the user's --histograms dir);
     * {@code decodeWarmupTokens} decode tokens are left out of the decode rate (benchmarks: the stages' JIT warm-up).
     */
    public record Settings(Path model, PipelineConfig config, List<WaitMode> waits, List<Integer> cpus,
                           Coordinator.Options coordinator, Path runDir, long startupTimeoutMillis,
                           long stallTimeoutMillis, long connectTimeoutMillis, int decodeWarmupTokens, LinkOptions link,
                           RecoveryOptions recovery) {
        /** Without a key, with the default liveness and handshake bounds, and recovery. */
        public Settings(Path model, PipelineConfig config, List<WaitMode> waits, List<Integer> cpus,
                        Coordinator.Options coordinator, Path runDir, long startupTimeoutMillis,
                        long stallTimeoutMillis, long connectTimeoutMillis, int decodeWarmupTokens) {
            this(model, config, waits, cpus, coordinator, runDir, startupTimeoutMillis, stallTimeoutMillis, connectTimeoutMillis,
                    decodeWarmupTokens, new LinkOptions(LinkKey.NONE, LinkOptions.DEFAULT_LIVENESS_MILLIS,
                            LinkOptions.DEFAULT_HANDSHAKE_MILLIS, Math.max(1, connectTimeoutMillis), null), RecoveryOptions.defaults());
        }

        /** These settings with other recovery options. */
        public Settings withRecovery(RecoveryOptions r) {
            return new Settings(model, config, waits, cpus, coordinator, runDir, startupTimeoutMillis, stallTimeoutMillis,
                    connectTimeoutMillis, decodeWarmupTokens, link, r);
        }
    }

    /** What happened. */
    public record Outcome(Coordinator.Result result, LatencySummary latency, double[] computeShare, long[] stalls,
                          List<PipelineRecovery.Done> recoveries) {
    }

    /** How often the watchdog looks at the stages and the coordinator's progress. */
    private static final long WATCH_PERIOD_MILLIS = 100;

    private PipelineRun() {
    }

    /** Runs with one JVM per stage. */
    public static Outcome run(Settings s, LlamaConfig model, List<SequenceState> seqs,
                              Generator.Listener listener) {
        return run(new StageProcesses(s.config(), s.model(), s.runDir(), s.waits(), s.cpus(), s.link()), s, model, seqs, listener);
    }

    /** Runs with the given stages (processes, or threads for tests); closes them. */
    public static Outcome run(Stages stages, Settings s, LlamaConfig model, List<SequenceState> seqs,
                              Generator.Listener listener) {
        return drive(stages, s, model, seqs.size(), true, listener, PipelineRun::printStatus, (c, admission) -> {
            c.setDecodeWarmupTokens(s.decodeWarmupTokens());
            Coordinator.Result result = c.run(seqs);
            for (SequenceState q : seqs) {   // this thread ran the coordinator: still the metrics' one writer
                if (q.admittedNanos() != 0) {
                    admission.record(q.admittedNanos() - q.intendedStartNanos());
                }
            }
            return result;
        });
    }

    /**
     * Serves with the given stages: once the pipeline is up, {@code onReady} gets the scheduler that sequences are
     * submitted to (and cancelled through), from any thread, while this thread drives the pipeline; returns after
     * {@code stopWhenIdle} said so with nothing waiting or running, the stages shut down and closed.
     */
    public static Outcome serve(Stages stages, Settings s, LlamaConfig model, Scheduler.Limits limits, Generator.Listener listener,
                                Consumer<Scheduler> onReady, BooleanSupplier stopWhenIdle) {
        return serve(stages, s, model, limits, listener, onReady, stopWhenIdle, PipelineRun::printStatus);
    }

    /**
     * As {@link #serve(Stages, Settings, LlamaConfig, Scheduler.Limits, Generator.Listener, Consumer, BooleanSupplier)},
     * telling {@code status} what a recovery is doing ("recovering: stage1 (...) is down: ...", null once recovered).
     */
    public static Outcome serve(Stages stages, Settings s, LlamaConfig model, Scheduler.Limits limits, Generator.Listener listener,
                                Consumer<Scheduler> onReady, BooleanSupplier stopWhenIdle, Consumer<String> status) {
        return drive(stages, s, model, 0, false, listener, status, (c, admission) -> {
            long start = System.nanoTime();
            Scheduler scheduler = c.newScheduler(limits);
            onReady.accept(scheduler);
            c.serve(scheduler, stopWhenIdle);
            long end = System.nanoTime();
            long decodeStart = scheduler.decodeStartNanos() == 0 ? end : scheduler.decodeStartNanos();
            return new Coordinator.Result(scheduler.chosenTokens(), end - start, scheduler.steps(), scheduler.decodeTokens(),
                    end - decodeStart);
        });
    }

    /**
     * Starts the stages, connects, lets {@code driver} use the coordinator (with the admission-delay metric to record
     * into), shuts the pipeline down and collects the metrics. A configuration whose frames for this model exceed
     * {@code max_frame_bytes} is refused ({@link PipelineConfig#checkFrames}) before any stage starts. The line "N stages
     * ready in T s" goes to stderr when {@code announceReady} (a server says it its own way, then the line is routine).
     */
    private static Outcome drive(Stages stages, Settings s, LlamaConfig model, int sequences, boolean announceReady,
                                 Generator.Listener listener,
                                 Consumer<String> status, BiFunction<Coordinator, LatencyMetric, Coordinator.Result> driver) {
        PipelineConfig cfg = s.config();
        int n = cfg.stages().size();
        String last = "stage" + (n - 1);
        writeRunFacts(s, sequences);
        Correction fromStart = s.coordinator().openLoop()
                ? Correction.fromIntendedStart(String.format(Locale.ROOT, "each sequence's scheduled arrival (open loop at %s/s: start + k/rate)",
                        java.math.BigDecimal.valueOf(s.coordinator().ratePerSecond()).stripTrailingZeros().toPlainString()))
                : Correction.fromIntendedStart("the run start (closed loop: every sequence submitted at once, so waiting for a micro-batch counts)");
        MetricsLog log = new MetricsLog(s.runDir(), 1000, "coordinator-metrics");
        Coordinator.Metrics metrics = new Coordinator.Metrics(
                log.addBucketed(new LatencyMetric("hop-" + last + "-coordinator", "one-way hop: written by " + last + " to decoded by the coordinator")),
                log.add(new LatencyMetric("coordinator-step", "micro-batch step round trip: frame sent to stage 0 until its logits are back")),
                log.add(new LatencyMetric("ttft", "time to first token, per sequence, from its intended start", fromStart)),
                log.add(new LatencyMetric("tpot", "time per output token after the first, per sequence",
                        Correction.uncorrected("per sequence (request - ttft) / (tokens - 1): its pace once running, whenever it was admitted"))),
                log.add(new LatencyMetric("request", "whole-request latency, per sequence, from its intended start", fromStart)));
        LatencyMetric admission = log.add(new LatencyMetric("admission-delay",
                "per sequence, intended start to joining a micro-batch (how far behind the pipeline was)", fromStart));
        AtomicReference<String> broken = new AtomicReference<>();
        PipelineRecovery recovery = null;
        Coordinator.Result result;
        try (Stages procs = stages) {
            cfg.checkFrames(model);
            ModelFingerprint fingerprint = s.link().fingerprintCache() != null
                    ? ModelFingerprint.of(s.model(), s.link().fingerprintCache()) : ModelFingerprint.of(s.model());
            long started = System.nanoTime();
            procs.start(s.startupTimeoutMillis());
            long linking = System.nanoTime();
            PipelineLinks.Links links = PipelineLinks.open(procs.addresses(), cfg, model, fingerprint.bytes(), s.link(),
                    s.startupTimeoutMillis());
            long now = System.nanoTime();
            String ready = String.format(Locale.ROOT, "pipeline: %d stage%s ready in %.1f s", n, n == 1 ? "" : "s",
                    (now - started) / 1e9);
            if (ConsoleLog.verbose()) {
                ready += String.format(Locale.ROOT, " (model fingerprint %s %s %.2f s; links verified in %.0f ms)",
                        fingerprint.shortHex(), fingerprint.cached() ? "cached," : "computed in",
                        fingerprint.computeNanos() / 1e9, (now - linking) / 1e6);
            }
            if (announceReady) {
                ConsoleLog.show(ready);
            } else {
                ConsoleLog.info(ready);
            }
            FrameChannel toFirst = links.toFirst();
            FrameChannel fromLast = links.fromLast();
            log.start();

            Coordinator c = new Coordinator(toFirst, fromLast, model.vocabSize(), s.coordinator(), listener, metrics);
            AtomicBoolean recovering = new AtomicBoolean();
            recovery = s.recovery().enabled()
                    ? new PipelineRecovery(procs, cfg, model, fingerprint.bytes(), s.link(), s.recovery(), status) : null;
            if (recovery != null) {
                PipelineRecovery r = recovery;
                c.setRecovery(cause -> {
                    recovering.set(true);
                    try {
                        String why = broken.getAndSet(null);
                        return r.recover(why != null ? why : cause);
                    } finally {
                        broken.set(null);
                        recovering.set(false);
                    }
                });
            }
            ScheduledExecutorService watchdog = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "pipeline-watchdog");
                t.setDaemon(true);
                return t;
            });
            watchdog.scheduleWithFixedDelay(() -> {
                if (!recovering.get()) {
                    watch(procs, c, s, broken, recovering);
                }
            }, WATCH_PERIOD_MILLIS, WATCH_PERIOD_MILLIS, TimeUnit.MILLISECONDS);
            try {
                result = driver.apply(c, admission);
                try {
                    c.shutdown();
                } catch (PipelineException e) {
                    System.err.println("pipeline: shutting down: " + e.getMessage() + " (every sequence had ended)");
                }
            } catch (PipelineException e) {
                String why = broken.get();
                if (why == null) {
                    why = awaitDeadStage(procs);
                    why = why == null ? null : why + "; " + e.getMessage();
                }
                throw why != null ? new PipelineException(why, e) : e;
            } finally {
                watchdog.shutdownNow();
                c.closeLinks();
            }
            if (!procs.awaitExit(10_000)) {
                System.err.println("run-pipeline: some stages did not exit within 10 s of SHUTDOWN; stopping them");
            }
        } finally {
            log.close();
        }
        LatencySummary latency = LatencySummary.read(s.runDir());
        latency.export(s.runDir());
        return new Outcome(result, latency, computeShares(latency, n, result.wallNanos()), stalls(latency, n),
                recovery == null ? List.of() : recovery.done());
    }

    /** {@code run.json}: what the latency summary and report need to know about this run besides the logs. */
    private static void writeRunFacts(Settings s, int sequences) {
        PipelineConfig cfg = s.config();
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("stages", cfg.stages().size());
        m.put("mode", s.coordinator().openLoop() ? "open-loop" : "closed-loop");
        if (s.coordinator().openLoop()) {
            m.put("rate_per_second", s.coordinator().ratePerSecond());
        }
        m.put("sequences", sequences);
        m.put("micro_batches", s.coordinator().microBatches());
        m.put("stall_threshold_us", cfg.stallThresholdMicros());
        List<String> crossHost = crossHostHops(cfg);
        m.put("same_host", crossHost.isEmpty());
        m.put("cross_host_hops", crossHost);
        m.put("started", Instant.now().toString());
        try {
            Files.createDirectories(s.runDir());
            Files.writeString(s.runDir().resolve(LatencySummary.RUN_FILE), Jackson.write(m) + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write to " + s.runDir(), e);
        }
    }

    /**
     * The hops whose two ends may be on different hosts: those into and out of an external stage whose address is
     * not this host's. Their one-way figures subtract two hosts' clocks (see {@link LatencySummary#CROSS_HOST_CLOCK}).
     */
    static List<String> crossHostHops(PipelineConfig cfg) {
        int n = cfg.stages().size();
        List<String> hops = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String ext = cfg.stages().get(i).external();
            if (ext == null || isLocal(ext.substring(0, Math.max(0, ext.lastIndexOf(':'))))) {
                continue;
            }
            String up = i == 0 ? "coordinator" : "stage" + (i - 1);
            String down = i == n - 1 ? "coordinator" : "stage" + (i + 1);
            for (String h : List.of("hop-" + up + "-stage" + i, "hop-stage" + i + "-" + down)) {
                if (!hops.contains(h)) {
                    hops.add(h);
                }
            }
        }
        return hops;
    }

    private static boolean isLocal(String host) {
        try {
            InetAddress a = InetAddress.getByName(host.startsWith("[") ? host.substring(1, host.length() - 1) : host);
            return a.isLoopbackAddress() || a.isAnyLocalAddress() || NetworkInterface.getByInetAddress(a) != null;
        } catch (IOException e) {
            return false;   // cannot tell: assume another host, so nobody trusts a one-way figure by mistake
        }
    }

    /**
     * One look of the watchdog (every {@link #WATCH_PERIOD_MILLIS} ms): a heartbeat to stage 0 when its link is idle;
     * closes the connections, which fails the coordinator's blocking I/O, when a stage died, when the return link
     * stayed silent (no frame, no heartbeat) past the liveness bound, when stage 0 stopped reading for that long, or
     * when the pipeline gave no answer for the stall timeout. Each reason names the stage and the link.
     */
    private static void watch(Stages procs, Coordinator c, Settings s, AtomicReference<String> broken, AtomicBoolean recovering) {
        if (broken.get() != null) {
            return;
        }
        List<String> addresses = procs.addresses();
        long now = System.nanoTime();
        c.heartbeatIfIdle(now, TimeUnit.MILLISECONDS.toNanos(s.link().heartbeatMillis()));
        long bound = TimeUnit.MILLISECONDS.toNanos(s.link().livenessMillis());
        int n = addresses.size();
        String dead = procs.deadStage();
        long silent = c.silentNanos(now);
        long writing = c.writeStartedNanos();
        long idle = now - c.lastProgressNanos();
        String why;
        if (dead != null) {
            why = dead;
        } else if (silent > bound) {
            why = String.format(Locale.ROOT, "no frame or heartbeat from stage%d (%s) for %.1f s on link stage%d->coordinator:"
                    + " stage%d is hung or the link is down", n - 1, addresses.get(n - 1), silent / 1e9, n - 1, n - 1);
        } else if (writing != 0 && now - writing > bound) {
            why = String.format(Locale.ROOT, "stage0 (%s) has not read from the coordinator for %.1f s on link coordinator->stage0:"
                    + " stage0 is hung or the link is down", addresses.get(0), (now - writing) / 1e9);
        } else if (idle > TimeUnit.MILLISECONDS.toNanos(s.stallTimeoutMillis())) {
            why = "no answer from the pipeline for " + s.stallTimeoutMillis() / 1000 + " s (every link is alive: a stage is"
                    + " working on one step that long)";
        } else {
            why = null;
        }
        if (why != null && !recovering.get() && broken.compareAndSet(null, why)) {
            c.closeLinks();
        }
    }

    /** Tells the console what a recovery is doing. */
    private static void printStatus(String status) {
        System.err.println(status == null ? "pipeline: recovered" : "pipeline: " + status);
    }

    /**
     * A stage whose process ended, looked for during a short grace period: when a stage dies, the broken link is
     * often seen before the process's exit is, and the exit names the cause better.
     */
    private static String awaitDeadStage(Stages procs) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(1000);
        do {
            String dead = procs.deadStage();
            if (dead != null) {
                return dead;
            }
            java.util.concurrent.locks.LockSupport.parkNanos(20_000_000);
        } while (System.nanoTime() < deadline);
        return null;
    }

    /** Each stage's nanoseconds running layers (its {@code stage<i>-compute-ns} counter) over the run's wall time. */
    private static double[] computeShares(LatencySummary latency, int n, long wallNanos) {
        double[] share = new double[n];
        for (int i = 0; i < n; i++) {
            Long nanos = latency.counters().get("stage" + i + "-compute-ns");
            share[i] = nanos == null || wallNanos <= 0 ? Double.NaN : nanos.doubleValue() / wallNanos;
        }
        return share;
    }

    private static long[] stalls(LatencySummary l, int n) {
        long[] s = new long[n];
        for (int i = 0; i < n; i++) {
            s[i] = l.counters().getOrDefault("stage" + i + "-stalls", 0L);
        }
        return s;
    }
}
