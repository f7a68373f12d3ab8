package io.tnsr.engine.metrics;

import com.fasterxml.jackson.core.type.TypeReference;
import io.tnsr.engine.util.Jackson;
import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

/**
 * The whole-run view of a run directory: every {@code *.hlog} interval log read back with HdrHistogram's own
 * reader and added up per metric, the counters of the {@code *.counters} files, and the run facts in {@code run.json}. The
 * run summary, the exports ({@link #export}: {@code <metric>.hgrm} and {@code summary.json}) and
 * {@code tools/latency-report} are all computed from this, so there is one bookkeeping only.
 *
 * <pre>{@code
 * LatencySummary l = LatencySummary.read(runDir);     // after every process of the run closed its MetricsLog
 * l.export(runDir);                                   // <metric>.hgrm for each metric, summary.json
 * System.out.print(l.table(true));
 * }</pre>
 *
 * <p>Reading while processes still write gives a partial view (the last interval of each log is missing).
 */
public final class LatencySummary {
    /** Percentiles reported everywhere (and the maximum). */
    public static final double[] PERCENTILES = {50, 90, 99, 99.9};
    /** The export written next to the logs. */
    public static final String SUMMARY_FILE = "summary.json";
    /** Run facts written by the coordinator at the start of a run (mode, rate, hosts, stall threshold). */
    public static final String RUN_FILE = "run.json";
    /** .hgrm values are microseconds: HdrHistogram's {@code outputPercentileDistribution(out, 1000.0)} of ns. */
    public static final double HGRM_SCALING = 1000.0;

    static final String HEADER_METRIC = "metric: ";
    static final String HEADER_DESCRIPTION = "description: ";
    static final String HEADER_UNIT = "unit: ";
    static final String HEADER_CORRECTION = "coordinated omission: ";

    /** The note on one-way hops when every stage shares one clock. */
    public static final String SAME_HOST_CLOCK = "one-way hop = receiver's System.nanoTime() at decode - sender's trace "
            + "stamp; every stage of this run is on one host, so both read the same CLOCK_MONOTONIC";
    /** The note when stages are on different hosts. */
    public static final String CROSS_HOST_CLOCK = "hops marked x-host join processes on different hosts: their one-way "
            + "figures subtract two unrelated clocks and mean nothing; use round-trip-derived figures instead "
            + "(coordinator-step, on one clock, minus the stages' residence times)";

    /** What a log's header says about its metric (defaults for logs written before headers existed). */
    public record Info(String description, Correction correction) {
        static final Info UNKNOWN = new Info("", Correction.PER_FRAME);
    }

    private final Map<String, Histogram> histograms;
    private final Map<String, Info> info;
    private final Map<String, Long> counters;
    private final Map<String, String> counterDescriptions;
    private final Map<String, Object> run;

    private LatencySummary(Map<String, Histogram> histograms, Map<String, Info> info, Map<String, Long> counters,
                           Map<String, String> counterDescriptions, Map<String, Object> run) {
        this.histograms = histograms;
        this.info = info;
        this.counters = counters;
        this.counterDescriptions = counterDescriptions;
        this.run = run;
    }

    /** Reads every metric of {@code dir}. */
    public static LatencySummary read(Path dir) {
        Map<String, Histogram> h = new TreeMap<>(LatencySummary::metricOrder);
        Map<String, Info> info = new TreeMap<>(LatencySummary::metricOrder);
        Map<String, Long> c = new TreeMap<>(LatencySummary::metricOrder);
        Map<String, String> cd = new TreeMap<>(LatencySummary::metricOrder);
        Map<String, Object> run = Map.of();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
            for (Path f : files) {
                String name = f.getFileName().toString();
                if (name.endsWith(".hlog")) {
                    String metric = name.substring(0, name.length() - 5);
                    h.put(metric, readLog(f));
                    info.put(metric, readHeader(f));
                } else if (name.endsWith(CounterFile.SUFFIX)) {
                    for (CounterFile.Reading r : CounterFile.read(f).values()) {
                        c.put(r.name(), r.value());
                        cd.put(r.name(), r.description());
                    }
                } else if (name.equals(RUN_FILE)) {
                    run = Jackson.MAPPER.readValue(f.toFile(), new TypeReference<LinkedHashMap<String, Object>>() { });
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read metrics in " + dir, e);
        }
        return new LatencySummary(h, info, c, cd, run);
    }

    /**
     * All intervals of one .hlog file, added up. A file the reader cannot parse (cut short, edited, not a log) is an
     * {@link IllegalArgumentException} naming it, not the reader's own exception.
     */
    public static Histogram readLog(Path file) throws FileNotFoundException {
        Histogram total = new Histogram(1, LatencyMetric.HIGHEST, LatencyMetric.DIGITS);
        HistogramLogReader r = new HistogramLogReader(file.toFile());
        try {
            EncodableHistogram e;
            while ((e = next(r, file)) != null) {
                if (!(e instanceof Histogram h)) {
                    throw new IllegalArgumentException(file + ": holds a " + e.getClass().getSimpleName()
                            + " interval, where a latency log holds integer histograms");
                }
                total.add(h);
            }
        } finally {
            r.close();
        }
        return total;
    }

    /** The next interval of {@code file}, or null at its end; what the reader throws on a broken file, named. */
    private static EncodableHistogram next(HistogramLogReader r, Path file) {
        try {
            return r.nextIntervalHistogram();
        } catch (RuntimeException e) {
            throw new IllegalArgumentException(file + ": not a complete HdrHistogram interval log (cut short or corrupt?): "
                    + (e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage()), e);
        }
    }

    /** The {@code #[key: value]} comment lines {@link MetricsLog} writes before the first interval. */
    private static Info readHeader(Path file) throws IOException {
        String description = "";
        Correction correction = null;
        try (BufferedReader r = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            String line;
            while ((line = r.readLine()) != null && line.startsWith("#")) {
                if (!line.startsWith("#[") || !line.endsWith("]")) {
                    continue;
                }
                String body = line.substring(2, line.length() - 1);
                if (body.startsWith(HEADER_DESCRIPTION)) {
                    description = body.substring(HEADER_DESCRIPTION.length());
                } else if (body.startsWith(HEADER_CORRECTION)) {
                    correction = Correction.parse(body.substring(HEADER_CORRECTION.length()));
                }
            }
        }
        return new Info(description, correction != null ? correction : Info.UNKNOWN.correction());
    }

    /** Hops first in pipeline order, then stage metrics, then the coordinator's, then end-to-end. */
    static int metricOrder(String a, String b) {
        return key(a).compareTo(key(b));
    }

    private static final Pattern NUMBER = Pattern.compile("\\d+");

    private static String key(String m) {
        String group;
        if (m.startsWith("hop-coordinator")) {
            group = "0";
        } else if (m.startsWith("hop-")) {
            group = m.endsWith("-coordinator") ? "2" : "1";
        } else if (m.startsWith("stage")) {
            group = "3";
        } else if (m.startsWith("coordinator")) {
            group = "4";
        } else {
            group = "5";
        }
        // stage10 after stage9: numbers compare by value
        Matcher n = NUMBER.matcher(m);
        StringBuilder sb = new StringBuilder(group);
        while (n.find()) {
            n.appendReplacement(sb, String.format(Locale.ROOT, "%09d", Long.parseLong(n.group())));
        }
        n.appendTail(sb);
        return sb.toString();
    }

    public Map<String, Histogram> histograms() {
        return histograms;
    }

    /** What the log header of {@code metric} says (defaults when it says nothing). */
    public Info info(String metric) {
        return info.getOrDefault(metric, Info.UNKNOWN);
    }

    public Map<String, Long> counters() {
        return counters;
    }

    /** The run facts of {@code run.json} (empty when the directory has none). */
    public Map<String, Object> run() {
        return run;
    }

    /** Hops whose two ends are on different hosts, as the run recorded them. */
    public Set<String> crossHostHops() {
        Object o = run.get("cross_host_hops");
        Set<String> s = new LinkedHashSet<>();
        if (o instanceof List<?> l) {
            for (Object x : l) {
                s.add(String.valueOf(x));
            }
        }
        return s;
    }

    /** "closed loop", "open loop at 50/s", or "" when the run did not say. */
    public String modeDescription() {
        Object mode = run.get("mode");
        if ("open-loop".equals(mode)) {
            return String.format(Locale.ROOT, "open loop at %s sequences/s", number(run.get("rate_per_second")));
        }
        return "closed-loop".equals(mode) ? "closed loop" : "";
    }

    private static String number(Object o) {
        if (o instanceof Number n) {
            double d = n.doubleValue();
            return d == Math.rint(d) ? String.valueOf((long) d) : String.valueOf(d);
        }
        return String.valueOf(o);
    }

    // ---- JSON ----------------------------------------------------------------------------------------------

    private static String percentileKey(double p) {
        return "p" + (p == Math.rint(p) ? String.valueOf((int) p) : String.valueOf(p).replace('.', '_')) + "_us";
    }

    private static Map<String, Object> row(Histogram h) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("count", h.getTotalCount());
        for (double p : PERCENTILES) {
            row.put(percentileKey(p), micros(h.getValueAtPercentile(p)));
        }
        row.put("max_us", micros(h.getMaxValue()));
        return row;
    }

    /** {metric: {count, p50_us, p90_us, p99_us, p99_9_us, max_us, co_corrected}} for run-pipeline's --json. */
    public Map<String, Object> toJsonMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
            Map<String, Object> row = row(e.getValue());
            row.put("co_corrected", info(e.getKey()).correction().corrected());
            m.put(e.getKey(), row);
        }
        return m;
    }

    /** The content of {@code summary.json}: run facts, notes, and per metric and counter the figures. */
    public Map<String, Object> summaryMap() {
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("unit", "microseconds (recorded in nanoseconds, 3 significant digits)");
        root.put("source", "the .hlog interval logs of this directory, added up per metric");
        root.put("run", run);
        Set<String> crossHost = crossHostHops();
        Map<String, Object> clock = new LinkedHashMap<>();
        clock.put("same_host", crossHost.isEmpty());
        clock.put("note", crossHost.isEmpty() ? SAME_HOST_CLOCK : CROSS_HOST_CLOCK);
        clock.put("cross_host_hops", new ArrayList<>(crossHost));
        root.put("clock", clock);
        List<String> corrected = new ArrayList<>();
        List<String> uncorrected = new ArrayList<>();
        Map<String, List<String>> byNote = new LinkedHashMap<>();
        Map<String, Object> metrics = new LinkedHashMap<>();
        for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
            Info i = info(e.getKey());
            Map<String, Object> row = row(e.getValue());
            row.put("mean_us", micros(Math.round(e.getValue().getMean())));
            row.put("co_corrected", i.correction().corrected());
            if (crossHost.contains(e.getKey())) {
                row.put("cross_host", true);
            }
            row.put("description", i.description());
            metrics.put(e.getKey(), row);
            (i.correction().corrected() ? corrected : uncorrected).add(e.getKey());
            byNote.computeIfAbsent(i.correction().describe(), k -> new ArrayList<>()).add(e.getKey());
        }
        Map<String, Object> co = new LinkedHashMap<>();
        co.put("corrected", corrected);
        co.put("uncorrected", uncorrected);
        List<Object> notes = new ArrayList<>();
        byNote.forEach((note, names) -> notes.add(Map.of("metrics", names, "note", note)));
        co.put("notes", notes);
        root.put("coordinated_omission", co);
        root.put("metrics", metrics);
        Map<String, Object> cs = new LinkedHashMap<>();
        for (Map.Entry<String, Long> e : counters.entrySet()) {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("count", e.getValue());
            row.put("description", counterDescriptions.getOrDefault(e.getKey(), ""));
            cs.put(e.getKey(), row);
        }
        root.put("counters", cs);
        return root;
    }

    /** JSON with one top-level key per line and one metric per line: diffable, greppable. */
    static String pretty(Map<String, Object> root) {
        return Jackson.pretty(root) + "\n";
    }

    private static double micros(long nanos) {
        return Math.round(nanos / 10.0) / 100.0;
    }

    // ---- exports --------------------------------------------------------------------------------------------

    /**
     * Writes, into {@code dir}, {@code <metric>.hgrm} for every metric (HdrHistogram's percentile distribution,
     * values in microseconds, the format its plotter reads) and {@code summary.json}.
     */
    public void export(Path dir) {
        try {
            for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
                try (PrintStream out = new PrintStream(Files.newOutputStream(dir.resolve(e.getKey() + ".hgrm")), false,
                        StandardCharsets.UTF_8)) {
                    writeHgrm(out, e.getKey(), e.getValue());
                }
            }
            Files.writeString(dir.resolve(SUMMARY_FILE), pretty(summaryMap()));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the latency exports to " + dir, e);
        }
    }

    /** One metric's .hgrm: comment lines (skipped by the plotter), then HdrHistogram's own percentile output. */
    void writeHgrm(PrintStream out, String metric, Histogram h) {
        Info i = info(metric);
        out.println("#[" + HEADER_METRIC + metric + "]");
        if (!i.description().isEmpty()) {
            out.println("#[" + HEADER_DESCRIPTION + i.description() + "]");
        }
        out.println("#[" + HEADER_UNIT + "microseconds (recorded in ns; outputPercentileDistribution scaled by 1000)]");
        out.println("#[" + HEADER_CORRECTION + i.correction().describe() + "]");
        h.outputPercentileDistribution(out, HGRM_SCALING);
    }

    // ---- tables ---------------------------------------------------------------------------------------------

    private static final String ROW_NAME = "%-34s";

    private String displayName(String metric) {
        return crossHostHops().contains(metric) ? metric + " [x-host]" : metric;
    }

    /** A table for people: one row per metric (microseconds), the counters, and, with notes, what they mean. */
    public String table(boolean notes) {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, ROW_NAME + " %9s %10s %10s %10s %10s %10s  %s%n", "latency (us)", "count",
                "p50", "p90", "p99", "p99.9", "max", "co"));
        for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
            Histogram h = e.getValue();
            if (h.getTotalCount() == 0) {
                continue;
            }
            sb.append(String.format(Locale.ROOT, ROW_NAME + " %9d", displayName(e.getKey()), h.getTotalCount()));
            for (double p : PERCENTILES) {
                sb.append(String.format(Locale.ROOT, " %10.1f", h.getValueAtPercentile(p) / 1e3));
            }
            sb.append(String.format(Locale.ROOT, " %10.1f  %s%n", h.getMaxValue() / 1e3,
                    info(e.getKey()).correction().corrected() ? "yes" : "no"));
        }
        for (Map.Entry<String, Long> e : counters.entrySet()) {
            sb.append(String.format(Locale.ROOT, ROW_NAME + " %9d  %s%n", e.getKey(), e.getValue(),
                    counterDescriptions.getOrDefault(e.getKey(), "")));
        }
        if (notes) {
            sb.append(notes());
        }
        return sb.toString();
    }

    /** What the "co" column and the hop figures mean for this run. */
    public String notes() {
        StringBuilder sb = new StringBuilder();
        Map<String, String> corrected = new LinkedHashMap<>();
        Map<String, String> uncorrected = new LinkedHashMap<>();   // note -> metrics with a note of their own
        for (String m : histograms.keySet()) {
            Correction c = info(m).correction();
            if (histograms.get(m).getTotalCount() == 0) {
                continue;
            }
            if (c.corrected()) {
                corrected.merge(c.note(), m, (a, b) -> a + ", " + b);
            } else if (!c.note().equals(Correction.PER_FRAME.note())) {
                uncorrected.merge(c.note(), m, (a, b) -> a + ", " + b);
            }
        }
        sb.append("co (coordinated omission): ");
        if (corrected.isEmpty()) {
            sb.append("no metric is corrected");
        } else {
            List<String> parts = new ArrayList<>();
            corrected.forEach((note, names) -> parts.add(names + " measured from " + note));
            sb.append(String.join("; ", parts));
        }
        uncorrected.forEach((note, names) -> sb.append(String.format(Locale.ROOT, "%n    %s (\"no\"): %s", names, note)));
        sb.append(String.format(Locale.ROOT, "%n    the rest (\"no\") are %s%n", Correction.PER_FRAME.note()));
        sb.append(crossHostHops().isEmpty() ? "clock: " + SAME_HOST_CLOCK : "clock: " + CROSS_HOST_CLOCK).append('\n');
        return sb.toString();
    }

    /**
     * Two runs side by side: per metric the count and, for each percentile and the max, A's value, B's value
     * and B/A (above 1: B is slower).
     */
    public static String compare(LatencySummary a, LatencySummary b) {
        Set<String> names = new TreeSet<>(LatencySummary::metricOrder);
        names.addAll(a.histograms.keySet());
        names.addAll(b.histograms.keySet());
        Set<String> counterNames = new TreeSet<>(LatencySummary::metricOrder);
        counterNames.addAll(a.counters.keySet());
        counterNames.addAll(b.counters.keySet());
        int width = "latency (us)".length();
        for (String m : names) {
            width = Math.max(width, m.length() + " [x-host]".length());
        }
        for (String c : counterNames) {
            width = Math.max(width, c.length());
        }
        String rowName = "%-" + width + "s";
        StringBuilder sb = new StringBuilder();
        String[] heads = {"p50", "p90", "p99", "p99.9", "max"};
        sb.append(String.format(Locale.ROOT, rowName + " %7s %7s", "latency (us)", "count A", "count B"));
        for (String h : heads) {
            sb.append(String.format(Locale.ROOT, " | %7s %7s %5s", h + " A", h + " B", "B/A"));
        }
        sb.append(String.format(Locale.ROOT, "  co A/B%n"));
        Histogram empty = new Histogram(1, LatencyMetric.HIGHEST, LatencyMetric.DIGITS);
        for (String m : names) {
            Histogram ha = a.histograms.getOrDefault(m, empty);
            Histogram hb = b.histograms.getOrDefault(m, empty);
            if (ha.getTotalCount() == 0 && hb.getTotalCount() == 0) {
                continue;
            }
            String name = a.crossHostHops().contains(m) || b.crossHostHops().contains(m) ? m + " [x-host]" : m;
            sb.append(String.format(Locale.ROOT, rowName + " %7d %7d", name, ha.getTotalCount(), hb.getTotalCount()));
            for (int i = 0; i <= PERCENTILES.length; i++) {
                double va = value(ha, i);
                double vb = value(hb, i);
                sb.append(String.format(Locale.ROOT, " | %7s %7s %5s", cell(va, ha), cell(vb, hb), ratio(va, ha, vb, hb)));
            }
            sb.append("  ").append(coMark(a, m)).append('/').append(coMark(b, m)).append('\n');
        }
        for (String c : counterNames) {
            Long ca = a.counters.get(c);
            Long cb = b.counters.get(c);
            sb.append(String.format(Locale.ROOT, rowName + " %7s %7s  %s%n", c, ca == null ? "-" : ca, cb == null ? "-" : cb,
                    a.counterDescriptions.getOrDefault(c, b.counterDescriptions.getOrDefault(c, ""))));
        }
        return sb.toString();
    }

    private static String coMark(LatencySummary s, String m) {
        return !s.histograms.containsKey(m) ? "-" : s.info(m).correction().corrected() ? "yes" : "no";
    }

    /** Microseconds at percentile index i (PERCENTILES.length = the max). */
    private static double value(Histogram h, int i) {
        return (i < PERCENTILES.length ? h.getValueAtPercentile(PERCENTILES[i]) : h.getMaxValue()) / 1e3;
    }

    /** Microseconds in at most 7 characters: 2 decimals below 10, 1 below 1000, none above. */
    private static String cell(double v, Histogram h) {
        if (h.getTotalCount() == 0) {
            return "-";
        }
        return String.format(Locale.ROOT, v < 10 ? "%.2f" : v < 1000 ? "%.1f" : "%.0f", v);
    }

    private static String ratio(double a, Histogram ha, double b, Histogram hb) {
        if (ha.getTotalCount() == 0 || hb.getTotalCount() == 0 || a <= 0) {
            return "-";
        }
        double r = b / a;
        return String.format(Locale.ROOT, r < 10 ? "%.2f" : r < 100 ? "%.1f" : "%.0f", r);
    }
}
