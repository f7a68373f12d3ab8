package io.tnsr.perf.engine;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelSpec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/engine-bench}: single-process, single-thread decode and prefill speed of the engine on a
 * synthetic model, printed as a table. Each figure is the median of several timed repeats after a warm-up,
 * with the spread (min..max).
 */
@Command(name = "engine-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Measures single-thread decode and prefill tokens/s of the engine on a synthetic model",
                "(generated once into .build/models). Prints one row per workload: median of the repeats, min..max."})
public final class EngineBench implements Callable<Integer> {

    @Option(names = "--preset", defaultValue = "stories110M", description = "Model shape: stories110M, stories15M, tiny (default: ${DEFAULT-VALUE}).")
    String preset;

    @Option(names = "--types", defaultValue = "f32", split = ",", description = "Weight types to measure, e.g. f32,f16 (default: ${DEFAULT-VALUE}).")
    List<String> types;

    @Option(names = "--decode-tokens", defaultValue = "48", description = "Decode steps timed per repeat (default: ${DEFAULT-VALUE}).")
    int decodeSteps;

    @Option(names = "--prefill", defaultValue = "128", description = "Prompt length of the prefill workload (default: ${DEFAULT-VALUE}).")
    int prefill;

    @Option(names = "--batches", defaultValue = "8,16", split = ",", description = "Batched decode sizes (default: ${DEFAULT-VALUE}).")
    List<Integer> batches;

    @Option(names = "--repeats", defaultValue = "3", description = "Timed repeats per workload (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Override
    public Integer call() throws Exception {
        System.out.printf(Locale.ROOT, "engine-bench: %s, 1 compute thread, %d repeats (median, min..max), JDK %s, %d CPUs%n",
                preset, repeats, Runtime.version(), Runtime.getRuntime().availableProcessors());
        System.out.printf(Locale.ROOT, "%-34s %12s %22s%n", "workload", "tokens/s", "spread");
        for (String t : types) {
            GgmlType type = GgmlType.valueOf(t.toUpperCase(Locale.ROOT));
            ModelSpec spec = ModelSpec.preset(preset).withType(type);
            try (GgufFile file = GgufFile.open(io.tnsr.engine.synth.ModelCache.get(spec))) {
                LlamaConfig c = LlamaConfig.fromGguf(file);
                int maxSeqs = batches.stream().mapToInt(Integer::intValue).max().orElse(1);
                int maxTokens = Math.max(prefill, maxSeqs * 16);
                LayerRange range = new LayerRange(file, c, 0, c.layers(),
                        new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, (long) (maxSeqs + 1) * c.contextLength()),
                        maxTokens, maxSeqs);
                Runner r = new Runner(range, maxTokens, maxSeqs);
                report("decode, 1 sequence, " + type, r.decode(1, decodeSteps, repeats));
                report("prefill " + prefill + " tokens, " + type, r.prefill(prefill, repeats));
                for (int b : batches) {
                    report("decode, " + b + " sequences batched, " + type, r.decode(b, Math.max(8, decodeSteps / 4), repeats));
                }
            }
        }
        return 0;
    }

    private static void report(String workload, double[] rates) {
        double[] s = rates.clone();
        Arrays.sort(s);
        System.out.printf(Locale.ROOT, "%-34s %12.1f %22s%n", workload, s[s.length / 2],
                String.format(Locale.ROOT, "%.1f..%.1f", s[0], s[s.length - 1]));
    }

    /** Drives a whole-model range with fixed token ids; no sampling, no I/O. */
    static final class Runner {
        private final LayerRange range;
        private final Batch batch;
        private final int[] tokens;
        private final float[] x;
        private final float[] logits;
        private int nextSeq;

        Runner(LayerRange range, int maxTokens, int maxSeqs) {
            this.range = range;
            this.batch = new Batch(maxSeqs, maxTokens);
            this.tokens = new int[maxTokens];
            this.x = new float[maxTokens * range.config().dim()];
            this.logits = new float[maxSeqs * range.config().vocabSize()];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = 3 + (i * 7919) % (range.config().vocabSize() - 3);
            }
        }

        private void call() {
            range.prepare(batch, tokens, 0);
            range.embed(batch, tokens, 0, x);
            range.forward(batch, x);
            range.logits(batch, x, logits);
        }

        /** Tokens/s of {@code steps} decode calls of {@code b} sequences (each after a 16-token prompt), per repeat. */
        double[] decode(int b, int steps, int repeats) {
            double[] rates = new double[repeats];
            for (int rep = -1; rep < repeats; rep++) { // rep -1: warm-up
                int[] ids = new int[b];
                batch.clear();
                for (int s = 0; s < b; s++) {
                    ids[s] = nextSeq++;
                    batch.add(ids[s], 0, 16, true);
                }
                call();
                long t0 = System.nanoTime();
                int n = rep < 0 ? Math.min(steps, 8) : steps;
                for (int step = 0; step < n; step++) {
                    batch.clear();
                    for (int s = 0; s < b; s++) {
                        batch.add(ids[s], 16 + step, 1, true);
                    }
                    call();
                }
                long t = System.nanoTime() - t0;
                if (rep >= 0) {
                    rates[rep] = (double) b * n * 1e9 / t;
                }
                for (int id : ids) {
                    range.endSequence(id);
                }
            }
            return rates;
        }

        /** Tokens/s of prefilling a {@code len}-token prompt as one block, per repeat. */
        double[] prefill(int len, int repeats) {
            double[] rates = new double[repeats];
            for (int rep = -1; rep < repeats; rep++) {
                int id = nextSeq++;
                batch.clear().add(id, 0, len, true);
                long t0 = System.nanoTime();
                call();
                long t = System.nanoTime() - t0;
                if (rep >= 0) {
                    rates[rep] = len * 1e9 / t;
                }
                range.endSequence(id);
            }
            return rates;
        }
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new EngineBench()).execute(args));
    }
}
