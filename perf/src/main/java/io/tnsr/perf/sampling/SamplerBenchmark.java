package io.tnsr.perf.sampling;

import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
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
 * Choosing one token from a row of logits ({@link Sampler#sample}), per vocabulary size, sampling settings and shape
 * of the distribution. The settings: {@code greedy}; {@code t0.8-p0.95}, run-pipeline's and serve's defaults
 * (temperature 0.8, top-p 0.95, no top-k); {@code t0.8-k40-p0.95}, llama.cpp's defaults. The distributions:
 * {@code flat}, logits of a model with random weights (the synthetic models: normal, standard deviation 1, so the
 * nucleus holds most of the vocabulary); {@code peaked}, a trained model's shape (normal, standard deviation 2, and
 * 16 tokens raised by 8 to 14: a nucleus of tens to hundreds of tokens). Rows are drawn once; every call samples one
 * of 64 of them with its own random state, as a last stage does for a batch of sequences.
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 SamplerBenchmark
 *   tools/jmh -p vocab=151936 -p settings=t0.8-p0.95 -p logits=peaked SamplerBenchmark
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class SamplerBenchmark {
    private static final int ROWS = 64;

    @Param({"32000", "151936"}) // Llama 2's vocabulary; Qwen2's
    public int vocab;

    @Param({"greedy", "t0.8-p0.95", "t0.8-k40-p0.95"})
    public String settings;

    @Param({"flat", "peaked"})
    public String logits;

    private Sampler sampler;
    private SamplingConfig config;
    private float[] rows;
    private final long[] state = new long[1];
    private int next;

    @Setup
    public void setup() {
        config = switch (settings) {
            case "greedy" -> SamplingConfig.GREEDY;
            case "t0.8-p0.95" -> new SamplingConfig(0.8f, 0, 0.95f, 1);
            case "t0.8-k40-p0.95" -> new SamplingConfig(0.8f, 40, 0.95f, 1);
            default -> throw new IllegalArgumentException("settings: greedy, t0.8-p0.95 or t0.8-k40-p0.95, got " + settings);
        };
        boolean peaked = switch (logits) {
            case "flat" -> false;
            case "peaked" -> true;
            default -> throw new IllegalArgumentException("logits: flat or peaked, got " + logits);
        };
        sampler = new Sampler(config, vocab);
        SplittableRandom r = new SplittableRandom(7);
        rows = new float[ROWS * vocab];
        for (int row = 0; row < ROWS; row++) {
            for (int i = 0; i < vocab; i++) {
                rows[row * vocab + i] = (float) (gaussian(r) * (peaked ? 2 : 1));
            }
            for (int k = 0; peaked && k < 16; k++) {
                rows[row * vocab + r.nextInt(vocab)] += 8 + 6 * (float) r.nextDouble();
            }
        }
        state[0] = sampler.newRandomState(0);
        JitWarmup.untilAllocationFree("sampler " + settings + " " + logits + " " + vocab, this::sample);
    }

    private static double gaussian(SplittableRandom r) {
        double u = 1 - r.nextDouble();
        return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r.nextDouble());
    }

    @Benchmark
    public int sample() {
        int row = next++ & (ROWS - 1);
        return sampler.sample(config, rows, row * vocab, state);
    }
}
