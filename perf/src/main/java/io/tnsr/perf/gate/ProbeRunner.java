package io.tnsr.perf.gate;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.regex.Pattern;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.profile.GCProfiler;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.RunnerException;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;

/**
 * Runs one {@link Probe} with JMH's {@link Runner} (one fork unless the probe asks for more, short warm-up and
 * measurement, {@code -prof gc}) and reduces it to a {@link Measurement} (the fastest fork's). JMH's own output for each probe goes to a log file.
 */
public final class ProbeRunner {

    /** Iteration counts and length shared by every probe. */
    public record Settings(int warmupIterations, int measurementIterations, int iterationMillis) {
        /** What the gate uses: 4 x 0.5 s warm-up, 8 x 0.5 s measured (median of 8). */
        public static final Settings GATE = new Settings(4, 8, 500);
        /** For trying things out (--quick): numbers are rougher. */
        public static final Settings QUICK = new Settings(2, 4, 250);
    }

    /**
     * What a probe measured.
     *
     * @param nanosPerOp      AverageTime: median over iterations of the mean time per operation; SampleTime: the
     *                        median (p0.50) of all sampled operations
     * @param allocBytesPerOp median over iterations of gc.alloc.rate.norm (NaN when not available)
     * @param iterationNanos  each measured iteration's mean time per operation (AverageTime; p0.50 for SampleTime)
     * @param error           why there is no figure (the benchmark failed), else null
     */
    public record Measurement(double nanosPerOp, double allocBytesPerOp, double[] iterationNanos, String error) {
        public static Measurement failed(String error) {
            return new Measurement(Double.NaN, Double.NaN, new double[0], error);
        }

        public boolean ok() {
            return error == null;
        }
    }

    private final Settings settings;
    private final Path logDir;
    private final String jvm;
    private int count;

    /**
     * @param cpu the CPU every benchmark JVM is pinned to (with {@code taskset}), or -1 to leave them to the
     *            scheduler
     */
    public ProbeRunner(Settings settings, Path logDir, int cpu) throws IOException {
        this.settings = settings;
        this.logDir = logDir;
        Files.createDirectories(logDir);
        this.jvm = cpu < 0 ? null : pinnedJvm(logDir.getParent(), cpu);
    }

    /**
     * A launcher that starts the JVM pinned to {@code cpu}, for JMH's {@code jvm} option: the benchmark, its
     * reference and JMH's helper threads then all run on that CPU. On a shared VM the CPUs do not run at the same
     * speed (here one is about 18% slower than the other, whichever it is at the moment), so a benchmark the
     * scheduler moves between them, or a reference measured on the other one, would carry that difference.
     */
    static String pinnedJvm(Path dir, int cpu) throws IOException {
        Path taskset = Path.of("/usr/bin/taskset");
        if (!Files.isExecutable(taskset)) {
            System.err.println("perf-gate: no /usr/bin/taskset: benchmark JVMs are not pinned (expect more spread)");
            return null;
        }
        Path script = dir.resolve("java-on-cpu" + cpu);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Files.writeString(script, "#!/bin/sh\n# Written by tools/perf-gate: the JMH fork JVM, pinned to CPU " + cpu + ".\n"
                + "exec " + taskset + " -c " + cpu + " '" + java + "' \"$@\"\n");
        if (!script.toFile().setExecutable(true)) {
            throw new IOException("cannot make " + script + " executable");
        }
        return script.toString();
    }

    public Measurement run(Probe p) {
        Path log = logDir.resolve(String.format(Locale.ROOT, "%02d-%s.log", ++count,
                p.key().replaceAll("[^A-Za-z0-9.=,-]+", "_")));
        TimeValue it = TimeValue.milliseconds((long) settings.iterationMillis() * p.iterationScale());
        ChainedOptionsBuilder o = new OptionsBuilder()
                .include("^" + Pattern.quote(p.benchmark()) + "$")
                .mode(p.mode())
                .forks(p.forks())
                .warmupIterations(settings.warmupIterations()).warmupTime(it)
                .measurementIterations(settings.measurementIterations()).measurementTime(it)
                .addProfiler(GCProfiler.class)
                .timeout(TimeValue.minutes(2))
                .shouldFailOnError(true)
                .output(log.toString());
        if (jvm != null) {
            o.jvm(jvm);
        }
        for (Map.Entry<String, String> e : p.params().entrySet()) {
            o.param(e.getKey(), e.getValue());
        }
        Collection<RunResult> results;
        try {
            results = new Runner(o.build()).run();
        } catch (RunnerException | RuntimeException e) {
            return Measurement.failed(firstCause(e, log));
        }
        if (results.size() != 1) {
            return Measurement.failed(results.size() + " results instead of 1 (parameters " + p.params() + "?); see " + log);
        }
        Measurement fastest = null;
        for (BenchmarkResult fork : results.iterator().next().getBenchmarkResults()) {
            Measurement m = reduce(fork, p.mode());
            if (fastest == null || m.nanosPerOp() < fastest.nanosPerOp()) {
                fastest = m;
            }
        }
        return fastest != null ? fastest : Measurement.failed("no fork finished; see " + log);
    }

    /** One fork's figure: see {@link Measurement}. */
    static Measurement reduce(BenchmarkResult fork, Mode mode) {
        List<Double> times = new ArrayList<>();
        List<Double> allocs = new ArrayList<>();
        for (IterationResult i : fork.getIterationResults()) {
            Result<?> primary = i.getPrimaryResult();
            double score = mode == Mode.SampleTime ? primary.getStatistics().getPercentile(50) : primary.getScore();
            times.add(score * nanosPer(primary.getScoreUnit()));
            Result<?> alloc = i.getSecondaryResults().get("gc.alloc.rate.norm");
            if (alloc != null) {
                allocs.add(alloc.getScore());
            }
        }
        double[] t = times.stream().mapToDouble(Double::doubleValue).toArray();
        double nanos = mode == Mode.SampleTime
                ? fork.getPrimaryResult().getStatistics().getPercentile(50) * nanosPer(fork.getPrimaryResult().getScoreUnit())
                : median(t);
        double alloc = allocs.isEmpty() ? Double.NaN : median(allocs.stream().mapToDouble(Double::doubleValue).toArray());
        return new Measurement(nanos, alloc, t, null);
    }

    /** Nanoseconds in one unit of a JMH time score ("ns/op", "us/op", "ms/op", "s/op"). */
    public static double nanosPer(String unit) {
        String u = unit.substring(0, unit.indexOf('/'));
        return switch (u) {
            case "ns" -> 1;
            case "us" -> 1e3;
            case "ms" -> 1e6;
            case "s" -> 1e9;
            case "min" -> 60e9;
            default -> throw new IllegalArgumentException("not a time per operation: " + unit);
        };
    }

    public static double median(double[] v) {
        if (v.length == 0) {
            return Double.NaN;
        }
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }

    private static String firstCause(Throwable e, Path log) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        String msg = t.getMessage() != null ? t.getMessage() : t.toString();
        return msg.lines().findFirst().orElse(msg) + " (JMH log: " + log + ")";
    }
}
