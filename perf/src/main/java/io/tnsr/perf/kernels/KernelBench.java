package io.tnsr.perf.kernels;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.util.Jackson;
import io.tnsr.engine.util.TaskProgress;
import io.tnsr.perf.JmhUnits;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.results.BenchmarkResult;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.format.OutputFormat;
import org.openjdk.jmh.runner.format.OutputFormatFactory;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/kernel-bench}: runs {@link KernelBenchmark} (JMH) and prints GFLOP/s and GB/s per type, shape and
 * token count, skipping with a message the types the engine cannot load yet. A benchmark whose fork fails is named
 * on stderr with its exception, and the exit code is 1. {@code --from-json} turns the
 * result file of an earlier {@code tools/jmh -rf json -rff FILE KernelBenchmark} run into the same table.
 * <pre>
 *   GFLOP/s = 2 x rows x cols x tokens / time per call
 *   GB/s    = rows x cols / block size x block bytes (the matrix in its own type) / time per call
 * </pre>
 */
@Command(name = "kernel-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Weight-matrix kernel throughput (GFLOP/s, GB/s) per tensor type, shape and token count (JMH).")
public final class KernelBench implements Callable<Integer> {

    @Option(names = "--types", defaultValue = "F32,F16,Q8_0,Q4_0,Q4_K,Q6_K", split = ",", description = "Tensor types (default: ${DEFAULT-VALUE}).")
    List<String> types;

    @Option(names = "--shapes", defaultValue = "768x768,2048x768,4096x4096", split = ",", description = "ROWSxCOLS (default: ${DEFAULT-VALUE}).")
    List<String> shapes;

    @Option(names = "--tokens", defaultValue = "1,16", split = ",", description = "Vectors per call: 1 = matrix-vector (default: ${DEFAULT-VALUE}).")
    List<String> tokens;

    @Option(names = "--warmup", defaultValue = "3", description = "Warm-up iterations of 1 s (default: ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = "--iterations", defaultValue = "5", description = "Measured iterations of 1 s (default: ${DEFAULT-VALUE}).")
    int iterations;

    @Option(names = "--from-json", paramLabel = "FILE", description = "Only print the table of a JMH JSON result file.")
    Path fromJson;

    @Override
    public Integer call() throws Exception {
        List<Row> rows = new ArrayList<>();
        if (fromJson != null) {
            for (JsonNode r : Jackson.MAPPER.readTree(fromJson.toFile())) {
                if (!r.path("benchmark").asText().endsWith("KernelBenchmark.matmul")) {
                    continue;
                }
                JsonNode p = r.path("params");
                JsonNode m = r.path("primaryMetric");
                rows.add(new Row(p.path("type").asText(), p.path("shape").asText(), Integer.parseInt(p.path("tokens").asText()),
                        m.path("score").asDouble() * JmhUnits.nanosPer(m.path("scoreUnit").asText())));
            }
        } else {
            List<String> supported = new ArrayList<>();
            for (String t : types) {
                GgmlType type = GgmlType.valueOf(t.toUpperCase(Locale.ROOT));
                // a small matrix whose rows hold whole blocks (256 elements for the K-quants)
                try (MatrixFiles.Loaded ignored = MatrixFiles.load(type, 32, Math.max(64, type.blockSize()))) {
                    supported.add(type.name());
                } catch (MatrixFiles.UnsupportedTypeException e) {
                    System.out.println("kernel-bench: skipped: " + e.getMessage());
                }
            }
            if (supported.isEmpty()) {
                return 0;
            }
            ChainedOptionsBuilder o = new OptionsBuilder().include("^" + KernelBenchmark.class.getName() + ".matmul$")
                    .forks(1).warmupIterations(warmup).warmupTime(TimeValue.seconds(1))
                    .measurementIterations(iterations).measurementTime(TimeValue.seconds(1))
                    .param("type", supported.toArray(new String[0])).param("shape", shapes.toArray(new String[0]))
                    .param("tokens", tokens.toArray(new String[0]))
                    .verbosity(VerboseMode.SILENT);
            System.out.printf(Locale.ROOT, "kernel-bench: %s x %s x %s tokens, JMH 1 fork each, %d + %d iterations of 1 s...%n",
                    supported, shapes, tokens, warmup, iterations);
            long workloads = (long) supported.size() * shapes.size() * tokens.size();
            try (TaskProgress progress = TaskProgress.start("kernel-bench", workloads, TaskProgress.ITEMS)) {
                OutputFormat silent = OutputFormatFactory.createFormatInstance(System.out, VerboseMode.SILENT);
                Counting counting = new Counting(silent, progress);
                for (RunResult r : new Runner(o.build(), counting).run()) {
                    rows.add(new Row(r.getParams().getParam("type"), r.getParams().getParam("shape"),
                            Integer.parseInt(r.getParams().getParam("tokens")),
                            r.getPrimaryResult().getScore() * JmhUnits.nanosPer(r.getPrimaryResult().getScoreUnit())));
                }
                failures = counting.failures;
            }
        }
        System.out.printf(Locale.ROOT, "%n%-6s %-10s %7s %12s %10s %10s%n", "type", "shape", "tokens", "us/call", "GFLOP/s", "GB/s");
        for (Row r : rows) {
            int[] rc = MatrixFiles.shape(r.shape);
            System.out.printf(Locale.ROOT, "%-6s %-10s %7d %12.1f %10.2f %10.2f%n", r.type, r.shape, r.tokens, r.nanos / 1e3,
                    KernelBenchmark.flops(rc[0], rc[1], r.tokens) / r.nanos,
                    KernelBenchmark.weightBytes(GgmlType.valueOf(r.type), rc[0], rc[1]) / r.nanos);
        }
        failures.forEach((workload, text) -> System.err.println("kernel-bench: " + workload + " failed: " + cause(text)));
        return failures.isEmpty() ? 0 : 1;
    }

    /**
     * The exception a failed benchmark's fork reported, from what JMH printed for it: its first line after
     * {@code <failure>} and the first frame in the engine, or all of it when it is not in that shape.
     */
    static String cause(String printed) {
        String[] lines = printed.split("\\R");
        int at = 0;
        while (at < lines.length && !lines[at].contains("<failure>")) {
            at++;
        }
        String exception = null;
        for (int i = at + 1; i < lines.length; i++) {
            String l = lines[i].strip();
            if (exception == null) {
                if (!l.isEmpty()) {
                    exception = l;
                }
            } else if (l.startsWith("at io.tnsr.")) {
                return exception + " (" + l + ")";
            }
        }
        return exception != null ? exception : printed.strip();
    }

    private record Row(String type, String shape, int tokens, double nanos) {
    }

    /** Workloads whose fork failed ("TYPE SHAPE xN"), with what JMH printed for each. */
    private Map<String, String> failures = Map.of();

    /**
     * JMH's silent output, plus the progress bar: the benchmark in flight as its message, one step as each ends. What
     * JMH copies from its forks (their stderr, written to stdout) goes line by line above the bar, the same bytes as
     * without it; everything else to {@code silent}.
     */
    private static final class Counting implements OutputFormat {
        private final OutputFormat silent;
        private final TaskProgress progress;
        private final PrintStream forks;
        /** What JMH printed for the benchmark in flight: where a fork's failure and its stack trace arrive. */
        private final StringBuilder printed = new StringBuilder();
        private final Map<String, String> failures = new LinkedHashMap<>();
        private String workload = "";

        Counting(OutputFormat silent, TaskProgress progress) {
            this.silent = silent;
            this.progress = progress;
            this.forks = progress.above(System.out);
        }

        @Override
        public void startBenchmark(BenchmarkParams params) {
            settle();
            workload = params.getParam("type") + " " + params.getParam("shape") + " x" + params.getParam("tokens");
            progress.message(" " + workload);
            silent.startBenchmark(params);
        }

        @Override
        public void endBenchmark(BenchmarkResult result) {
            settle();
            silent.endBenchmark(result);
            progress.stepBy(1);
        }

        /** Records the benchmark in flight as failed if JMH printed a failure for it, and starts afresh. */
        private void settle() {
            if (printed.indexOf("<failure>") >= 0) {
                failures.put(workload, printed.toString());
            }
            printed.setLength(0);
        }

        @Override
        public void iteration(BenchmarkParams benchParams, IterationParams params, int iteration) {
            silent.iteration(benchParams, params, iteration);
        }

        @Override
        public void iterationResult(BenchmarkParams benchParams, IterationParams params, int iteration, IterationResult data) {
            silent.iterationResult(benchParams, params, iteration, data);
        }

        @Override
        public void startRun() {
            silent.startRun();
        }

        @Override
        public void endRun(Collection<RunResult> result) {
            settle();
            silent.endRun(result);
        }

        @Override
        public void print(String s) {
            printed.append(s);
            silent.print(s);
        }

        @Override
        public void println(String s) {
            printed.append(s).append('\n');
            silent.println(s);
        }

        @Override
        public void flush() {
            silent.flush();
        }

        @Override
        public void close() {
            if (forks != System.out) {
                forks.close();   // a last line without its newline; System.out itself stays open
            }
            silent.flush();      // its stream is System.out too, which the table is printed to next: never closed
        }

        @Override
        public void verbosePrintln(String s) {
            silent.verbosePrintln(s);
        }

        @Override
        public void write(int b) {
            forks.write(b);
        }

        @Override
        public void write(byte[] b) {
            forks.write(b, 0, b.length);
        }
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new KernelBench(), args));
    }
}
