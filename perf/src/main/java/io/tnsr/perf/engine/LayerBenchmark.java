package io.tnsr.perf.engine;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.perf.JitWarmup;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * One transformer layer's forward pass ({@link LayerRange#forward} over a range of one layer) at the shape of
 * stories110M (dim 768, 12 heads, FFN 2048) for each weight type; the perf gate measures its F32 figures:
 * <ul>
 * <li>{@code phase = decode}: one token at position 128 of a sequence whose first 128 positions are cached
 * (the same position is rewritten each call, so every call does the same work);</li>
 * <li>{@code phase = prefill}: a 128-token prompt from position 0.</li>
 * </ul>
 * The layer is the middle one of a 3-layer synthetic model with the stories110M layer shape (generated once
 * into .build/models; a middle layer maps no embedding or classifier). The input rows are restored before each
 * call so values stay in range. Setup calls the layer until C2 runs it ({@link JitWarmup}). Steady state must
 * allocate nothing ({@code -prof gc}).
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc LayerBenchmark
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc LayerBenchmark -p phase=decode -p type=Q8_0
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class LayerBenchmark {
    static final int PROMPT = 128;

    @Param({"decode", "prefill"})
    public String phase;

    @Param({"F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"}) // dim 768 and FFN 2048: whole 256-element K-quant blocks
    public String type;

    private GgufFile file;
    private LayerRange range;
    private Batch batch;
    private float[] x;
    private float[] input;
    private int rows;
    private int position;

    /** The stories110M layer shape in a 3-layer model with a small vocabulary. */
    public static ModelSpec spec(GgmlType type) {
        ModelSpec s = ModelSpec.stories110M();
        return new ModelSpec("synthetic-stories110M-3layers", s.dim(), 3, s.heads(), s.kvHeads(), s.ffnDim(), 512,
                s.contextLength(), false, type, s.seed(), false);
    }

    @Setup(Level.Trial)
    public void setup() throws Exception {
        file = GgufFile.open(ModelCache.get(spec(GgmlType.valueOf(type.toUpperCase(Locale.ROOT)))));
        LlamaConfig c = LlamaConfig.fromGguf(file);
        range = new LayerRange(file, c, 1, 2, new KvCachePool(1, c.kvDim(), c.contextLength(), KvCachePool.DEFAULT_PAGE_TOKENS,
                2L * c.contextLength()), PROMPT, 1);
        batch = new Batch(1, PROMPT);
        x = new float[PROMPT * c.dim()];
        input = new float[x.length];
        SplittableRandom r = new SplittableRandom(5);
        for (int i = 0; i < input.length; i++) {
            input[i] = (float) (r.nextDouble() * 2 - 1);
        }
        switch (phase) {
            case "decode" -> {
                System.arraycopy(input, 0, x, 0, x.length); // cache the first 128 positions
                batch.clear().add(0, 0, PROMPT, false);
                range.prepare(batch);
                range.forward(batch, x);
                rows = 1;
                position = PROMPT;
            }
            case "prefill" -> {
                rows = PROMPT;
                position = 0;
            }
            default -> throw new IllegalArgumentException("phase must be decode or prefill, not " + phase);
        }
        JitWarmup.untilAllocationFree(type + " " + phase, this::forward);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        file.close();
    }

    @Benchmark
    public float[] forward() {
        System.arraycopy(input, 0, x, 0, rows * range.config().dim());
        batch.clear().add(0, position, rows, false);
        range.prepare(batch);
        range.forward(batch, x);
        return x;
    }
}
