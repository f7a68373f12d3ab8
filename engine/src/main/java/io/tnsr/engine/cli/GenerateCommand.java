package io.tnsr.engine.cli;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.generate.GenerationReport;
import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.ThreadBudget;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/** {@code tools/generate}: the whole model in one process, one compute thread. */
@Command(name = "generate", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Generates text with a GGUF model (llama, qwen2, qwen3) in one process and streams it as it is produced."
                + " Several prompts run together as one batch. --json prints one JSON object at the end instead."})
public final class GenerateCommand implements Callable<Integer> {
    @Option(names = "--model", required = true, paramLabel = "FILE.gguf", description = "The model.")
    Path model;

    @Mixin
    GenerationOptions gen;

    @Option(names = "--max-batch-tokens", defaultValue = "256", paramLabel = "N",
            description = "Most token rows per forward call (prefill chunk size; default: ${DEFAULT-VALUE}).")
    int maxBatchTokens;

    @Option(names = "--kv-cache-type", defaultValue = "f32", paramLabel = "TYPE", description = {"How the KV cache stores"
            + " keys and values: f32 (exact) or f16 (half the memory per position, rounded once when stored)"
            + " (default: ${DEFAULT-VALUE})."})
    String kvCacheType;

    @Option(names = "--threads", defaultValue = "auto", paramLabel = "N|auto", description = {"Threads sharing the rows of"
            + " every matmul, 1 to 256, or auto: the CPUs this process may use (default: ${DEFAULT-VALUE}). The same"
            + " tokens, bit for bit, with any number."})
    String threads;

    @Override
    public Integer call() throws Exception {
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        if (maxBatchTokens < 1) {
            throw new IllegalArgumentException("--max-batch-tokens must be 1 or more, got " + maxBatchTokens);
        }
        SamplingConfig sampling = gen.sampling();   // a bad setting is named before the model loads
        int parsed = ThreadCount.parse("--threads", threads);
        int threadCount = parsed == 0 ? ThreadCount.cpus() : parsed;
        String advice = ThreadBudget.advice(threadCount, Runtime.getRuntime().availableProcessors());
        if (advice != null) {
            System.err.println("generate: " + advice);
        }
        try (GgufFile file = GgufFile.open(model)) {
            LlamaConfig c = LlamaConfig.fromGguf(file);
            Tokenizer tok = Tokenizers.fromGguf(file);
            Sampler sampler = new Sampler(sampling, c.vocabSize());
            List<String> prompts = gen.prompts(null);
            List<SequenceState> seqs = gen.sequences(prompts, tok, c.contextLength(), sampler);
            int maxSeqs = Math.min(255, seqs.size());
            KvCachePool pool = new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), KvCachePool.DEFAULT_PAGE_TOKENS,
                    (long) c.contextLength() * maxSeqs, KvCacheType.parse(kvCacheType, "--kv-cache-type"));
            TextOutput text = new TextOutput(out, tok, seqs, gen.json());
            Generator.Stats st;
            try (LayerRange range = new LayerRange(file, c, 0, c.layers(), pool, Math.max(maxBatchTokens, maxSeqs), maxSeqs,
                    threadCount, bytes -> { })) {
                st = new Generator(range, text).run(seqs);
            }
            long generated = seqs.stream().mapToLong(SequenceState::generatedCount).sum();
            double tps = st.wallNanos() == 0 ? 0 : generated * 1e9 / st.wallNanos();
            System.err.println(summary(seqs, generated, st, tps, threadCount));
            if (gen.json()) {
                out.println(new GenerationReport(model.toString(), 1, seqs, text::text, tps)
                        .put("seed", gen.seed())
                        .put("temperature", (double) sampler.config().temperature())
                        .put("generated_tokens_total", generated)
                        .put("prefill_tokens_per_second", st.prefillTokensPerSecond())
                        .put("decode_tokens_per_second", st.decodeTokensPerSecond())
                        .put("wall_seconds", st.wallNanos() / 1e9)
                        .put("threads", threadCount)
                        .toJson());
            }
            boolean anyFailed = seqs.stream().anyMatch(s -> s.error() != null);
            return anyFailed ? 1 : 0;
        }
    }

    /**
     * The line on stderr at the end, in run-pipeline's style: "generate: 64 tokens for 1 sequence on 2 threads in 0.52
     * s: 123.1 tokens/s (prefill 410.0 tokens/s, decode 131.2 tokens/s), time to first token 41 ms" (the median over
     * several sequences, "(p50)").
     */
    static String summary(List<SequenceState> seqs, long generated, Generator.Stats st, double tps, int threads) {
        double[] ttft = seqs.stream().filter(s -> s.timeToFirstTokenNanos() > 0)
                .mapToDouble(s -> s.timeToFirstTokenNanos() / 1e6).sorted().toArray();
        double ttftP50 = ttft.length == 0 ? 0 : ttft[ttft.length / 2];
        long failed = seqs.stream().filter(s -> s.error() != null).count();
        String firstError = seqs.stream().map(SequenceState::error).filter(e -> e != null).findFirst().orElse("");
        int n = seqs.size();
        return String.format(Locale.ROOT,
                "generate: %d tokens for %d sequence%s%s on %d thread%s in %.2f s: %.1f tokens/s (prefill %.1f tokens/s,"
                        + " decode %.1f tokens/s), time to first token %.0f ms%s",
                generated, n, n == 1 ? "" : "s", failed == 0 ? "" : " (" + failed + " failed" + (failed == 1 ? ": " : ", the first: ") + firstError + ")", threads, threads == 1 ? "" : "s",
                st.wallNanos() / 1e9, tps,
                st.prefillTokensPerSecond(), st.decodeTokensPerSecond(), ttftP50, n == 1 ? "" : " (p50)");
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new GenerateCommand(), args));
    }
}
