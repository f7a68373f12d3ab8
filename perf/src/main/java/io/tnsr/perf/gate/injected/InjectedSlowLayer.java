package io.tnsr.perf.gate.injected;

import io.tnsr.perf.engine.LayerBenchmark;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Injected regression: {@link LayerBenchmark#forward()} (same state, parameters and units), each call 10% longer
 * than the engine's layer took for it ({@link Slowdown}).
 */
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(1)
public class InjectedSlowLayer {
    @Benchmark
    public float[] tenPercent(LayerBenchmark layer) {
        long start = System.nanoTime();
        float[] x = layer.forward();
        Slowdown.stretch(start, 0.10);
        return x;
    }
}
