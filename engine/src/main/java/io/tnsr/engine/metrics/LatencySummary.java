package io.tnsr.engine.metrics;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;

/**
 * The whole-run view of a run directory: every {@code *.hlog} interval log read back with HdrHistogram's own
 * reader and added up per metric, plus the {@code *.count} counters. The run summary and the exports are
 * computed from this, so there is one bookkeeping only.
 */
public final class LatencySummary {
    /** Percentiles reported everywhere. */
    public static final double[] PERCENTILES = {50, 90, 99, 99.9};

    private final Map<String, Histogram> histograms;
    private final Map<String, Long> counters;

    private LatencySummary(Map<String, Histogram> histograms, Map<String, Long> counters) {
        this.histograms = histograms;
        this.counters = counters;
    }

    /** Reads every metric of {@code dir}. */
    public static LatencySummary read(Path dir) {
        Map<String, Histogram> h = new TreeMap<>(LatencySummary::metricOrder);
        Map<String, Long> c = new TreeMap<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
            for (Path f : files) {
                String name = f.getFileName().toString();
                if (name.endsWith(".hlog")) {
                    h.put(name.substring(0, name.length() - 5), readLog(f));
                } else if (name.endsWith(".count")) {
                    c.put(name.substring(0, name.length() - 6), Long.parseLong(Files.readString(f).trim()));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read metrics in " + dir, e);
        }
        return new LatencySummary(h, c);
    }

    /** All intervals of one .hlog file, added up. */
    public static Histogram readLog(Path file) throws FileNotFoundException {
        Histogram total = new Histogram(1, LatencyMetric.HIGHEST, 3);
        HistogramLogReader r = new HistogramLogReader(file.toFile());
        try {
            EncodableHistogram e;
            while ((e = r.nextIntervalHistogram()) != null) {
                total.add((Histogram) e);
            }
        } finally {
            r.close();
        }
        return total;
    }

    /** Hops first in pipeline order, then stage metrics, then end-to-end. */
    static int metricOrder(String a, String b) {
        return key(a).compareTo(key(b));
    }

    private static String key(String m) {
        if (m.startsWith("hop-coordinator")) {
            return "0" + m;
        }
        if (m.startsWith("hop-")) {
            return m.endsWith("-coordinator") ? "2" + m : "1" + m;
        }
        if (m.startsWith("stage")) {
            return "3" + m;
        }
        return "4" + m;
    }

    public Map<String, Histogram> histograms() {
        return histograms;
    }

    public Map<String, Long> counters() {
        return counters;
    }

    /** {metric: {count, p50_us, p90_us, p99_us, p99_9_us, max_us}} for JSON. */
    public Map<String, Object> toJsonMap() {
        Map<String, Object> m = new LinkedHashMap<>();
        for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
            Histogram h = e.getValue();
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("count", h.getTotalCount());
            for (double p : PERCENTILES) {
                row.put("p" + (p == Math.rint(p) ? String.valueOf((int) p) : String.valueOf(p).replace('.', '_')) + "_us",
                        micros(h.getValueAtPercentile(p)));
            }
            row.put("max_us", micros(h.getMaxValue()));
            m.put(e.getKey(), row);
        }
        return m;
    }

    private static double micros(long nanos) {
        return Math.round(nanos / 10.0) / 100.0;
    }

    /** A table for people: one row per metric, microseconds. */
    public String table() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "%-32s %9s %10s %10s %10s %10s %10s%n", "latency (us)", "count", "p50", "p90",
                "p99", "p99.9", "max"));
        for (Map.Entry<String, Histogram> e : histograms.entrySet()) {
            Histogram h = e.getValue();
            if (h.getTotalCount() == 0) {
                continue;
            }
            sb.append(String.format(Locale.ROOT, "%-32s %9d %10.1f %10.1f %10.1f %10.1f %10.1f%n", e.getKey(),
                    h.getTotalCount(), h.getValueAtPercentile(50) / 1e3, h.getValueAtPercentile(90) / 1e3,
                    h.getValueAtPercentile(99) / 1e3, h.getValueAtPercentile(99.9) / 1e3, h.getMaxValue() / 1e3));
        }
        return sb.toString();
    }
}
