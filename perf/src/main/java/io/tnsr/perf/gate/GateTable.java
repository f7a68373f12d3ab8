package io.tnsr.perf.gate;

import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;

/** The gate's printed output: the verdict table, times, the machine. */
public final class GateTable {
    private GateTable() {
    }

    private static final String FMT = "%-30s %12s %12s %8s %6s %14s %10s  %-10s %s%n";

    public static void print(GateCheck.Report report, PrintStream out) {
        out.printf(Locale.ROOT, FMT, "metric", "reference", "tree", "change", "forks", "band", "limit", "verdict", "");
        for (GateCheck.Row r : report.rows()) {
            boolean alloc = r.kind() == Metric.Kind.ALLOC;
            out.printf(Locale.ROOT, FMT, r.metric(), alloc ? "" : time(r.reference()), alloc ? bytes(r.now()) : time(r.now()),
                    Double.isNaN(r.change()) ? "" : String.format(Locale.ROOT, "x%.3f", r.change()),
                    r.pairs() == 0 ? "" : Integer.toString(r.pairs()),
                    Double.isNaN(r.low()) ? "" : String.format(Locale.ROOT, "%.3f..%.3f", r.low(), r.high()),
                    Double.isNaN(r.limit()) ? "" : alloc ? bytes(r.limit()) : String.format(Locale.ROOT, "x%.2f", r.limit()),
                    r.verdict(), r.note());
        }
    }

    static String bytes(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.2f B/op", v);
    }

    /** Nanoseconds as "15.9 us", "4.51 ms"...; "-" for NaN. */
    public static String time(double ns) {
        if (Double.isNaN(ns)) {
            return "-";
        }
        if (ns < 1e3) {
            return String.format(Locale.ROOT, "%.1f ns", ns);
        }
        if (ns < 1e6) {
            return String.format(Locale.ROOT, "%.3g us", ns / 1e3);
        }
        if (ns < 1e9) {
            return String.format(Locale.ROOT, "%.3g ms", ns / 1e6);
        }
        return String.format(Locale.ROOT, "%.3g s", ns / 1e9);
    }

    /** "AMD EPYC, 2 CPUs, JDK 17.0.15, Linux 6.1": where the numbers come from. */
    public static String machine() {
        String cpu = "unknown CPU";
        try {
            List<String> lines = Files.readAllLines(Path.of("/proc/cpuinfo"));
            cpu = lines.stream().filter(l -> l.startsWith("model name")).map(l -> l.substring(l.indexOf(':') + 1).trim())
                    .findFirst().orElse(cpu);
        } catch (Exception ignored) {
            // not Linux: the name is only informative
        }
        return String.format(Locale.ROOT, "%s, %d CPUs, JDK %s, %s %s", cpu, Runtime.getRuntime().availableProcessors(),
                Runtime.version(), System.getProperty("os.name"), System.getProperty("os.version"));
    }
}
