package io.tnsr.perf.gate.injected;

import io.tnsr.perf.kernels.KernelBenchmark;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Injected regressions of a weight-matrix kernel, with the state, parameters and units of
 * {@link KernelBenchmark#matmul()}:
 * <ul>
 * <li>{@link #twice}: each call's work done twice (as an accidental second pass over the weights would): 2x;</li>
 * <li>{@link #tenPercent}: each call takes 10% longer than the engine's kernel took for it ({@link Slowdown}).</li>
 * </ul>
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class InjectedSlowKernel {
    @Benchmark
    public float[] twice(KernelBenchmark k) {
        k.matmul();
        return k.matmul();
    }

    @Benchmark
    public float[] tenPercent(KernelBenchmark k) {
        long start = System.nanoTime();
        float[] out = k.matmul();
        Slowdown.stretch(start, 0.10);
        return out;
    }
}
