package io.tnsr.perf.gate;

import io.tnsr.engine.util.Json;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.regex.Pattern;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/perf-gate}: runs the gate's fixed subset of JMH benchmarks ({@link GateSuite}), compares it with
 * {@code perf/baseline.json} ({@link GateCheck}), prints the table, and exits 1 naming each regression.
 */
@Command(name = "perf-gate", mixinStandardHelpOptions = true, sortOptions = false, usageHelpWidth = 120,
        description = {"Performance regression gate: runs a short fixed subset of the JMH benchmarks (one fork each,",
                "-prof gc), checks allocation per operation on the hot paths (must be 0 B/op) and each time as a ratio",
                "to a reference measured in the same run, against perf/baseline.json. Exit 0: pass; 1: a regression",
                "(named in the table); 2: usage or setup error."},
        footer = {"", "Examples:",
                "  tools/perf-gate                                  # the check CI runs (3-4 minutes)",
                "  tools/perf-gate --self-test                      # proves it catches the injected regressions",
                "  tools/perf-gate --calibrate 10                   # spread of every metric over 10 runs",
                "  tools/perf-gate --calibrate 10 --update-baseline # new baseline: medians, tolerances from the spread",
                "  tools/perf-gate --update-baseline                # new baseline values from one run, tolerances kept"})
public final class PerfGate implements Callable<Integer> {

    @Option(names = "--baseline", paramLabel = "FILE", description = "Baseline to compare with / write (default: perf/baseline.json).")
    Path baselinePath;

    @Option(names = "--update-baseline", description = "Write the baseline from this run (with --calibrate: medians of the "
            + "runs and tolerances from their spread; else the old baseline's tolerances are kept).")
    boolean update;

    @Option(names = "--self-test", description = "Also measure the deliberately regressed variants (package "
            + "io.tnsr.perf.gate.injected); exit 0 only if the unchanged code passes and each variant is caught.")
    boolean selfTest;

    @Option(names = "--calibrate", paramLabel = "N", defaultValue = "0",
            description = "Run the gate N times on the current code and report the spread of every metric.")
    int calibrate;

    @Option(names = "--only", paramLabel = "REGEX", description = "Only the metrics whose name matches (for development; never in CI).")
    Pattern only;

    @Option(names = "--quick", description = "Shorter iterations (2 + 4 x 0.25 s): rough numbers, for development.")
    boolean quick;

    @Option(names = "--cpu", paramLabel = "N|none", defaultValue = "last",
            description = "Pin every benchmark JVM to this CPU (default: the last one), or none.")
    String cpu;

    @Option(names = "--out", paramLabel = "DIR", description = "Where results and JMH logs go (default: .build/perf-gate).")
    Path outDir;

    private final PrintStream out = System.out;

    @Override
    public Integer call() throws Exception {
        Path home = Paths.get(System.getProperty("tnsr.home", ".")).toAbsolutePath().normalize();
        if (baselinePath == null) {
            baselinePath = home.resolve("perf").resolve("baseline.json");
        }
        if (outDir == null) {
            outDir = home.resolve(".build").resolve("perf-gate");
        }
        Files.createDirectories(outDir);
        if (selfTest && (calibrate > 0 || update)) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--self-test runs alone");
        }
        boolean haveBaseline = Files.exists(baselinePath);
        if (!haveBaseline && !update) {
            System.err.println("perf-gate: no baseline at " + baselinePath + " (create one with --update-baseline)");
            return 2;
        }
        ProbeRunner.Settings settings = quick ? ProbeRunner.Settings.QUICK : ProbeRunner.Settings.GATE;
        Baseline baseline = haveBaseline ? Baseline.read(baselinePath)
                : new Baseline(Map.of(), Baseline.DEFAULT_BACKGROUND, Map.of());
        List<Metric> metrics = GateSuite.metrics();
        if (only != null) {
            metrics = metrics.stream().filter(m -> only.matcher(m.name()).find()).toList();
        }
        out.println("perf-gate: " + GateTable.machine());
        out.printf(Locale.ROOT, "perf-gate: %d metrics, JMH 1 fork per probe%s, %d warm-up + %d measured iterations of %d ms, "
                + "-prof gc; baseline %s%n", metrics.size(), cpuNumber() < 0 ? "" : " pinned to CPU " + cpuNumber(),
                settings.warmupIterations(), settings.measurementIterations(), settings.iterationMillis(),
                haveBaseline ? baselinePath : "(none yet)");
        if (selfTest) {
            return selfTest(metrics, baseline, settings);
        }
        int runs = Math.max(1, calibrate);
        List<Map<String, GateCheck.Observation>> all = new ArrayList<>();
        int failedRuns = 0;
        for (int run = 1; run <= runs; run++) {
            if (runs > 1) {
                out.printf(Locale.ROOT, "%n=== run %d of %d ===%n", run, runs);
            }
            Schedule schedule = Schedule.of(metrics);
            List<ProbeRunner.Measurement> results = measure(schedule, settings, outDir.resolve(runs > 1 ? "logs-run" + run : "logs"));
            Map<Probe, ProbeRunner.Measurement> measured = schedule.firstOfEach(results);
            Map<String, GateCheck.Observation> obs = schedule.observe(metrics, results, settings.iterationMillis());
            all.add(obs);
            GateCheck.Report report = GateCheck.check(metrics, obs, only != null ? subset(baseline, metrics) : baseline);
            out.println();
            GateTable.print(report, out);
            GateTable.throughput(measured, out);
            writeResults(outDir.resolve(runs > 1 ? "run" + run + ".json" : "last-run.json"), schedule, results, obs, report);
            if (!report.passed()) {
                failedRuns++;
                for (GateCheck.Row r : report.failures()) {
                    out.println("perf-gate: FAIL " + r.metric() + ": " + r.verdict() + (r.note().isEmpty() ? "" : " - " + r.note()));
                }
            } else {
                out.println("perf-gate: PASS (" + report.rows().size() + " metrics)");
            }
        }
        Map<String, Calibration.Stats> stats = Calibration.summarize(metrics, all);
        if (runs > 1) {
            printSpread(stats, baseline);
            out.printf(Locale.ROOT, "perf-gate: %d of %d runs passed against %s%n", runs - failedRuns, runs,
                    haveBaseline ? baselinePath : "(no baseline)");
        }
        if (update) {
            Map<String, String> notes = new LinkedHashMap<>();
            notes.put("comment", "Written by tools/perf-gate --update-baseline" + (runs > 1 ? " --calibrate " + runs : "")
                    + ". Review the diff like code: see README.md, section Performance (when to update, what the numbers mean).");
            notes.put("machine", GateTable.machine());
            notes.put("measured", Instant.now().truncatedTo(ChronoUnit.SECONDS).toString() + ", load average " + GateTable.load());
            notes.put("tolerance_rule", runs > 1
                    ? String.format(Locale.ROOT, "ratio: max(floor, %.1f x (slowest / median - 1)) over %d runs, floor %.2f or "
                    + "the metric's own (GateSuite); alloc: the metric's allowance (%.1f B/op unless stated) + background / "
                    + "operations per iteration", Calibration.FACTOR, runs, Calibration.FLOOR, GateCheck.DEFAULT_ALLOC_TOLERANCE)
                    : baseline.notes().getOrDefault("tolerance_rule", "defaults (not calibrated)"));
            Baseline next = runs > 1 ? Calibration.baseline(stats, baseline.backgroundAllocBytesPerIteration(), notes)
                    : fromOneRun(all.get(0), metrics, baseline, notes);
            if (only != null) {
                Map<String, Baseline.Entry> merged = new LinkedHashMap<>(baseline.metrics());
                merged.putAll(next.metrics());
                next = new Baseline(merged, next.backgroundAllocBytesPerIteration(), notes);
            }
            next.write(baselinePath);
            out.println("perf-gate: wrote " + baselinePath + " - review it with git diff before committing");
            return 0;
        }
        return failedRuns == 0 ? 0 : 1;
    }

    private int cpuNumber() {
        return switch (cpu) {
            case "none" -> -1;
            case "last" -> Runtime.getRuntime().availableProcessors() - 1;
            default -> Integer.parseInt(cpu);
        };
    }

    /** Measures the schedule's probes in order, printing one line per probe. */
    private List<ProbeRunner.Measurement> measure(Schedule schedule, ProbeRunner.Settings settings, Path logs) throws Exception {
        ProbeRunner runner = new ProbeRunner(settings, logs, cpuNumber());
        List<ProbeRunner.Measurement> results = new ArrayList<>();
        long t0 = System.nanoTime();
        List<Probe> probes = schedule.probes();
        for (Probe p : probes) {
            long s = System.nanoTime();
            ProbeRunner.Measurement m = runner.run(p);
            results.add(m);
            out.printf(Locale.ROOT, "[%2d/%d] %-62s %s (%.0f s, load %s)%n", results.size(), probes.size(), p.key(),
                    m.ok() ? GateTable.time(m.nanosPerOp()) + "/op, " + String.format(Locale.ROOT, "%.3f B/op", m.allocBytesPerOp())
                            : "FAILED: " + m.error(), (System.nanoTime() - s) / 1e9, GateTable.load());
        }
        out.printf(Locale.ROOT, "measured %d probes in %.0f s%n", probes.size(), (System.nanoTime() - t0) / 1e9);
        return results;
    }

    private int selfTest(List<Metric> metrics, Baseline baseline, ProbeRunner.Settings settings) throws Exception {
        List<GateSuite.Injection> injections = GateSuite.injections();
        List<List<Metric>> variants = new ArrayList<>();
        variants.add(metrics);
        for (GateSuite.Injection inj : injections) {
            variants.add(inj.apply(metrics));
        }
        Schedule schedule = Schedule.ofVariants(variants);
        out.println("perf-gate --self-test: the gate's probes plus the injected variants (each measured next to the real "
                + "one); every scenario is then judged against the baseline");
        List<ProbeRunner.Measurement> results = measure(schedule, settings, outDir.resolve("logs-self-test"));
        Map<Probe, ProbeRunner.Measurement> measured = schedule.firstOfEach(results);
        GateCheck.Report unchanged = GateCheck.check(metrics, schedule.observe(metrics, results, settings.iterationMillis()), baseline);
        out.println();
        out.println("--- unchanged code ---");
        GateTable.print(unchanged, out);
        GateTable.throughput(measured, out);
        boolean ok = unchanged.passed();
        out.println();
        out.println("self-test: unchanged code " + (ok ? "PASSES" : "FAILS: " + names(unchanged.failures())));
        for (int k = 0; k < injections.size(); k++) {
            GateSuite.Injection inj = injections.get(k);
            List<Metric> regressed = variants.get(k + 1);
            GateCheck.Report r = GateCheck.check(metrics, schedule.observe(regressed, results, settings.iterationMillis()), baseline);
            GateCheck.Row expected = r.row(inj.expected());
            boolean caught = expected != null && (expected.verdict() == GateCheck.Verdict.REGRESSION
                    || expected.verdict() == GateCheck.Verdict.ALLOCATES);
            ok &= caught;
            out.printf(Locale.ROOT, "self-test: injected %-17s (%s): %s%n", inj.name(), inj.description(),
                    caught ? "CAUGHT by " + inj.expected() + ": " + describe(expected)
                            : "NOT CAUGHT: " + inj.expected() + " is " + (expected == null ? "absent" : describe(expected)));
            List<GateCheck.Row> also = r.failures().stream().filter(f -> !f.metric().equals(inj.expected())).toList();
            if (!also.isEmpty()) {
                out.println("           also failing in that scenario: " + names(also));
            }
        }
        out.println("self-test: " + (ok ? "PASSED" : "FAILED"));
        return ok ? 0 : 1;
    }

    private static String describe(GateCheck.Row r) {
        return switch (r.kind()) {
            case RATIO -> String.format(Locale.ROOT, "%s, ratio %.4g vs baseline %.4g = x%.3f, limit %.4g%s", r.verdict(), r.now(),
                    r.baseline(), r.change(), r.limit(), r.note().isEmpty() ? "" : " (" + r.note() + ")");
            case ALLOC -> String.format(Locale.ROOT, "%s, %.2f B/op, allowed %.2f", r.verdict(), r.now(), r.limit());
            case INFO -> r.verdict().toString();
        };
    }

    private static String names(List<GateCheck.Row> rows) {
        return String.join(", ", rows.stream().map(r -> r.metric() + " (" + r.verdict() + ")").toList());
    }

    private void printSpread(Map<String, Calibration.Stats> stats, Baseline baseline) {
        out.printf(Locale.ROOT, "%nspread over %d runs (spread = (max - min) / median; slowest = max / median - 1; tolerance rule "
                + "for ratios: max(floor, %.1f x slowest), floor %.2f unless the metric has its own)%n",
                stats.values().stream().mapToInt(s -> s.values().length).max().orElse(0), Calibration.FACTOR, Calibration.FLOOR);
        String fmt = "%-30s %12s %12s %12s %8s %8s %10s %10s%n";
        out.printf(Locale.ROOT, fmt, "metric", "min", "median", "max", "spread", "slowest", "suggested", "baseline");
        for (Map.Entry<String, Calibration.Stats> e : stats.entrySet()) {
            Calibration.Stats s = e.getValue();
            Baseline.Entry b = baseline.metrics().get(e.getKey());
            out.printf(Locale.ROOT, fmt, e.getKey(), GateTable.value(s.kind(), s.min()), GateTable.value(s.kind(), s.median()),
                    GateTable.value(s.kind(), s.max()), pct(s.spread()), pct(s.slowest()),
                    s.kind() == Metric.Kind.INFO ? "" : s.kind() == Metric.Kind.RATIO ? pct(s.suggestedTolerance())
                            : String.format(Locale.ROOT, "%.1f B", s.suggestedTolerance()),
                    b == null || Double.isNaN(b.tolerance()) ? "" : b.kind() == Metric.Kind.RATIO ? pct(b.tolerance())
                            : String.format(Locale.ROOT, "%.1f B", b.tolerance()));
        }
    }

    private static String pct(double v) {
        return String.format(Locale.ROOT, "%.1f%%", v * 100);
    }

    /** The baseline restricted to {@code metrics} (with --only, the others are not "missing"). */
    private static Baseline subset(Baseline b, List<Metric> metrics) {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>();
        for (Metric x : metrics) {
            if (b.metrics().containsKey(x.name())) {
                m.put(x.name(), b.metrics().get(x.name()));
            }
        }
        return new Baseline(m, b.backgroundAllocBytesPerIteration(), b.notes());
    }

    /** Values of one run; tolerances (and spreads) of the old baseline, defaults for new metrics. */
    private static Baseline fromOneRun(Map<String, GateCheck.Observation> obs, List<Metric> metrics, Baseline old,
                                       Map<String, String> notes) {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>();
        for (Metric x : metrics) {
            GateCheck.Observation o = obs.get(x.name());
            if (o == null || Double.isNaN(o.value())) {
                throw new IllegalStateException("cannot write a baseline: " + x.name() + " was not measured ("
                        + (o == null ? "?" : o.error()) + ")");
            }
            Baseline.Entry prev = old.metrics().get(x.name());
            double tol = prev != null ? prev.tolerance() : x.defaultTolerance();
            m.put(x.name(), new Baseline.Entry(x.kind(), x.kind() == Metric.Kind.ALLOC ? Calibration.allocValue(o.value()) : o.value(), tol,
                    prev != null ? prev.spread() : Double.NaN));
        }
        return new Baseline(m, old.backgroundAllocBytesPerIteration(), notes);
    }

    private static void writeResults(Path file, Schedule schedule, List<ProbeRunner.Measurement> results,
                                     Map<String, GateCheck.Observation> obs, GateCheck.Report report) throws Exception {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("machine", GateTable.machine());
        root.put("time", Instant.now().truncatedTo(ChronoUnit.SECONDS).toString());
        root.put("passed", report.passed());
        Map<String, Object> metrics = new LinkedHashMap<>();
        for (GateCheck.Row r : report.rows()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("kind", r.kind().name().toLowerCase(Locale.ROOT));
            row.put("now", finite(r.now()));
            row.put("baseline", finite(r.baseline()));
            row.put("verdict", r.verdict());
            GateCheck.Observation o = obs.get(r.metric());
            row.put("ops_per_iteration", o == null ? null : finite(o.opsPerIteration()));
            metrics.put(r.metric(), row);
        }
        root.put("metrics", metrics);
        List<Object> probes = new ArrayList<>();
        for (int i = 0; i < results.size(); i++) {
            Map<String, Object> p = new LinkedHashMap<>();
            ProbeRunner.Measurement m = results.get(i);
            p.put("probe", schedule.probes().get(i).key());
            p.put("nanos_per_op", finite(m.nanosPerOp()));
            p.put("alloc_bytes_per_op", finite(m.allocBytesPerOp()));
            p.put("iteration_nanos", m.iterationNanos());
            p.put("error", m.error());
            probes.add(p);
        }
        root.put("probes", probes);
        Files.writeString(file, Json.write(root) + "\n");
    }

    private static Double finite(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? null : v;
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new PerfGate(), args));
    }
}
