package io.tnsr.perf.engine;

import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.util.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/pipeline-bench}: end-to-end tokens/s of {@code tools/run-pipeline} (real stage processes over
 * loopback TCP) for several stage counts on a synthetic model, as a table. Each configuration runs
 * {@code --repeats} times, each a fresh {@code run-pipeline --json} process; the table shows the median and the
 * range of the tokens/s it reports (generated tokens / wall time of the generation, start-up excluded).
 */
@Command(name = "pipeline-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = "End-to-end tokens/s of run-pipeline for 1, 2 and 4 stages on a synthetic model, as a table.")
public final class PipelineBench implements Callable<Integer> {

    @Option(names = "--stages", defaultValue = "1,2,4", split = ",", description = "Stage counts (default: ${DEFAULT-VALUE}).")
    List<Integer> stages;

    @Option(names = "--preset", defaultValue = "stories15M", description = "Synthetic model shape: stories15M, stories110M, tiny (default: ${DEFAULT-VALUE}).")
    String preset;

    @Option(names = "--type", defaultValue = "f32", description = "Weight type, f32 or f16 (default: ${DEFAULT-VALUE}).")
    String type;

    @Option(names = "--sequences", defaultValue = "4", description = "Prompts generated at once (default: ${DEFAULT-VALUE}).")
    int sequences;

    @Option(names = "--max-tokens", defaultValue = "64", description = "Tokens generated per sequence (default: ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--repeats", defaultValue = "3", description = "Runs per stage count (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--spin", description = "Pass --spin to run-pipeline (busy-spinning compute threads where cores allow).")
    boolean spin;

    @Override
    public Integer call() throws Exception {
        Path home = Paths.get(System.getProperty("tnsr.home", ".")).toAbsolutePath();
        ModelSpec spec = ModelSpec.preset(preset).withType(io.tnsr.engine.gguf.GgmlType.valueOf(type.toUpperCase(Locale.ROOT)));
        Path model = ModelCache.get(spec);
        System.out.printf(Locale.ROOT, "pipeline-bench: %s; %d sequences x %d tokens, greedy; %d runs per row (median, min..max); "
                + "%d CPUs, JDK %s%n", spec.describe(), sequences, maxTokens, repeats, Runtime.getRuntime().availableProcessors(),
                Runtime.version());
        System.out.printf(Locale.ROOT, "%-7s %12s %20s %14s %10s%n", "stages", "tokens/s", "range", "TTFT p50 ms", "wait");
        int status = 0;
        for (int n : stages) {
            double[] tps = new double[repeats];
            double[] ttft = new double[repeats];
            String wait = "";
            for (int r = 0; r < repeats; r++) {
                Map<?, ?> json = run(home, model, n);
                if (json == null) {
                    status = 1;
                    tps[r] = Double.NaN;
                    continue;
                }
                tps[r] = ((Number) json.get("tokens_per_second")).doubleValue();
                ttft[r] = ((Number) json.get("time_to_first_token_ms_p50")).doubleValue();
                wait = String.valueOf(json.get("wait"));
            }
            double[] ok = Arrays.stream(tps).filter(v -> !Double.isNaN(v)).sorted().toArray();
            if (ok.length == 0) {
                System.out.printf(Locale.ROOT, "%-7d %12s%n", n, "failed");
                continue;
            }
            System.out.printf(Locale.ROOT, "%-7d %12.1f %20s %14.1f %10s%n", n, ok[ok.length / 2],
                    String.format(Locale.ROOT, "%.1f..%.1f", ok[0], ok[ok.length - 1]), median(ttft), wait);
        }
        return status;
    }

    /** One run-pipeline --json process; its JSON line, or null (with the reason on stderr) when it failed. */
    private Map<?, ?> run(Path home, Path model, int n) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(home.resolve("tools/run-pipeline").toString(), "--stages", String.valueOf(n),
                "--model", model.toString(), "--json", "--temperature", "0", "--seed", "1", "--max-tokens", String.valueOf(maxTokens)));
        for (int i = 0; i < sequences; i++) {
            cmd.add("--prompt");
            cmd.add("Once upon a time, story number " + (i + 1));
        }
        if (spin) {
            cmd.add("--spin");
        }
        Path err = Files.createTempFile("pipeline-bench", ".err");
        try {
            Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
            String stdout = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.MINUTES) || p.exitValue() != 0) {
                p.destroyForcibly();
                System.err.println("pipeline-bench: run-pipeline --stages " + n + " failed (exit " + (p.isAlive() ? "timeout" : p.exitValue())
                        + "): " + String.join(" | ", Files.readAllLines(err)));
                return null;
            }
            String line = stdout.lines().filter(l -> l.startsWith("{")).reduce((a, b) -> b).orElse(null);
            if (line == null) {
                System.err.println("pipeline-bench: run-pipeline --stages " + n + " printed no JSON");
                return null;
            }
            return (Map<?, ?>) JsonParser.parse(line);
        } finally {
            Files.deleteIfExists(err);
        }
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s[s.length / 2];
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new PipelineBench(), args));
    }
}
