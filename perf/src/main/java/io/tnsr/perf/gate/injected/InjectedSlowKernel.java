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
 * Injected regression: a weight-matrix kernel about 2x slower than the engine's, obtained by doing each call's
 * work twice (as an accidental double pass over the weights would). Same state, parameters and units as
 * {@link KernelBenchmark#matmul()}.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class InjectedSlowKernel {
    @Benchmark
    public float[] matmul(KernelBenchmark k) {
        k.matmul();
        return k.matmul();
    }
}
