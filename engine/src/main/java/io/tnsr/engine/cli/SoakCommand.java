package io.tnsr.engine.cli;

import io.tnsr.engine.coordinator.Coordinator;
import io.tnsr.engine.coordinator.PipelineException;
import io.tnsr.engine.coordinator.PipelineRun;
import io.tnsr.engine.coordinator.StageProcesses;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.metrics.CounterFile;
import io.tnsr.engine.metrics.RunDirectory;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.SpinPolicy;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import io.tnsr.engine.util.Jackson;
import io.tnsr.wire.FrameHeader;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code tools/soak}: a pipeline serving a steady load for a given time, or until it has served a given number of
 * tokens (whichever comes first when both are given), while stages are killed or stopped at random, checked against
 * an uninterrupted run.
 *
 * <pre>
 *   reference: each prompt's tokens from one process (greedy: what any uninterrupted run gives)
 *   serve:     the stages as run-pipeline starts them, --concurrency sequences always in flight (prompts in turn)
 *   killer:    every --kill-every MIN:MAX seconds, SIGKILL or SIGSTOP to a random stage (recovery replaces it);
 *              the next loss waits until the last one is recovered
 *   timing:    per loss, loss to new session (recovered) and loss to the next token (the replay done)
 *   sampler:   every --sample-every seconds: tokens, this process's and each stage's memory, threads, open files,
 *              each stage's KV pages in use
 *   end:       after --duration or once --tokens were served: no new sequences; those running finish (so a little
 *              more than --tokens are served); KV pages must come back to 0; the verdict
 * </pre>
 * The verdict passes when every finished sequence's tokens equal the reference, no sequence failed, every kill was
 * recovered, every stage's KV pool is empty at the end, and threads, open files and memory are flat (the end within a
 * stated margin of the first sample after warm-up).
 */
@Command(name = "soak", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Serves a steady load through a pipeline while killing or stopping random stages, and checks that"
                + " every sequence's tokens equal an uninterrupted run's, that each loss is recovered, and that memory,"
                + " threads, open files and KV caches stay flat. Exit status: 0 pass, 1 fail, 2 bad options, 3 the pipeline failed."})
public final class SoakCommand implements Callable<Integer> {
    @Mixin
    PipelineOptions pipeline;

    /** How long a soak serves when neither --duration nor --tokens says when to stop. */
    static final double DEFAULT_DURATION_SECONDS = 120;

    @Option(names = "--duration", paramLabel = "SECONDS",
            description = "How long to serve (default: 120 s unless --tokens is given; with both, whichever comes first).")
    Double durationSeconds;

    @Option(names = "--tokens", paramLabel = "N",
            description = "Serve until N tokens were served in all (the sequences running then finish); with --duration,"
                    + " whichever comes first.")
    Long tokenLimit;

    @Option(names = "--concurrency", paramLabel = "N", defaultValue = "8", description = "Sequences in flight at all times (default: ${DEFAULT-VALUE}).")
    int concurrency;

    @Option(names = "--max-tokens", paramLabel = "N", defaultValue = "200", description = "Tokens per sequence (default: ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--prompts", paramLabel = "K", defaultValue = "8", description = "Distinct prompts, used in turn (default: ${DEFAULT-VALUE}).")
    int prompts;

    @Option(names = "--kill-every", paramLabel = "MIN:MAX", defaultValue = "60:180",
            description = "Seconds between losses, uniform in [MIN, MAX] (default: ${DEFAULT-VALUE}).")
    String killEvery;

    @Option(names = "--signal", defaultValue = "both", description = "kill (SIGKILL), stop (SIGSTOP) or both, chosen at random (default: ${DEFAULT-VALUE}).")
    String signal;

    @Option(names = "--sample-every", paramLabel = "SECONDS", defaultValue = "10", description = "Resource samples (default: ${DEFAULT-VALUE}).")
    double sampleSeconds;

    @Option(names = "--seed", defaultValue = "1", description = "Seed of the killer's choices (default: ${DEFAULT-VALUE}).")
    long seed;

    @Option(names = "--report", paramLabel = "FILE", description = "Also write the report as JSON to FILE.")
    Path reportFile;

    @Option(names = "--json", description = "Print the report as one JSON object instead of text.")
    boolean json;

    /** One loss: when, which stage, how, and where the running sequences were. */
    private record Kill(double atSeconds, int stage, long pid, String signal, List<Integer> positions) {
    }

    /** One resource sample. */
    private record Sample(double atSeconds, long tokens, long rssKb, long heapBytes, int threads, int fds, List<Map<String, Object>> stages) {
    }

    @Override
    public Integer call() throws Exception {
        pipeline.applyVerbosity();
        double[] kill = parseRange(killEvery);
        if (durationSeconds == null && tokenLimit == null) {
            durationSeconds = DEFAULT_DURATION_SECONDS;
        }
        if ((durationSeconds != null && !(durationSeconds > 0)) || (tokenLimit != null && tokenLimit < 1) || concurrency < 1
                || maxTokens < 1 || prompts < 1 || !(sampleSeconds > 0)) {
            throw new IllegalArgumentException("--duration, --tokens, --concurrency, --max-tokens, --prompts and --sample-every must be positive");
        }
        if (!List.of("kill", "stop", "both").contains(signal)) {
            throw new IllegalArgumentException("--signal must be kill, stop or both, got '" + signal + "'");
        }
        Path modelPath = pipeline.modelPath("soak");
        LlamaConfig mc;
        Tokenizer tok;
        try (GgufFile file = GgufFile.open(modelPath)) {
            mc = LlamaConfig.fromGguf(file);
            tok = Tokenizers.fromGguf(file);
        }
        PipelineConfig pc = pipeline.pipeline(mc);
        pc.checkFrames(mc);
        int n = pc.stages().size();
        List<String> texts = new ArrayList<>();
        for (int k = 0; k < prompts; k++) {
            texts.add(k % 2 == 0 ? "Once upon a time, in a story number " + k : "One day, the " + k + "th little bird");
        }

        long t0 = System.nanoTime();
        System.err.printf(Locale.ROOT, "soak: reference tokens of %d prompts from one process...%n", prompts);
        int[][] reference = reference(modelPath, mc, tok, texts);
        System.err.printf(Locale.ROOT, "soak: reference done in %.1f s%n", (System.nanoTime() - t0) / 1e9);

        SpinPolicy policy = pipeline.spinPolicy(pc, "soak");
        int perStep = Math.min(pc.maxSequencesPerFrame(), FrameHeader.MAX_SEQUENCE_COUNT);
        int perBatch = Math.min(perStep, (concurrency + n - 1) / n);
        Scheduler.Limits limits = new Scheduler.Limits(n, perBatch, Math.min(pc.maxTokensPerFrame(), perBatch + 128), perStep);
        RunDirectory dir = RunDirectory.temporary("tnsr-soak"); // the stages' metrics, read for the samples
        try (dir) {
            Path runDir = dir.path();
            PipelineRun.Settings settings = new PipelineRun.Settings(modelPath, pc, policy.waits(), policy.cpus(),
                    new Coordinator.Options(n, perBatch, pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(), pc.maxFrameBytes())
                            .withSampleInLastStage(pipeline.sampleInLastStage()),
                    runDir, pipeline.startupMillis(), pipeline.stallMillis(), pipeline.connectMillis(), 0, pipeline.link(pc, "soak"),
                    pipeline.recovery());
            StageProcesses stages = new StageProcesses(pc, modelPath, runDir, policy.waits(), policy.cpus(), settings.link());

            Map<Integer, SequenceState> running = new ConcurrentHashMap<>();
            AtomicLong resumeFromNanos = new AtomicLong();   // the loss whose first token after recovery is awaited
            AtomicBoolean recovered = new AtomicBoolean();
            List<Double> resumeSeconds = Collections.synchronizedList(new ArrayList<>());
            Semaphore slots = new Semaphore(concurrency);
            AtomicLong tokens = new AtomicLong();
            AtomicInteger finishedOk = new AtomicInteger();
            List<String> mismatches = Collections.synchronizedList(new ArrayList<>());
            List<String> failures = Collections.synchronizedList(new ArrayList<>());
            Generator.Listener listener = new Generator.Listener() {
                @Override
                public void onToken(SequenceState seq, int token) {
                    tokens.incrementAndGet();
                    long k = resumeFromNanos.get();
                    if (k != 0 && recovered.get() && resumeFromNanos.compareAndSet(k, 0)) {
                        resumeSeconds.add((System.nanoTime() - k) / 1e9);   // the replay done: tokens flow again
                    }
                }

                @Override
                public void onFinished(SequenceState seq) {
                    running.remove(seq.index());
                    int k = seq.index() % prompts;
                    if (seq.error() != null) {
                        failures.add("sequence " + seq.index() + ": " + seq.error());
                    } else if (!Arrays.equals(seq.generatedTokens(), reference[k])) {
                        mismatches.add("sequence " + seq.index() + " (prompt " + k + ") differs from the reference at token "
                                + firstDifference(seq.generatedTokens(), reference[k]));
                    } else {
                        finishedOk.incrementAndGet();
                    }
                    slots.release();
                }
            };
            List<Kill> kills = Collections.synchronizedList(new ArrayList<>());
            List<Double> recoverSeconds = Collections.synchronizedList(new ArrayList<>());
            AtomicLong lastKillNanos = new AtomicLong();
            Runnable onRecovered = () -> {
                long k = lastKillNanos.getAndSet(0);
                if (k != 0) {
                    recoverSeconds.add((System.nanoTime() - k) / 1e9);
                    recovered.set(true);
                }
            };
            AtomicReference<Scheduler> scheduler = new AtomicReference<>();
            AtomicBoolean stop = new AtomicBoolean();
            AtomicReference<Throwable> failed = new AtomicReference<>();
            CountDownLatch ready = new CountDownLatch(1);
            Thread driver = new Thread(() -> {
                try {
                    PipelineRun.serve(stages, settings, mc, limits, listener, s -> {
                        scheduler.set(s);
                        ready.countDown();
                    }, stop::get, status -> {
                        System.err.println(status == null ? "soak: recovered" : "soak: " + status);
                        if (status == null) {
                            onRecovered.run();
                        }
                    });
                } catch (Throwable e) {
                    failed.set(e);
                    ready.countDown();
                }
            }, "soak-pipeline");
            driver.start();
            if (!ready.await(pipeline.startupMillis() + 60_000, TimeUnit.MILLISECONDS) || failed.get() != null) {
                System.err.println("soak: the pipeline did not start: " + (failed.get() == null ? "timed out" : failed.get().getMessage()));
                stop.set(true);
                return 3;
            }
            long start = System.nanoTime();
            long end = durationSeconds == null ? Long.MAX_VALUE : start + (long) (durationSeconds * 1e9);
            long tokensToServe = tokenLimit == null ? Long.MAX_VALUE : tokenLimit;
            Random random = new Random(seed);
            List<Sample> samples = new ArrayList<>();
            long nextSample = start;
            long nextKill = start + (long) ((kill[0] + random.nextDouble() * (kill[1] - kill[0])) * 1e9);
            int id = 0;
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, mc.vocabSize());
            System.err.printf(Locale.ROOT, "soak: serving %d sequences at a time %s, a stage lost every %s s%n", concurrency,
                    until(), killEvery);
            while (System.nanoTime() < end && tokens.get() < tokensToServe && failed.get() == null) {
                long now = System.nanoTime();
                if (now >= nextSample) {
                    samples.add(sample((now - start) / 1e9, tokens.get(), stages, runDir, n));
                    nextSample = now + (long) (sampleSeconds * 1e9);
                }
                if (now >= nextKill && lastKillNanos.get() != 0) {
                    nextKill = now + 1_000_000_000L;   // the last loss is still being recovered: one at a time
                } else if (now >= nextKill) {
                    int i = random.nextInt(n);
                    String sig = signal.equals("both") ? (random.nextBoolean() ? "KILL" : "STOP") : signal.toUpperCase(Locale.ROOT);
                    Process p = stages.process(i);
                    List<Integer> positions = running.values().stream().map(SequenceState::nextPosition).sorted().toList();
                    if (p != null && p.isAlive()) {
                        long killNanos = System.nanoTime();
                        lastKillNanos.compareAndSet(0, killNanos);
                        recovered.set(false);
                        resumeFromNanos.set(killNanos);
                        new ProcessBuilder("kill", "-" + sig, String.valueOf(p.pid())).start().waitFor(5, TimeUnit.SECONDS);
                        kills.add(new Kill((now - start) / 1e9, i, p.pid(), sig, positions));
                        System.err.printf(Locale.ROOT, "soak: %.0f s: SIG%s to stage%d (pid %d); running sequences at positions %s%n",
                                (now - start) / 1e9, sig, i, p.pid(), positions);
                    }
                    nextKill = now + (long) ((kill[0] + random.nextDouble() * (kill[1] - kill[0])) * 1e9);
                }
                if (slots.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    int k = id % prompts;
                    SequenceState s = new SequenceState(id, 0, texts.get(k), tok.encode(texts.get(k), true), maxTokens, mc.contextLength(),
                            -1, t -> false, sampler);
                    running.put(id, s);
                    s.started(System.nanoTime());
                    scheduler.get().submit(s);
                    id++;
                }
            }
            String stoppedBy = failed.get() != null ? "failure" : tokens.get() >= tokensToServe ? "tokens" : "duration";
            // Drain: no new sequences; the running ones finish; then the KV pools must be empty.
            long drainDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Math.max(120, (long) pipeline.recovery().timeoutMillis() / 1000 * 2));
            while (!running.isEmpty() && failed.get() == null && System.nanoTime() < drainDeadline) {
                Thread.sleep(100);
            }
            long kvDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            Sample last = sample((System.nanoTime() - start) / 1e9, tokens.get(), stages, runDir, n);
            while (kvInUse(last) > 0 && System.nanoTime() < kvDeadline) {
                Thread.sleep(200);
                last = sample((System.nanoTime() - start) / 1e9, tokens.get(), stages, runDir, n);
            }
            samples.add(last);
            stop.set(true);
            driver.join(60_000);
            double wall = (System.nanoTime() - start) / 1e9;

            Map<String, Object> report = report(wall, id, tokens.get(), finishedOk.get(), mismatches, failures, kills, recoverSeconds,
                    resumeSeconds, samples, running.size(), failed.get(), n, stoppedBy);
            PrintStream out = System.out;
            if (reportFile != null) {
                Files.writeString(reportFile, Jackson.write(report) + "\n");
            }
            if (json) {
                out.println(Jackson.write(report));
            } else {
                printText(out, report, samples);
            }
            if (failed.get() instanceof PipelineException) {
                return 3;
            }
            return "pass".equals(report.get("verdict")) ? 0 : 1;
        }
    }

    /** When the serving stops, as the start line says it: "for 60 s", "until 5000 tokens", or both. */
    private String until() {
        String time = durationSeconds == null ? null : String.format(Locale.ROOT, "for %.0f s", durationSeconds);
        String count = tokenLimit == null ? null : "until " + tokenLimit + " tokens";
        return time == null ? count : count == null ? time : time + " or " + count + ", whichever comes first";
    }

    private static double[] parseRange(String s) {
        String[] p = s.split(":");
        try {
            double a = Double.parseDouble(p[0]);
            double b = p.length > 1 ? Double.parseDouble(p[1]) : a;
            if (p.length > 2 || !(a > 0) || b < a) {
                throw new NumberFormatException();
            }
            return new double[] {a, b};
        } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
            throw new IllegalArgumentException("--kill-every must be MIN:MAX seconds with 0 < MIN <= MAX, got '" + s + "'");
        }
    }

    /** Each prompt's tokens from the whole model in this process, greedy: what an uninterrupted run gives. */
    private int[][] reference(Path model, LlamaConfig mc, Tokenizer tok, List<String> texts) {
        try (GgufFile f = GgufFile.open(model)) {
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, mc.vocabSize());
            List<SequenceState> seqs = new ArrayList<>();
            for (int k = 0; k < texts.size(); k++) {
                seqs.add(new SequenceState(k, 0, texts.get(k), tok.encode(texts.get(k), true), maxTokens, mc.contextLength(), -1,
                        t -> false, sampler));
            }
            KvCachePool pool = KvCachePool.sized(mc.layers(), mc.kvDim(), mc.contextLength(), (long) texts.size() * mc.contextLength());
            LayerRange range = new LayerRange(f, mc, 0, mc.layers(), pool, 64, Math.max(1, texts.size()));
            new Generator(range, (s, t) -> { }).run(seqs);
            int[][] ref = new int[texts.size()][];
            for (int k = 0; k < texts.size(); k++) {
                ref[k] = seqs.get(k).generatedTokens();
            }
            return ref;
        }
    }

    private static int firstDifference(int[] a, int[] b) {
        int n = Math.min(a.length, b.length);
        for (int i = 0; i < n; i++) {
            if (a[i] != b[i]) {
                return i;
            }
        }
        return n;
    }

    private static Sample sample(double at, long tokens, StageProcesses stages, Path runDir, int n) {
        Runtime rt = Runtime.getRuntime();
        List<Map<String, Object>> perStage = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Map<String, Object> m = new LinkedHashMap<>();
            Process p = stages.process(i);
            long pid = p == null ? -1 : p.pid();
            m.put("pid", pid);
            m.put("rss_kb", status(pid, "VmRSS"));
            m.put("threads", status(pid, "Threads"));
            m.put("fds", fds(pid));
            m.put("kv_pages_used", kvPages(runDir, i));
            perStage.add(m);
        }
        return new Sample(at, tokens, status(ProcessHandle.current().pid(), "VmRSS"), rt.totalMemory() - rt.freeMemory(),
                ManagementFactory.getThreadMXBean().getThreadCount(), (int) fds(ProcessHandle.current().pid()), perStage);
    }

    private static long kvInUse(Sample s) {
        long sum = 0;
        for (Map<String, Object> m : s.stages()) {
            sum += Math.max(0, ((Number) m.get("kv_pages_used")).longValue());
        }
        return sum;
    }

    /** A field of /proc/PID/status in its unit (kB for memory), or -1. */
    private static long status(long pid, String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", String.valueOf(pid), "status"))) {
                if (line.startsWith(field + ":")) {
                    return Long.parseLong(line.substring(field.length() + 1).trim().split("\\s+")[0]);
                }
            }
        } catch (IOException | RuntimeException ignored) {
            // not Linux, or the process is gone
        }
        return -1;
    }

    private static long fds(long pid) {
        try (var s = Files.list(Path.of("/proc", String.valueOf(pid), "fd"))) {
            return s.count();
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    private static long kvPages(Path runDir, int stage) {
        try {
            Map<String, CounterFile.Reading> c = CounterFile.read(runDir.resolve("stage" + stage + "-metrics" + CounterFile.SUFFIX));
            CounterFile.Reading r = c.get("stage" + stage + "-kv-pages-used");
            return r == null ? -1 : r.value();
        } catch (IOException | RuntimeException e) {
            return -1;
        }
    }

    private static double percentile(List<Double> values, double p) {
        if (values.isEmpty()) {
            return Double.NaN;
        }
        List<Double> v = new ArrayList<>(values);
        Collections.sort(v);
        return v.get(Math.min(v.size() - 1, (int) Math.ceil(p / 100 * v.size()) - 1 < 0 ? 0 : (int) Math.ceil(p / 100 * v.size()) - 1));
    }

    private Map<String, Object> report(double wall, int submitted, long tokens, int ok, List<String> mismatches, List<String> failures,
                                       List<Kill> kills, List<Double> recover, List<Double> resume, List<Sample> samples, int unfinished,
                                       Throwable failed, int n, String stoppedBy) {
        List<String> reasons = new ArrayList<>();
        if (failed != null) {
            reasons.add("the pipeline failed: " + failed.getMessage());
        }
        if (!mismatches.isEmpty()) {
            reasons.add(mismatches.size() + " sequences differ from the reference, e.g. " + mismatches.get(0));
        }
        if (!failures.isEmpty()) {
            reasons.add(failures.size() + " sequences failed, e.g. " + failures.get(0));
        }
        if (unfinished > 0) {
            reasons.add(unfinished + " sequences did not finish");
        }
        if (recover.size() < kills.size()) {
            reasons.add(kills.size() + " stages lost but " + recover.size() + " recoveries timed");
        }
        Sample last = samples.get(samples.size() - 1);
        if (kvInUse(last) != 0) {
            reasons.add("KV pages still in use at the end: " + kvInUse(last));
        }
        // Flat: the end against the first sample after warm-up (a tenth of the run, at least the second sample).
        Sample base = samples.get(Math.min(samples.size() - 1, Math.max(1, samples.size() / 10)));
        if (last.threads() > base.threads() + 4) {
            reasons.add("coordinator threads grew from " + base.threads() + " to " + last.threads());
        }
        if (last.fds() > base.fds() + 8) {
            reasons.add("coordinator open files grew from " + base.fds() + " to " + last.fds());
        }
        if (last.rssKb() > base.rssKb() * 1.25 + 65536) {
            reasons.add("coordinator memory grew from " + base.rssKb() / 1024 + " MB to " + last.rssKb() / 1024 + " MB");
        }
        // A stage that was never replaced since the base sample: its threads (a lazily grown pool of 8 handshake
        // threads allowed for) and open files must be flat too.
        for (int i = 0; i < n; i++) {
            Map<String, Object> b = base.stages().get(i);
            Map<String, Object> e = last.stages().get(i);
            if (!b.get("pid").equals(e.get("pid")) || ((Number) e.get("threads")).longValue() < 0) {
                continue;
            }
            long bt = ((Number) b.get("threads")).longValue();
            long et = ((Number) e.get("threads")).longValue();
            long bf = ((Number) b.get("fds")).longValue();
            long ef = ((Number) e.get("fds")).longValue();
            if (et > bt + 10) {
                reasons.add("stage" + i + " threads grew from " + bt + " to " + et);
            }
            if (ef > bf + 8) {
                reasons.add("stage" + i + " open files grew from " + bf + " to " + ef);
            }
        }
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("verdict", reasons.isEmpty() ? "pass" : "fail");
        r.put("reasons", reasons);
        r.put("stages", n);
        r.put("concurrency", concurrency);
        r.put("wall_seconds", Math.round(wall * 10) / 10.0);
        r.put("stopped_by", stoppedBy);
        r.put("sequences_submitted", submitted);
        r.put("sequences_matching_reference", ok);
        r.put("tokens_served", tokens);
        r.put("tokens_per_second", Math.round(tokens / wall * 10) / 10.0);
        r.put("losses", kills.size());
        r.put("recoveries", recover.size());
        Map<String, Object> ttr = new LinkedHashMap<>();
        ttr.put("p50", round(percentile(recover, 50)));
        ttr.put("p99", round(percentile(recover, 99)));
        ttr.put("max", round(recover.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN)));
        r.put("time_to_recover_seconds", ttr);
        Map<String, Object> ttres = new LinkedHashMap<>();
        ttres.put("p50", round(percentile(resume, 50)));
        ttres.put("p99", round(percentile(resume, 99)));
        ttres.put("max", round(resume.stream().mapToDouble(Double::doubleValue).max().orElse(Double.NaN)));
        r.put("time_to_resume_seconds", ttres);
        List<Object> k = new ArrayList<>();
        for (int i = 0; i < kills.size(); i++) {
            Kill x = kills.get(i);
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("at_seconds", round(x.atSeconds()));
            m.put("stage", x.stage());
            m.put("signal", x.signal());
            m.put("positions", x.positions());
            m.put("recovered_in_seconds", i < recover.size() ? round(recover.get(i)) : null);
            m.put("tokens_again_after_seconds", i < resume.size() ? round(resume.get(i)) : null);
            k.add(m);
        }
        r.put("losses_detail", k);
        List<Object> s = new ArrayList<>();
        for (Sample x : samples) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("at_seconds", round(x.atSeconds()));
            m.put("tokens", x.tokens());
            m.put("rss_mb", x.rssKb() / 1024);
            m.put("heap_mb", x.heapBytes() >> 20);
            m.put("threads", x.threads());
            m.put("fds", x.fds());
            m.put("stages", x.stages());
            s.add(m);
        }
        r.put("samples", s);
        return r;
    }

    private static Object round(double v) {
        return Double.isNaN(v) ? null : Math.round(v * 100) / 100.0;
    }

    private static void printText(PrintStream out, Map<String, Object> r, List<Sample> samples) {
        out.printf(Locale.ROOT, "== soak: %s ==%n", ((String) r.get("verdict")).toUpperCase(Locale.ROOT));
        for (Object reason : (List<?>) r.get("reasons")) {
            out.println("  " + reason);
        }
        out.printf(Locale.ROOT, "%s s (stopped by %s), %s stages, %s sequences at a time: %s sequences submitted, %s match the reference;"
                        + " %s tokens (%s/s)%n", r.get("wall_seconds"), r.get("stopped_by"), r.get("stages"), r.get("concurrency"), r.get("sequences_submitted"),
                r.get("sequences_matching_reference"), r.get("tokens_served"), r.get("tokens_per_second"));
        out.printf(Locale.ROOT, "losses %s, recoveries %s, time to recover (loss to new session) %s, to tokens again (replay done) %s%n",
                r.get("losses"), r.get("recoveries"), r.get("time_to_recover_seconds"), r.get("time_to_resume_seconds"));
        for (Object o : (List<?>) r.get("losses_detail")) {
            out.println("  " + o);
        }
        out.println("   at s   tokens  rss MB  threads  fds  stages (pid rss_MB threads fds kv_pages)");
        for (Sample x : samples) {
            StringBuilder st = new StringBuilder();
            for (Map<String, Object> m : x.stages()) {
                st.append(String.format(Locale.ROOT, " [%s %d %s %s %s]", m.get("pid"), ((Number) m.get("rss_kb")).longValue() / 1024,
                        m.get("threads"), m.get("fds"), m.get("kv_pages_used")));
            }
            out.printf(Locale.ROOT, "%7.0f %8d %7d %8d %4d %s%n", x.atSeconds(), x.tokens(), x.rssKb() / 1024, x.threads(), x.fds(), st);
        }
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new SoakCommand(), args));
    }
}
