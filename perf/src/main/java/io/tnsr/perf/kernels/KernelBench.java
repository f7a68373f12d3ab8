package io.tnsr.perf.kernels;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.util.Jackson;
import io.tnsr.perf.JmhUnits;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/kernel-bench}: runs {@link KernelBenchmark} (JMH) and prints GFLOP/s and GB/s per type, shape and
 * token count, skipping with a message the types the engine cannot load yet. {@code --from-json} turns the
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
            for (RunResult r : new Runner(o.build()).run()) {
                rows.add(new Row(r.getParams().getParam("type"), r.getParams().getParam("shape"),
                        Integer.parseInt(r.getParams().getParam("tokens")),
                        r.getPrimaryResult().getScore() * JmhUnits.nanosPer(r.getPrimaryResult().getScoreUnit())));
            }
        }
        System.out.printf(Locale.ROOT, "%n%-6s %-10s %7s %12s %10s %10s%n", "type", "shape", "tokens", "us/call", "GFLOP/s", "GB/s");
        for (Row r : rows) {
            int[] rc = MatrixFiles.shape(r.shape);
            System.out.printf(Locale.ROOT, "%-6s %-10s %7d %12.1f %10.2f %10.2f%n", r.type, r.shape, r.tokens, r.nanos / 1e3,
                    KernelBenchmark.flops(rc[0], rc[1], r.tokens) / r.nanos,
                    KernelBenchmark.weightBytes(GgmlType.valueOf(r.type), rc[0], rc[1]) / r.nanos);
        }
        return 0;
    }

    private record Row(String type, String shape, int tokens, double nanos) {
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new KernelBench(), args));
    }
}
