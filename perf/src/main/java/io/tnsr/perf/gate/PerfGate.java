package io.tnsr.perf.gate;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import io.tnsr.perf.CpuPin;
import java.io.IOException;
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
import io.tnsr.engine.util.TaskProgress;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/perf-gate}: builds the reference commit named in {@code perf/baseline.json}, measures the gate's
 * probes ({@link GateSuite}) in it and in the tree under test side by side ({@link SideBySide}), judges each metric
 * ({@link GateCheck}), prints the table, and exits 1 naming each regression.
 */
@Command(name = "perf-gate", mixinStandardHelpOptions = true, sortOptions = false, usageHelpWidth = 120,
        description = {"Performance regression gate. Builds the reference commit named in perf/baseline.json (the last"
                + " accepted one) and runs each benchmark in it and in this tree, interleaved on this host, then judges"
                + " this tree's time against the reference's, pair by pair, and its allocation per operation (must be 0).",
                "Exit 0: pass; 1: a regression (named in the table); 2: usage or setup error."},
        footer = {"", "Examples:",
                "  tools/perf-gate                                   # the check CI runs (about 9 minutes; 1 when only docs or tests changed)",
                "  tools/perf-gate --self-test                       # proves it catches the injected regressions",
                "  tools/perf-gate --calibrate 10                    # 10 comparisons, even of identical code: pass count and spread",
                "  tools/perf-gate --update-baseline --reason TEXT   # accept HEAD as the new reference (commit it on its own)",
                "  TNSR_JAVA_OPTS=-XX:UseAVX=2 tools/perf-gate --full  # both builds' JVMs with these options"})
public final class PerfGate implements Callable<Integer> {

    @Option(names = "--baseline", paramLabel = "FILE", description = "The file naming the reference (default: perf/baseline.json).")
    Path baselinePath;

    @Option(names = "--reference", paramLabel = "COMMIT", description = "Compare with this commit instead of the baseline's.")
    String referenceOverride;

    @Option(names = "--update-baseline", description = "Accept HEAD: write its commit id into the baseline as the new "
            + "reference (the code must be committed). Measures nothing; commit the file on its own.")
    boolean update;

    @Option(names = "--reason", paramLabel = "TEXT", description = "Why HEAD's performance is accepted (with --update-baseline).")
    String reason;

    @Option(names = "--self-test", description = "Also measure the deliberately regressed variants (package "
            + "io.tnsr.perf.gate.injected) beside the real code; exit 0 only if this tree passes and each variant is caught.")
    boolean selfTest;

    @Option(names = "--calibrate", paramLabel = "N", defaultValue = "0",
            description = "Run the whole comparison N times (also when the code is the reference's) and report the spread of every metric.")
    int calibrate;

    @Option(names = "--full", description = "Compare the timings even when this tree's code is the reference's.")
    boolean full;

    @Option(names = "--only", paramLabel = "REGEX", description = "Only the metrics whose name matches (for development; never in CI).")
    Pattern only;

    @Option(names = "--quick", description = "Fewer, shorter iterations (2 + 2 x 0.15 s): rough figures, for development.")
    boolean quick;

    @Option(names = "--cpu", paramLabel = "N|none", defaultValue = "last",
            description = "Pin every JMH process to this CPU (default: the last one), or none.")
    String cpu;

    @Option(names = "--out", paramLabel = "DIR", description = "Where results and logs go (default: .build/perf-gate).")
    Path outDir;

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /** Where the report goes: stdout, through the progress bar while one is drawn ({@link TaskProgress#above}). */
    private PrintStream out = System.out;

    @Override
    public Integer call() throws Exception {
        try {
            return gate();
        } catch (IOException e) {
            // Setup: the baseline, git, the reference build. Measurements report their own failures per metric.
            System.err.println("perf-gate: " + e.getMessage());
            return 2;
        }
    }

    private int gate() throws IOException, InterruptedException {
        long t0 = System.nanoTime();
        Path home = Paths.get(System.getProperty("tnsr.home", ".")).toAbsolutePath().normalize();
        if (baselinePath == null) {
            baselinePath = home.resolve("perf").resolve("baseline.json");
        }
        if (outDir == null) {
            outDir = home.resolve(".build").resolve("perf-gate");
        }
        if (selfTest && calibrate > 0 || update && (selfTest || calibrate > 0)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--self-test, --calibrate and --update-baseline run alone");
        }
        if (calibrate < 0) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--calibrate must be at least 1, got " + calibrate);
        }
        Git git = new Git(home);
        if (update) {
            return accept(git);
        }
        if (reason != null) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--reason goes with --update-baseline");
        }
        String wanted = referenceOverride;
        Baseline baseline = null;
        if (wanted == null) {
            if (!Files.exists(baselinePath)) {
                System.err.println("perf-gate: no baseline at " + baselinePath + ": name a reference commit with "
                        + "tools/perf-gate --update-baseline --reason TEXT (accepts HEAD)");
                return 2;
            }
            baseline = Baseline.read(baselinePath);
            wanted = baseline.reference();
        }
        String reference = git.commit(wanted);
        if (reference == null) {
            System.err.println("perf-gate: the reference commit " + wanted + " is not in this repository"
                    + (referenceOverride == null ? " (named in " + baselinePath + ")" : "")
                    + "; a shallow clone lacks it: git fetch --unshallow");
            return 2;
        }
        List<String> changes = git.codeChangesSince(reference);
        List<Metric> metrics = GateSuite.metrics();
        if (only != null) {
            metrics = metrics.stream().filter(m -> only.matcher(m.name()).find()).toList();
            if (metrics.isEmpty()) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--only " + only + " matches no metric");
            }
        }
        ForkRunner.Settings settings = quick ? ForkRunner.Settings.QUICK : ForkRunner.Settings.GATE;
        boolean compare = !changes.isEmpty() || full || selfTest || calibrate > 0;
        out.println("perf-gate: " + GateTable.machine());
        out.println("perf-gate: reference " + reference.substring(0, 10) + (baseline != null && !baseline.accepted().isEmpty()
                ? " (accepted " + baseline.accepted() + (baseline.reason().isEmpty() ? "" : ": " + baseline.reason()) + ")" : "")
                + " vs this tree: " + (changes.isEmpty() ? "the same code" : describe(changes)));
        String opts = System.getenv("TNSR_JAVA_OPTS");
        if (opts != null && !opts.isBlank()) {
            out.println("perf-gate: JVM options of both builds (TNSR_JAVA_OPTS): " + opts.strip());
        }
        if (!compare) {
            out.println("perf-gate: only files outside the code (pom.xml, */src/main/, tools/) differ, so the timings would "
                    + "compare the same code: skipped (--full compares anyway). Allocation is still checked.");
        }
        int runs = Math.max(1, calibrate);
        boolean building = compare && !ReferenceBuild.built(home, reference);
        long steps = (building ? 1 : 0) + (long) runs * SideBySide.probes(metrics, compare).size();
        try (TaskProgress progress = TaskProgress.start("perf-gate", steps, TaskProgress.ITEMS)) {
            out = progress.above(System.out);
            try {
                return measure(progress, building, home, git, reference, baseline, changes, metrics, settings, compare, runs, t0);
            } finally {
                if (out != System.out) {
                    out.close();   // its last line, if it lacks a newline; System.out stays open
                }
                out = System.out;
            }
        }
    }

    /**
     * The reference build (one step of {@code progress} when {@code building}), then {@code runs} comparisons of every
     * probe (a step each); prints the tables and verdicts. The exit status.
     */
    private int measure(TaskProgress progress, boolean building, Path home, Git git, String reference, Baseline baseline,
                        List<String> changes, List<Metric> metrics, ForkRunner.Settings settings, boolean compare, int runs,
                        long t0) throws IOException, InterruptedException {
        ForkRunner.Build tree = new ForkRunner.Build("tree", home);
        if (building) {
            progress.message(" building the reference");
        }
        ForkRunner.Build ref = compare ? ReferenceBuild.prepare(home, git, reference, out) : null;
        if (building) {
            progress.stepBy(1);
        }
        out.printf(Locale.ROOT, "perf-gate: %d metrics; %s; JMH forks %s, %d warm-up + %d measured iterations of %d ms, -prof gc%n",
                metrics.size(), compare ? "each probe in rounds of forks of both builds run at once, iterations taken in turns, up to "
                        + GateCheck.MAX_ROUNDS + " rounds" : "allocation probes in this tree only",
                cpuNumber() < 0 ? "not pinned" : "pinned to CPU " + cpuNumber(), settings.warmupIterations(),
                settings.measurementIterations(), settings.iterationMillis());
        Files.createDirectories(outDir);
        List<GateCheck.Report> reports = new ArrayList<>();
        for (int run = 1; run <= runs; run++) {
            if (runs > 1) {
                out.printf(Locale.ROOT, "%n=== run %d of %d ===%n", run, runs);
            }
            ForkRunner runner = new ForkRunner(settings, outDir.resolve(runs > 1 ? "logs-run" + run : "logs"), cpuNumber());
            List<GateSuite.Injection> injections = selfTest ? GateSuite.injections().stream()
                    .filter(i -> metricNamed(i.expected(), GateSuite.metrics()) != null).toList() : List.of();
            SideBySide.Measurements m = new SideBySide(runner, out, progress).measure(metrics, ref, tree, injections);
            GateCheck.Report report = report(metrics, m, compare);
            reports.add(report);
            out.println();
            GateTable.print(report, out);
            writeResults(outDir.resolve(runs > 1 ? "run" + run + ".json" : "last-run.json"), reference, changes, m, report);
            if (selfTest) {
                return selfTestVerdict(report, metrics, m, injections, t0);
            }
            for (GateCheck.Row r : report.failures()) {
                out.println("perf-gate: FAIL " + r.metric() + ": " + r.verdict() + (r.note().isEmpty() ? "" : " - " + r.note()));
            }
            out.printf(Locale.ROOT, "perf-gate: %s (%d metrics) in %.0f s%n", report.passed() ? "PASS" : "FAIL",
                    report.rows().size(), (System.nanoTime() - t0) / 1e9);
        }
        if (runs > 1) {
            printSpread(metrics, reports);
        }
        return reports.stream().allMatch(GateCheck.Report::passed) ? 0 : 1;
    }

    /** Each metric's row: compared against the reference, or (without one) allocation only. */
    static GateCheck.Report report(List<Metric> metrics, SideBySide.Measurements m, boolean compared) {
        List<GateCheck.Row> rows = new ArrayList<>();
        for (Metric x : metrics) {
            if (x.kind().compared()) {
                if (compared) {
                    rows.add(GateCheck.compare(x, m.rounds(x.probe(), SideBySide.TREE)));
                }
            } else {
                rows.add(GateCheck.alloc(x, m.all(x.probe(), SideBySide.TREE)));
            }
        }
        return new GateCheck.Report(rows);
    }

    private int selfTestVerdict(GateCheck.Report unchanged, List<Metric> metrics, SideBySide.Measurements m,
                                List<GateSuite.Injection> injections, long t0) {
        boolean ok = unchanged.passed();
        out.println();
        out.println("self-test: this tree against the reference " + (ok ? "PASSES"
                : "FAILS: " + String.join(", ", unchanged.failures().stream().map(GateCheck.Row::metric).toList())));
        for (GateSuite.Injection inj : GateSuite.injections()) {
            Metric x = metricNamed(inj.expected(), metrics);
            if (x == null || !injections.contains(inj)) {
                out.printf(Locale.ROOT, "self-test: injected %-16s not measured (--only leaves out %s)%n", inj.name(), inj.expected());
                continue;
            }
            GateCheck.Row r = x.kind().compared() ? GateCheck.compare(x, m.rounds(x.probe(), inj.name()))
                    : GateCheck.alloc(x, m.all(x.probe(), inj.name()));
            boolean caught = r.verdict() == GateCheck.Verdict.REGRESSION || r.verdict() == GateCheck.Verdict.ALLOCATES;
            ok &= caught;
            out.printf(Locale.ROOT, "self-test: injected %-16s (%s): %s %s: %s%n", inj.name(), inj.description(),
                    caught ? "CAUGHT by" : "NOT CAUGHT by", inj.expected(), describe(r));
        }
        out.printf(Locale.ROOT, "self-test: %s in %.0f s%n", ok ? "PASSED" : "FAILED", (System.nanoTime() - t0) / 1e9);
        return ok ? 0 : 1;
    }

    private static String describe(GateCheck.Row r) {
        if (r.kind() == Metric.Kind.ALLOC) {
            return String.format(Locale.ROOT, "%s, %.2f B/op, allowed %.2f", r.verdict(), r.now(), r.limit());
        }
        return String.format(Locale.ROOT, "%s, x%.3f the reference (band %.3f..%.3f, %d forks each), limit x%.2f", r.verdict(), r.change(),
                r.low(), r.high(), r.pairs(), r.limit());
    }

    private static Metric metricNamed(String name, List<Metric> metrics) {
        return metrics.stream().filter(m -> m.name().equals(name)).findFirst().orElse(null);
    }

    /** "3 files of code differ: engine/src/main/..., ..." */
    static String describe(List<String> changes) {
        int shown = Math.min(3, changes.size());
        return changes.size() + (changes.size() == 1 ? " file" : " files") + " of code differ (" + String.join(", ", changes.subList(0, shown))
                + (changes.size() > shown ? ", ..." : "") + ")";
    }

    /** --update-baseline: HEAD becomes the reference. */
    private int accept(Git git) throws IOException {
        if (reason == null || reason.isBlank()) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--update-baseline needs --reason TEXT: why HEAD's "
                    + "performance is accepted (it goes into the baseline; say it in the commit message too)");
        }
        if (referenceOverride != null) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--update-baseline accepts HEAD; --reference does not apply");
        }
        String head = git.commit("HEAD");
        if (head == null) {
            System.err.println("perf-gate: this repository has no commit yet");
            return 2;
        }
        List<String> uncommitted = git.codeChangesSince(head);
        if (!uncommitted.isEmpty()) {
            System.err.println("perf-gate: the reference must be a commit, and this tree's code differs from HEAD: "
                    + describe(uncommitted) + ". Commit the change first, then accept it.");
            return 2;
        }
        Baseline old = null;
        if (Files.exists(baselinePath)) {
            try {
                old = Baseline.read(baselinePath);
            } catch (IOException e) {
                out.println("perf-gate: replacing " + baselinePath + ", which names no reference: " + e.getMessage());
            }
        }
        if (old != null) {
            if (old.reference().equals(head)) {
                out.println("perf-gate: " + baselinePath + " already names HEAD " + head.substring(0, 10));
                return 0;
            }
            if (git.commit(old.reference()) != null && git.codeChangesSince(old.reference()).isEmpty()) {
                out.println("perf-gate: note: HEAD holds the same code as the old reference " + old.shortReference());
            }
        }
        Baseline next = new Baseline(head, Instant.now().truncatedTo(ChronoUnit.SECONDS).toString(), reason.strip());
        next.write(baselinePath);
        out.println("perf-gate: " + baselinePath + " now names " + head.substring(0, 10) + " as the reference. Commit it on its own:");
        out.println("  git commit -m \"perf: accept " + head.substring(0, 10) + " as the reference: " + reason.strip() + "\" "
                + home().relativize(baselinePath.toAbsolutePath()));
        return 0;
    }

    private static Path home() {
        return Paths.get(System.getProperty("tnsr.home", ".")).toAbsolutePath().normalize();
    }

    /** The CPU {@code --cpu} names, checked against the CPUs this process may use ({@link CpuPin}), or -1 for none. */
    private int cpuNumber() {
        String cpus;
        try {
            cpus = CpuPin.resolve(cpu, 1);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpu: " + e.getMessage());
        }
        if (cpus == null) {
            return -1;
        }
        List<Integer> one = CpuPin.parseList(cpus);
        if (one.size() != 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpu takes one CPU, last or none, got '" + cpu + "'");
        }
        return one.get(0);
    }

    /** Per metric, over the calibration runs: the change (or B/op), its range, and how close it came to the limit. */
    private void printSpread(List<Metric> metrics, List<GateCheck.Report> reports) {
        out.printf(Locale.ROOT, "%nover %d runs (change of each run, tree / reference; band = the lowest and highest "
                + "ends of a run's band)%n", reports.size());
        String fmt = "%-30s %10s %10s %10s %8s %16s %10s %8s%n";
        out.printf(Locale.ROOT, fmt, "metric", "min", "median", "max", "spread", "band", "limit", "passed");
        for (Metric m : metrics) {
            List<GateCheck.Row> rows = reports.stream().map(r -> r.row(m.name())).filter(r -> r != null).toList();
            double[] v = rows.stream().mapToDouble(r -> m.kind().compared() ? r.change() : r.now()).filter(x -> !Double.isNaN(x)).toArray();
            if (v.length == 0) {
                continue;
            }
            double lo = rows.stream().mapToDouble(GateCheck.Row::low).filter(x -> !Double.isNaN(x)).min().orElse(Double.NaN);
            double hi = rows.stream().mapToDouble(GateCheck.Row::high).filter(x -> !Double.isNaN(x)).max().orElse(Double.NaN);
            double min = java.util.Arrays.stream(v).min().orElseThrow();
            double max = java.util.Arrays.stream(v).max().orElseThrow();
            double med = ForkRunner.median(v);
            long passed = rows.stream().filter(r -> !r.verdict().fails()).count();
            boolean alloc = !m.kind().compared();
            out.printf(Locale.ROOT, fmt, m.name(), num(min, alloc), num(med, alloc), num(max, alloc),
                    alloc ? "" : String.format(Locale.ROOT, "%.1f%%", 100 * (max - min) / med),
                    Double.isNaN(lo) ? "" : String.format(Locale.ROOT, "%.3f..%.3f", lo, hi),
                    alloc ? GateTable.bytes(rows.get(0).limit()) : String.format(Locale.ROOT, "x%.2f", 1 + m.tolerance()),
                    passed + "/" + rows.size());
        }
        long ok = reports.stream().filter(GateCheck.Report::passed).count();
        out.printf(Locale.ROOT, "perf-gate: %d of %d runs passed%n", ok, reports.size());
    }

    private static String num(double v, boolean alloc) {
        return alloc ? GateTable.bytes(v) : String.format(Locale.ROOT, "x%.3f", v);
    }

    private static void writeResults(Path file, String reference, List<String> changes, SideBySide.Measurements m,
                                      GateCheck.Report report) throws IOException {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("machine", GateTable.machine());
        root.put("time", Instant.now().truncatedTo(ChronoUnit.SECONDS).toString());
        root.put("reference", reference);
        root.put("code_changes", changes);
        root.put("java_options", System.getenv().getOrDefault("TNSR_JAVA_OPTS", ""));
        root.put("passed", report.passed());
        Map<String, Object> rows = new LinkedHashMap<>();
        for (GateCheck.Row r : report.rows()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("kind", r.kind().name().toLowerCase(Locale.ROOT));
            row.put("reference", finite(r.reference()));
            row.put("now", finite(r.now()));
            row.put("change", finite(r.change()));
            row.put("pair_low", finite(r.low()));
            row.put("pair_high", finite(r.high()));
            row.put("pairs", r.pairs());
            row.put("limit", finite(r.limit()));
            row.put("verdict", r.verdict().name());
            row.put("note", r.note());
            rows.put(r.metric(), row);
        }
        root.put("metrics", rows);
        List<Object> samples = new ArrayList<>();
        for (Map.Entry<Probe, List<Map<String, List<Sample>>>> e : m.samples().entrySet()) {
            List<Map<String, List<Sample>>> rounds = e.getValue();
            for (int round = 0; round < rounds.size(); round++) {
                for (Map.Entry<String, List<Sample>> c : rounds.get(round).entrySet()) {
                    for (Sample s : c.getValue()) {
                        Map<String, Object> x = new LinkedHashMap<>();
                        x.put("probe", e.getKey().key());
                        x.put("round", round + 1);
                        x.put("build", c.getKey());
                        x.put("nanos", finite(s.time()));
                        x.put("p99_nanos", finite(s.p99()));
                        x.put("alloc_bytes_per_op", finite(s.alloc()));
                        x.put("iterations_nanos", s.iterations());
                        x.put("error", s.error());
                        samples.add(x);
                    }
                }
            }
        }
        root.put("samples", samples);
        Files.writeString(file, new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT).writeValueAsString(root) + "\n");
    }

    private static Double finite(double v) {
        return Double.isNaN(v) || Double.isInfinite(v) ? null : v;
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new PerfGate(), args));
    }
}
