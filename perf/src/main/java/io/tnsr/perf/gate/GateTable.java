package io.tnsr.perf.gate;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.perf.kernels.KernelBenchmark;
import io.tnsr.perf.kernels.MatrixFiles;
import io.tnsr.perf.kernels.MemoryProbe;
import io.tnsr.perf.kernels.StreamProbe;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/** The gate's printed output: the verdict table, the throughput of kernels and probes, the machine. */
public final class GateTable {
    private GateTable() {
    }

    public static void print(GateCheck.Report report, PrintStream out) {
        String fmt = "%-30s %12s %12s %8s %12s  %-10s %s%n";
        out.printf(Locale.ROOT, fmt, "metric", "baseline", "now", "ratio", "limit", "verdict", "");
        for (GateCheck.Row r : report.rows()) {
            out.printf(Locale.ROOT, fmt, r.metric(), value(r.kind(), r.baseline()), value(r.kind(), r.now()),
                    Double.isNaN(r.change()) ? "" : String.format(Locale.ROOT, "%.3f", r.change()),
                    value(r.kind(), r.limit()), r.verdict(), r.note());
        }
    }

    static String value(Metric.Kind kind, double v) {
        if (Double.isNaN(v)) {
            return "-";
        }
        return switch (kind) {
            case RATIO -> String.format(Locale.ROOT, "%.4g", v);
            case ALLOC -> String.format(Locale.ROOT, "%.3f B/op", v);
            case INFO -> time(v);
        };
    }

    /** Nanoseconds as "15.9 us", "4.51 ms"... */
    public static String time(double ns) {
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

    /**
     * Throughput of the kernel and memory probes measured: GFLOP/s = 2 x rows x cols x tokens / time, GB/s =
     * matrix bytes / time (kernels), 2 x size / time (copies: read + write), bytes read / time (references).
     */
    public static void throughput(Map<Probe, ProbeRunner.Measurement> measured, PrintStream out) {
        boolean header = false;
        for (Map.Entry<Probe, ProbeRunner.Measurement> e : measured.entrySet()) {
            Probe p = e.getKey();
            ProbeRunner.Measurement m = e.getValue();
            if (!m.ok()) {
                continue;
            }
            String what;
            double gflops = Double.NaN;
            double gbs;
            if (p.benchmark().endsWith("KernelBenchmark.matmul") || p.benchmark().endsWith("InjectedSlowKernel.matmul")) {
                int[] rc = MatrixFiles.shape(p.params().get("shape"));
                int tokens = Integer.parseInt(p.params().get("tokens"));
                GgmlType type = GgmlType.valueOf(p.params().get("type"));
                what = (p.benchmark().contains("Injected") ? "injected slow " : "") + type + " " + p.params().get("shape")
                        + " x " + tokens;
                gflops = KernelBenchmark.flops(rc[0], rc[1], tokens) / m.nanosPerOp();
                gbs = KernelBenchmark.weightBytes(type, rc[0], rc[1]) / m.nanosPerOp();
            } else if (p.benchmark().endsWith("MemoryProbe.copy")) {
                what = "copy " + p.params().get("size");
                gbs = 2.0 * MemoryProbe.parseSize(p.params().get("size")) / m.nanosPerOp();
            } else if (p.benchmark().endsWith("StreamProbe.read")) {
                what = "read 64 MiB (mapped)";
                gbs = 4.0 * StreamProbe.ROWS * StreamProbe.COLS / m.nanosPerOp();
            } else if (p.benchmark().endsWith("ComputeProbe.dot")) {
                what = "dot products in L2";
                gflops = 2.0 * 64 * 2048 / m.nanosPerOp();
                gbs = 4.0 * 64 * 2048 / m.nanosPerOp();
            } else {
                continue;
            }
            if (!header) {
                out.printf(Locale.ROOT, "%n%-32s %12s %10s %10s%n", "throughput this run", "time/op", "GFLOP/s", "GB/s");
                header = true;
            }
            out.printf(Locale.ROOT, "%-32s %12s %10s %10.2f%n", what, time(m.nanosPerOp()),
                    Double.isNaN(gflops) ? "" : String.format(Locale.ROOT, "%.2f", gflops), gbs);
        }
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

    /** The 1-minute load average, or "?" where unknown. */
    public static String load() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).split(" ")[0];
        } catch (Exception e) {
            return "?";
        }
    }
}
