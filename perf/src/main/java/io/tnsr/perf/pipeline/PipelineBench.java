package io.tnsr.perf.pipeline;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.tnsr.engine.coordinator.Coordinator;
import io.tnsr.engine.coordinator.PipelineRun;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.metrics.RunDirectory;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.SpinPolicy;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import io.tnsr.engine.util.ConsoleLog;
import io.tnsr.engine.util.TaskProgress;
import io.tnsr.perf.engine.LlamaCppFigures;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/pipeline-bench}: aggregate decode tokens/s of real pipelines (one JVM per stage, TCP on
 * loopback) on a synthetic model, for the layouts that show whether pipelining pays, and spinning against
 * blocking side by side. Each row: the median of the repeats (min..max), measured after the stages' JIT warm-up
 * (each stage warms its kernels up before it serves, {@code --warmup}; and the first 16 decode steps of every sequence
 * are left out, fewer for runs shorter than 33 tokens: see {@link #warmupSteps}), and its ratio to the first row's median.
 */
@Command(name = "pipeline-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Decode tokens/s of real stage pipelines on a synthetic model (generated once into .build/models).")
public final class PipelineBench implements Callable<Integer> {
    private static final ObjectMapper JSON = new ObjectMapper();

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--preset", defaultValue = "stories110M", description = "Model shape (default: ${DEFAULT-VALUE}).")
    String preset;

    @Option(names = "--type", defaultValue = "f32", description = "Weight type (default: ${DEFAULT-VALUE}).")
    String type;

    @Option(names = "--tokens", defaultValue = "64", description = "Tokens generated per sequence (default: ${DEFAULT-VALUE}).")
    int tokens;

    @Option(names = "--repeats", defaultValue = "3", description = "Runs per scenario (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--warmup", paramLabel = "SECONDS", defaultValue = "5", description = {"Bound on each stage's JIT warm-up"
            + " before it serves (the stages' warmup_ms): it ends as soon as the kernels are compiled; 0 = none, and only the"
            + " first decode steps are left out (default: ${DEFAULT-VALUE})."})
    double warmupSeconds;

    @Option(names = "--scenarios", defaultValue = "pipelining", split = ",",
            description = "stages (1, 2 and 4 stages, one micro-batch of 8 per stage), pipelining (1 stage x1, 1 stage 1x8, "
                    + "2 stages 2x8 and 4x8), spin (4 stages 4x8, blocking vs --spin), or one layout SxMxB (S stages, M "
                    + "micro-batches of B sequences, e.g. 2x2x8) or SxMxBxT (each stage's matmuls shared by T threads, e.g. "
                    + "1x1x16x2); any comma-separated mix.")
    List<String> scenarios;

    @Option(names = "--sample-in", paramLabel = "WHERE", defaultValue = "last-stage", description = {"Where tokens are chosen:"
            + " last-stage (token ids come back) or coordinator (logits come back) (default: ${DEFAULT-VALUE})."})
    String sampleIn;

    private boolean sampleInLastStage() {
        return switch (sampleIn) {
            case "last-stage" -> true;
            case "coordinator" -> false;
            default -> throw new IllegalArgumentException("--sample-in must be last-stage or coordinator, got '" + sampleIn + "'");
        };
    }

    @Option(names = "--kv-cache-type", paramLabel = "TYPE", defaultValue = "f32", description = {"How the stages' KV"
            + " caches store keys and values: f32 (exact) or f16 (halves, as llama.cpp's default cache)"
            + " (default: ${DEFAULT-VALUE})."})
    String kvCacheType;

    @Option(names = "--llama-cpp", paramLabel = "FILE", description = {"Compare each row with llama.cpp measured here: FILE "
            + "holds the JSON lines of `llama-batched-bench -m MODEL -t T -tb T -c 4096 -npp 16 -ntg 64 -npl 1,8,16"
            + " --output-format jsonl` run on the same model file (pipeline-bench prints its path), one run per T.",
            "A row compares with the record of as many sequences (micro-batches x size) on as many threads as the"
            + " pipeline has cores: its stages, at most the CPUs."})
    Path llamaCppFile;

    @Option(names = "--json", description = "Print one JSON object per scenario (one line each) instead of the table: "
            + "scenario, stages, micro_batches, batch, layers, decode_tokens_per_second (one per repeat), median; with "
            + "--llama-cpp, llama_cpp (sequences, threads, tokens_per_second [low, high]) and ratio_to_llama_cpp.")
    boolean json;

    @Option(names = {"-v", "--verbose"}, description = "Show every stage's start-up and session lines on stderr.")
    boolean verbose;

    /** One measured layout. */
    record Scenario(String name, int stages, int microBatches, int batch, boolean spin, int threadsPerStage) {
        Scenario(String name, int stages, int microBatches, int batch, boolean spin) {
            this(name, stages, microBatches, batch, spin, 1);
        }
    }

    /**
     * Decode steps per sequence left out of the rate: 16, or half of them for shorter runs, so that a short
     * {@code --tokens} still measures something (with 16 left out of 15, every row read 0.0 tokens/s).
     */
    static int warmupSteps(int tokens) {
        return Math.min(16, (tokens - 1) / 2);
    }

    @Override
    public Integer call() throws Exception {
        ConsoleLog.setVerbose(verbose);
        if (repeats < 1) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--repeats must be at least 1, got " + repeats);
        }
        if (!(warmupSeconds >= 0 && warmupSeconds <= 600)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--warmup must be 0 to 600 seconds, got " + warmupSeconds);
        }
        if (tokens < 3) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--tokens must be at least 3 (the first"
                    + " token of a sequence comes from its prompt, and part of the decode steps warm the JIT up), got " + tokens);
        }
        Map<LlamaCppFigures.Batched, LlamaCppFigures.Range> llamaCpp = Map.of();
        if (llamaCppFile != null) {
            try {
                llamaCpp = LlamaCppFigures.readBatched(llamaCppFile);
            } catch (LlamaCppFigures.InvalidFiguresException e) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--llama-cpp: " + e.getMessage());
            }
        }
        int cpus = Runtime.getRuntime().availableProcessors();
        // A layout asked for by two scenarios is measured once, in the order first asked.
        java.util.Map<String, Scenario> byName = new java.util.LinkedHashMap<>();
        for (String name : scenarios) {
            for (Scenario sc : switch (name) {
                case "stages" -> List.of(new Scenario("1 stage, 1 micro-batch of 8", 1, 1, 8, false),
                        new Scenario("2 stages, 2 micro-batches of 8", 2, 2, 8, false),
                        new Scenario("4 stages, 4 micro-batches of 8", 4, 4, 8, false));
                case "pipelining" -> List.of(new Scenario("1 stage, 1 sequence", 1, 1, 1, false),
                        new Scenario("1 stage, 1 micro-batch of 8", 1, 1, 8, false),
                        new Scenario("2 stages, 2 micro-batches of 8", 2, 2, 8, false),
                        new Scenario("2 stages, 4 micro-batches of 8", 2, 4, 8, false));
                case "spin" -> List.of(new Scenario("4 stages, 4 micro-batches of 8", 4, 4, 8, false),
                        new Scenario("4 stages, 4 micro-batches of 8, --spin", 4, 4, 8, true));
                default -> List.of(layout(name));
            }) {
                byName.putIfAbsent(sc.name(), sc);
            }
        }
        List<Scenario> list = new ArrayList<>(byName.values());
        KvCacheType kv = KvCacheType.parse(kvCacheType, "--kv-cache-type");
        ModelSpec spec = ModelSpec.preset(preset).withType(ModelSpec.parseType(type));
        Path model = ModelCache.get(spec);
        LlamaConfig cfg;
        Tokenizer tok;
        double classifierLayers;
        try (GgufFile f = GgufFile.open(model)) {
            cfg = LlamaConfig.fromGguf(f);
            tok = Tokenizers.fromGguf(f);
            classifierLayers = PipelineConfig.classifierWeightInLayers(f);
        }
        if (!json) {
            System.out.printf(Locale.ROOT, "pipeline-bench: %s, %d tokens per sequence (rate after the first %d decode steps of each), "
                            + "%d repeats (median, min..max), %s KV cache, %d CPUs, JDK %s%n",
                    spec.describe(), tokens, warmupSteps(tokens), repeats, kv.key(), cpus, Runtime.version());
            if (llamaCppFile != null) {
                System.out.printf(Locale.ROOT, "llama.cpp = llama-batched-bench from %s (model %s), as many sequences on as many"
                        + " threads as the row's pipeline has cores; vs = tokens/s / llama.cpp's (middle of its range)%n", llamaCppFile, model);
                System.out.printf(Locale.ROOT, "%-42s %-18s %14s %20s %8s %12s %7s%n", "scenario", "layers", "decode tok/s", "spread",
                        "ratio", "llama.cpp", "vs");
            } else {
                System.out.printf(Locale.ROOT, "%-42s %-18s %14s %20s %8s%n", "scenario", "layers", "decode tok/s", "spread", "ratio");
            }
        }
        List<String> unmatched = new ArrayList<>();
        double base = 0;
        try (TaskProgress progress = TaskProgress.start("pipeline-bench", (long) list.size() * repeats, TaskProgress.ITEMS)) {
            for (Scenario sc : list) {
                double[] rates = new double[repeats];
                String layout = "";
                for (int r = 0; r < repeats; r++) {
                    // The last stage also runs the classifier: balance the work (8 + 4 for the stories110M shape).
                    PipelineConfig pc = PipelineConfig.defaults(cfg.layers(), sc.stages(), WaitMode.BLOCK)
                            .withStages(PipelineConfig.balancedSplit(cfg.layers(), sc.stages(), classifierLayers))
                            .withThreadsPerStage(sc.threadsPerStage())
                            .withWarmupMillis(Math.round(warmupSeconds * 1000))
                            .withKvCacheType(kv);
                    layout = layoutOf(pc);
                    rates[r] = run(model, cfg, tok, pc, sc);
                    progress.stepBy(1);
                }
                double[] s = rates.clone();
                Arrays.sort(s);
                double median = s[s.length / 2];
                if (base == 0) {
                    base = median;
                }
                LlamaCppFigures.Batched key = comparable(sc, cpus);
                LlamaCppFigures.Range theirs = llamaCpp.get(key);
                if (llamaCppFile != null && theirs == null) {
                    unmatched.add(sc.name() + " (" + key + ")");
                }
                if (json) {
                    Map<String, Object> row = new LinkedHashMap<>();
                    row.put("scenario", sc.name());
                    row.put("stages", sc.stages());
                    row.put("micro_batches", sc.microBatches());
                    row.put("batch", sc.batch());
                    row.put("threads_per_stage", sc.threadsPerStage());
                    row.put("layers", layout);
                    row.put("model", spec.describe());
                    row.put("tokens", tokens);
                    row.put("decode_tokens_per_second", rates);
                    row.put("median", median);
                    if (theirs != null) {
                        row.put("llama_cpp", Map.of("sequences", key.sequences(), "threads", key.threads(),
                                "tokens_per_second", new double[] {theirs.low(), theirs.high()}));
                        row.put("ratio_to_llama_cpp", median / theirs.middle());
                    }
                    progress.println(System.out, JSON.writeValueAsString(row));
                    continue;
                }
                String row = String.format(Locale.ROOT, "%-42s %-18s %14.1f %20s %7.2fx", sc.name(), layout, median,
                        String.format(Locale.ROOT, "%.1f..%.1f", s[0], s[s.length - 1]), median / base);
                if (llamaCppFile != null) {
                    row += theirs == null ? String.format(Locale.ROOT, " %12s %7s", "-", "-")
                            : String.format(Locale.ROOT, " %12s %6.2fx", theirs, median / theirs.middle());
                }
                progress.println(System.out, row);
            }
        }
        if (!unmatched.isEmpty()) {
            ConsoleLog.show("pipeline-bench: " + llamaCppFile + " has no llama-batched-bench record for " + String.join(", ", unmatched)
                    + "; it has " + llamaCpp.keySet().stream().map(Object::toString).toList());
        }
        return 0;
    }

    /**
     * The llama.cpp workload a scenario compares with: as many sequences as it keeps in flight, on as many threads as
     * it has cores (its stages' threads, at most the CPUs).
     */
    static LlamaCppFigures.Batched comparable(Scenario sc, int cpus) {
        return new LlamaCppFigures.Batched((long) sc.microBatches() * sc.batch(),
                Math.min(sc.stages() * sc.threadsPerStage(), cpus));
    }

    /** A scenario written SxMxB or SxMxBxT: S stages of T threads (default 1), M micro-batches of B sequences in flight. */
    private Scenario layout(String name) {
        String[] p = name.split("x");
        int[] v = {0, 0, 0, 1};
        try {
            if (p.length != 3 && p.length != 4) {
                throw new NumberFormatException();
            }
            for (int i = 0; i < p.length; i++) {
                v[i] = Integer.parseInt(p[i]);
                if (v[i] < 1) {
                    throw new NumberFormatException();
                }
            }
        } catch (NumberFormatException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "unknown scenario '" + name
                    + "': expected stages, pipelining, spin or a layout SxMxB or SxMxBxT of positive numbers (e.g. 2x2x8,"
                    + " or 1x1x16x2 for one stage of two threads)");
        }
        return new Scenario(String.format(Locale.ROOT, "%d stage%s, %d micro-batch%s of %d%s", v[0], v[0] == 1 ? "" : "s",
                v[1], v[1] == 1 ? "" : "es", v[2], v[3] == 1 ? "" : ", " + v[3] + " threads each"), v[0], v[1], v[2], false, v[3]);
    }

    private static String layoutOf(PipelineConfig pc) {
        StringBuilder sb = new StringBuilder();
        for (StageSpec s : pc.stages()) {
            sb.append(sb.length() == 0 ? "" : " ").append(s.layerCount());
        }
        return sb.toString();
    }

    private double run(Path model, LlamaConfig cfg, Tokenizer tok, PipelineConfig pc, Scenario sc) throws Exception {
        SpinPolicy policy = SpinPolicy.decide(pc, sc.spin(), Runtime.getRuntime().availableProcessors());
        int seqCount = sc.microBatches() * sc.batch();
        Sampler sampler = new Sampler(SamplingConfig.GREEDY, cfg.vocabSize());
        List<SequenceState> seqs = new ArrayList<>();
        for (int i = 0; i < seqCount; i++) {
            seqs.add(new SequenceState(i, "Once upon a time", tok.encode("Once upon a time " + i, true), tokens,
                    cfg.contextLength(), -1, t -> false, sampler));
        }
        try (RunDirectory run = RunDirectory.temporary("pipeline-bench")) {
            Path dir = run.path();
            PipelineRun.Settings s = new PipelineRun.Settings(model, pc, policy.waits(), policy.cpus(),
                    new Coordinator.Options(sc.microBatches(), sc.batch(), pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(),
                            pc.maxFrameBytes()).withSampleInLastStage(sampleInLastStage()), dir, 120_000, 120_000, 20_000,
                    seqCount * warmupSteps(tokens));
            PipelineRun.Outcome o = PipelineRun.run(s, cfg, seqs, (seq, t) -> { });
            return o.result().decodeTokensPerSecond();
        }
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new PipelineBench(), args));
    }
}
