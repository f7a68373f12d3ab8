package io.tnsr.engine.cli;

import io.tnsr.engine.coordinator.Coordinator;
import io.tnsr.engine.coordinator.PipelineException;
import io.tnsr.engine.coordinator.PipelineRecovery;
import io.tnsr.engine.coordinator.PipelineRun;
import io.tnsr.engine.generate.GenerationReport;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.metrics.RunDirectory;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.SpinPolicy;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code tools/run-pipeline}: the model split across stage processes on this host, driven by a coordinator. */
@Command(name = "run-pipeline", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Starts N stage processes (separate JVMs, TCP on 127.0.0.1), each holding a contiguous range of"
                + " the model's layers, and a coordinator that keeps several micro-batches in flight. Streams the text"
                + " and ends with a short summary on stderr: tokens/s, time to first token, hop latency (--verbose: every stage's)."})
public final class RunPipelineCommand implements Callable<Integer> {
    @Mixin
    PipelineOptions pipeline;

    @Mixin
    GenerationOptions gen;

    @Option(names = "--split", defaultValue = "even", paramLabel = "even|balanced",
            description = {"How --stages N splits the layers: even (5 over 4: 2,1,1,1; the default) or balanced"
                    + " (counts the classifier the last stage also runs, by its weights)."})
    String split;

    @Option(names = "--micro-batches", paramLabel = "M", description = "Micro-batches in flight (default: one per stage, at most one per sequence).")
    Integer microBatches;

    @Option(names = "--batch-size", paramLabel = "B", defaultValue = "0", description = "Sequences per micro-batch (default: spread the sequences evenly).")
    int batchSize;

    @Option(names = "--histograms", paramLabel = "DIR", description = "Keep the latency of the run in DIR: per metric an HdrHistogram interval log (.hlog) and "
            + "percentile distribution (.hgrm, microseconds), and summary.json. See tools/latency-report.")
    Path histograms;

    @Option(names = "--rate", paramLabel = "R", description = "Open loop: admit sequence k at start + k/R (R sequences per second) instead of when a "
            + "micro-batch has room; ttft and request latency count from that intended time.")
    Double rate;

    @Option(names = "--requests", paramLabel = "N", description = "Run N sequences, cycling through the prompts (default: one per prompt).")
    Integer requests;

    @Override
    public Integer call() throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        pipeline.applyVerbosity();
        Path modelPath = pipeline.modelPath("run-pipeline");
        LlamaConfig mc;
        Tokenizer tok;
        double classifierLayers;
        try (GgufFile file = GgufFile.open(modelPath)) {
            mc = LlamaConfig.fromGguf(file);
            tok = Tokenizers.fromGguf(file);
            classifierLayers = PipelineConfig.classifierWeightInLayers(file);
        }
        PipelineConfig pc = pipeline.pipeline(mc);
        switch (split) {
            case "even" -> { }
            case "balanced" -> {
                if (pipeline.config != null) {
                    throw new IllegalArgumentException("--split balanced applies to --stages N, not to a --config file's stages");
                }
                pc = pc.withStages(PipelineConfig.balancedSplit(mc.layers(), pc.stages().size(), classifierLayers));
            }
            default -> throw new IllegalArgumentException("--split must be even or balanced, not '" + split + "'");
        }
        pc.checkFrames(mc);
        int n = pc.stages().size();
        Sampler sampler = new Sampler(gen.sampling(), mc.vocabSize());
        List<SequenceState> seqs = gen.sequences(cycle(gen.prompts("Once upon a time"), requests), tok, mc.contextLength(), sampler);
        int m = microBatches != null ? microBatches : Math.max(1, Math.min(n, seqs.size()));
        SpinPolicy policy = pipeline.spinPolicy(pc, "run-pipeline", m);
        if (policy.pinning() != null) {
            System.err.println("run-pipeline: spinning compute threads pinned: " + policy.pinning());
        }
        List<WaitMode> waits = policy.waits();
        List<Integer> cpus = policy.cpus();
        int threads = pc.threadsPerStage(Runtime.getRuntime().availableProcessors(), waits);
        // the stages get the number auto chose (a replacement stage too)
        PipelineConfig stages = pc.withThreadsPerStage(threads);
        TextOutput text = new TextOutput(out, tok, seqs, gen.json());
        PipelineRun.Outcome outcome;
        // The run's metrics: kept in --histograms DIR, else in a temporary directory deleted when the run ends.
        try (RunDirectory dir = RunDirectory.namedOrTemporary(histograms, "tnsr-run")) {
            PipelineRun.Settings settings = new PipelineRun.Settings(modelPath, stages, waits, cpus,
                    new Coordinator.Options(m, batchSize, pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(), pc.maxFrameBytes(),
                            rate == null ? 0 : rate).withSampleInLastStage(pipeline.sampleInLastStage()),
                    dir.path(), pipeline.startupMillis(), pipeline.stallMillis(), pipeline.connectMillis(), 0,
                    pipeline.link(pc, "run-pipeline"), pipeline.recovery());
            outcome = PipelineRun.run(settings, mc, seqs, text);
        } catch (PipelineException e) {
            System.err.println("run-pipeline: " + e.getMessage());
            if (gen.json()) {
                // What finished stays as it is; what was running or waiting ends with the pipeline's error.
                for (SequenceState s : seqs) {
                    if (!s.finished()) {
                        s.fail("the pipeline failed: " + e.getMessage());
                    }
                }
                out.println(new GenerationReport(modelPath.toString(), pc.stages().size(), seqs, text::text, 0)
                        .put("seed", gen.seed())
                        .put("error", e.getMessage())
                        .toJson());
            }
            return 3;
        }
        report(out, System.err, modelPath, mc, pc, waits, m, threads, seqs, text, outcome);
        return seqs.stream().anyMatch(s -> s.error() != null) ? 1 : 0;
    }

    /** The prompts repeated in turn up to n of them (all of them once when n is null). */
    private static List<String> cycle(List<String> prompts, Integer n) {
        if (n == null) {
            return prompts;
        }
        if (n < 1) {
            throw new IllegalArgumentException("--requests must be >= 1, got " + n);
        }
        List<String> all = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            all.add(prompts.get(i % prompts.size()));
        }
        return all;
    }

    /**
     * The end of a run: with --json, one JSON line on stdout; else a summary on stderr, after the text on stdout: two
     * lines (tokens, tokens/s, time to first token; hop latency), or with --verbose the model, the layout, every
     * stage's compute share and the whole latency table.
     */
    private void report(PrintStream out, PrintStream err, Path modelPath, LlamaConfig mc, PipelineConfig pc, List<WaitMode> waits, int m,
                        int threads, List<SequenceState> seqs, TextOutput text, PipelineRun.Outcome o) {
        double tps = o.result().tokensPerSecond();
        double[] ttft = seqs.stream().filter(s -> s.timeToFirstTokenNanos() > 0)
                .mapToDouble(s -> s.timeToFirstTokenNanos() / 1e6).sorted().toArray();
        double ttftP50 = ttft.length == 0 ? 0 : ttft[ttft.length / 2];
        if (gen.json()) {
            List<Object> split = new ArrayList<>();
            for (StageSpec s : pc.stages()) {
                split.add(new int[] {s.layerFrom(), s.layerTo()});
            }
            List<Object> shares = new ArrayList<>();
            for (double d : o.computeShare()) {
                shares.add(GenerationReport.round(d));
            }
            Map<String, Object> stalls = new LinkedHashMap<>();
            for (int i = 0; i < o.stalls().length; i++) {
                stalls.put("stage" + i, o.stalls()[i]);
            }
            List<Object> recoveries = new ArrayList<>();
            for (PipelineRecovery.Done d : o.recoveries()) {
                Map<String, Object> r = new LinkedHashMap<>();
                r.put("seconds", GenerationReport.round(d.nanos() / 1e9));
                r.put("replaced_stages", d.replaced());
                r.put("cause", d.cause());
                recoveries.add(r);
            }
            out.println(new GenerationReport(modelPath.toString(), pc.stages().size(), seqs, text::text, tps)
                    .put("micro_batches", m)
                    .put("layers", split)
                    .put("wait", waits.get(0).name().toLowerCase(Locale.ROOT))
                    .put("threads_per_stage", threads)
                    .put("seed", gen.seed())
                    .put("generated_tokens_total", o.result().generatedTokens())
                    .put("wall_seconds", o.result().wallNanos() / 1e9)
                    .put("decode_tokens_per_second", o.result().decodeTokensPerSecond())
                    .put("time_to_first_token_ms_p50", ttftP50)
                    .put("stage_compute_share", shares)
                    .put("stalls", stalls)
                    .put("recoveries", recoveries)
                    .put("latency", o.latency().toJsonMap())
                    .toJson());
            return;
        }
        long failed = seqs.stream().filter(s -> s.error() != null).count();
        if (!pipeline.verbose) {
            compactSummary(err, seqs.size(), failed, ttftP50, o);
            return;
        }
        StringBuilder layout = new StringBuilder();
        for (StageSpec s : pc.stages()) {
            layout.append(" [").append(s.layerFrom()).append(',').append(s.layerTo()).append(')');
        }
        out = err;
        out.println("== run-pipeline summary ==");
        out.printf(Locale.ROOT, "model     %s (%s)%n", modelPath.getFileName(), mc.describe());
        out.printf(Locale.ROOT, "pipeline  %d stages:%s, %d micro-batches in flight, %d thread%s per stage%s, compute threads %s%n",
                pc.stages().size(), layout, m, threads, threads == 1 ? "" : "s", pc.threadsPerStage() == 0 ? " (auto)" : "",
                waits.get(0).name().toLowerCase(Locale.ROOT));
        out.printf(Locale.ROOT, "generated %d tokens for %d sequences%s in %.2f s: %.1f tokens/s (decode %.1f tokens/s); time to first token p50 %.1f ms%n",
                o.result().generatedTokens(), seqs.size(), failed > 0 ? " (" + failed + " failed)" : "",
                o.result().wallNanos() / 1e9, tps, o.result().decodeTokensPerSecond(), ttftP50);
        for (PipelineRecovery.Done d : o.recoveries()) {
            out.printf(Locale.ROOT, "recovered in %.2f s, replaced stage%s %s: %s%n", d.nanos() / 1e9,
                    d.replaced().size() == 1 ? "" : "s", d.replaced(), d.cause());
        }
        StringBuilder share = new StringBuilder("compute share");
        for (int i = 0; i < o.computeShare().length; i++) {
            share.append(String.format(Locale.ROOT, "  stage%d %.0f%%", i, 100 * o.computeShare()[i]));
        }
        out.println(share);
        long stalls = 0;
        for (long s : o.stalls()) {
            stalls += s;
        }
        if (stalls > 0) {
            out.printf(Locale.ROOT, "stalls    %d compute pick-ups took over %d us after a frame arrived (descheduled or GC)%n",
                    stalls, pc.stallThresholdMicros());
        }
        out.print(o.latency().table(true));
        if (histograms != null) {
            out.printf(Locale.ROOT, "latency   %s: <metric>.hlog, <metric>.hgrm (us), summary.json; chart: tools/latency-report %s%n",
                    histograms, histograms);
        }
    }

    /**
     * The default summary, two lines: "run-pipeline: 256 tokens for 1 sequence in 4.99 s: 51.3 tokens/s (decode 86.9
     * tokens/s), time to first token 2055 ms" and the hops' p50 and p99 (the range over the hops when there are
     * several), then a recovery line per recovery and where the histograms went.
     */
    private void compactSummary(PrintStream err, int sequences, long failed, double ttftP50, PipelineRun.Outcome o) {
        StringBuilder b = new StringBuilder(String.format(Locale.ROOT,
                "run-pipeline: %d tokens for %d sequence%s%s in %.2f s: %.1f tokens/s (decode %.1f tokens/s), time to first token %.0f ms%s",
                o.result().generatedTokens(), sequences, sequences == 1 ? "" : "s", failed > 0 ? " (" + failed + " failed)" : "",
                o.result().wallNanos() / 1e9, o.result().tokensPerSecond(), o.result().decodeTokensPerSecond(), ttftP50,
                sequences == 1 ? "" : " (p50)"));
        double p50Lo = Double.MAX_VALUE, p50Hi = 0, p99Lo = Double.MAX_VALUE, p99Hi = 0;
        int hops = 0;
        for (Map.Entry<String, org.HdrHistogram.Histogram> e : o.latency().histograms().entrySet()) {
            if (!e.getKey().startsWith("hop-") || e.getValue().getTotalCount() == 0) {
                continue;
            }
            double p50 = e.getValue().getValueAtPercentile(50) / 1e3;
            double p99 = e.getValue().getValueAtPercentile(99) / 1e3;
            p50Lo = Math.min(p50Lo, p50);
            p50Hi = Math.max(p50Hi, p50);
            p99Lo = Math.min(p99Lo, p99);
            p99Hi = Math.max(p99Hi, p99);
            hops++;
        }
        if (hops > 0) {
            b.append(String.format(Locale.ROOT, "%nrun-pipeline: %s p50 %s, p99 %s; --verbose for every stage's latency",
                    hops == 1 ? "hop" : hops + " hops", range(p50Lo, p50Hi), range(p99Lo, p99Hi)));
        }
        for (PipelineRecovery.Done d : o.recoveries()) {
            b.append(String.format(Locale.ROOT, "%nrun-pipeline: recovered in %.2f s, replaced stage%s %s: %s", d.nanos() / 1e9,
                    d.replaced().size() == 1 ? "" : "s", d.replaced(), d.cause()));
        }
        if (histograms != null) {
            b.append(String.format(Locale.ROOT, "%nrun-pipeline: latency histograms in %s; chart: tools/latency-report %s",
                    histograms, histograms));
        }
        err.println(b);
    }

    /** Microseconds as "12.3 us", "272 us" or "7.0 ms"; a range as "272..462 us", in the unit of its top. */
    static String range(double loMicros, double hiMicros) {
        boolean ms = hiMicros >= 1000;
        double scale = ms ? 1e-3 : 1;
        String f = ms || hiMicros < 100 ? "%.1f" : "%.0f";
        String hi = String.format(Locale.ROOT, f, hiMicros * scale);
        String lo = String.format(Locale.ROOT, f, loMicros * scale);
        return (lo.equals(hi) ? hi : lo + ".." + hi) + (ms ? " ms" : " us");
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new RunPipelineCommand(), args));
    }
}
