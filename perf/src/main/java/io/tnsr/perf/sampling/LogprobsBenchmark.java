package io.tnsr.perf.sampling;

import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.perf.JitWarmup;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The log-probabilities a request asks for ({@code logprobs}, {@code top_logprobs}: {@link TokenLogprobs#compute}),
 * per token, for the chosen token and the 5 most likely, over 64 rows of normal logits in turn.
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 LogprobsBenchmark
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class LogprobsBenchmark {
    private static final int ROWS = 64;

    @Param({"32000", "151936"})
    public int vocab;

    private final TokenLogprobs logprobs = new TokenLogprobs(5);
    private float[] rows;
    private int next;

    @Setup
    public void setup() {
        SplittableRandom r = new SplittableRandom(3);
        rows = new float[ROWS * vocab];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = (float) ((r.nextDouble() * 2 - 1) * 6);
        }
        JitWarmup.untilAllocationFree("logprobs " + vocab, this::compute);
    }

    @Benchmark
    public float compute() {
        int row = next++ & (ROWS - 1);
        logprobs.compute(rows, row * vocab, vocab, row);
        return logprobs.logprob();
    }
}
