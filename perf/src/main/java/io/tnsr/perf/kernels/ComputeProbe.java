package io.tnsr.perf.kernels;

import java.util.concurrent.TimeUnit;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The perf gate's reference for compute-bound figures (matrix-matrix kernels, prefill): vector FMAs
 * ({@code jdk.incubator.vector}, the preferred species, as the kernels use) over two 8 KiB float arrays that
 * stay in L1, 32 passes per call. It tracks the core's clock and vector width, not memory: the memory-bound
 * figures are divided by {@link MemoryProbe} instead.
 * FLOP/s = 2 x 2048 x 32 / time.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class ComputeProbe {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int N = 2048;
    static final int PASSES = 32;

    private final float[] a = new float[N];
    private final float[] b = new float[N];

    @Setup
    public void setup() {
        for (int i = 0; i < N; i++) {
            a[i] = (i % 7) * 0.125f - 0.3f;
            b[i] = (i % 5) * 0.25f - 0.5f;
        }
    }

    @Benchmark
    public float fma() {
        FloatVector acc0 = FloatVector.zero(F);
        FloatVector acc1 = acc0;
        FloatVector acc2 = acc0;
        FloatVector acc3 = acc0;
        int step = 4 * F.length();
        for (int p = 0; p < PASSES; p++) {
            for (int i = 0; i + step <= N; i += step) {
                acc0 = FloatVector.fromArray(F, a, i).fma(FloatVector.fromArray(F, b, i), acc0);
                acc1 = FloatVector.fromArray(F, a, i + F.length()).fma(FloatVector.fromArray(F, b, i + F.length()), acc1);
                acc2 = FloatVector.fromArray(F, a, i + 2 * F.length()).fma(FloatVector.fromArray(F, b, i + 2 * F.length()), acc2);
                acc3 = FloatVector.fromArray(F, a, i + 3 * F.length()).fma(FloatVector.fromArray(F, b, i + 3 * F.length()), acc3);
            }
        }
        return acc0.add(acc1).add(acc2).add(acc3).reduceLanes(VectorOperators.ADD);
    }
}
