package io.tnsr.perf.engine;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
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
 * One transformer layer forward (attention + feed-forward, {@link LayerRange#forward}) of the stories110M
 * shape (dim 768, 12 heads, FFN 2048), and its allocation: run with {@code -prof gc}, gc.alloc.rate.norm
 * must be about 0 B/op in steady state. JMH's gc profiler counts every thread of the JVM, its own included
 * (a background rate of a few KB/s, so a few B/op for a millisecond op); each iteration therefore also prints
 * what the benchmark thread itself allocated, which is 0 once the kernels are compiled.
 * <pre>
 *   tools/jmh -prof gc LayerForward
 * </pre>
 * <ul>
 * <li>{@code decode}: 1 token of one sequence, at positions cycling through [0, 256) (the sequence is
 * released and restarted, reusing its KV pages, every 256 steps).</li>
 * <li>{@code prefill128}: a 128-token prompt as one block (the sequence is released after each call).</li>
 * </ul>
 * The model file (a 1-layer synthetic model per weight type) is generated once into .build/models.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class LayerForwardBenchmark {
    private static final int PROMPT = 128;

    @Param({"F32", "Q8_0", "Q4_0"})
    public String type;

    private GgufFile file;
    private LayerRange range;
    private Batch batch;
    private float[] x;
    private float[] x0;
    private int position;
    private int seq;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        ModelSpec s = ModelSpec.stories110M();
        ModelSpec one = new ModelSpec(s.name() + "-1layer", s.dim(), 1, s.heads(), s.kvHeads(), s.ffnDim(), 512,
                s.contextLength(), false, GgmlType.valueOf(type), s.seed(), false);
        file = GgufFile.open(ModelCache.get(one));
        LlamaConfig c = LlamaConfig.fromGguf(file);
        range = new LayerRange(file, c, 0, 1, new KvCachePool(1, c.kvDim(), c.contextLength(), 16, 4L * c.contextLength()),
                PROMPT, 1);
        batch = new Batch(1, PROMPT);
        x0 = new float[PROMPT * c.dim()];
        SplittableRandom r = new SplittableRandom(1);
        for (int i = 0; i < x0.length; i++) {
            x0[i] = (float) r.nextGaussian();
        }
        x = x0.clone();
    }

    private long allocatedBefore;
    private long ops;

    @Setup(Level.Iteration)
    public void countAllocations() {
        allocatedBefore = allocatedBytes();
        ops = 0;
    }

    @TearDown(Level.Iteration)
    public void reportAllocations() {
        long bytes = allocatedBytes() - allocatedBefore;
        System.out.printf(" [benchmark thread: %d bytes allocated over %d ops]", bytes, ops);
    }

    private static long allocatedBytes() {
        return ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
                .getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    @TearDown(Level.Trial)
    public void close() {
        file.close();
    }

    @Benchmark
    public float decode() {
        ops++;
        if (position == 256) {
            range.endSequence(seq);
            position = 0;
        }
        System.arraycopy(x0, 0, x, 0, range.config().dim()); // the same input each step: values stay bounded
        range.prepare(batch.clear().add(seq, position++, 1, false));
        range.forward(batch, x);
        return x[0];
    }

    @Benchmark
    public float prefill128() {
        ops++;
        System.arraycopy(x0, 0, x, 0, x0.length);
        range.prepare(batch.clear().add(seq, 0, PROMPT, false));
        range.forward(batch, x);
        range.endSequence(seq);
        return x[0];
    }
}
