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
 * The perf gate's reference for compute-bound and cache-resident figures (small and matrix-matrix kernels,
 * prefill): dot products of 64 rows of 2048 floats (512 KiB, in L2) with one vector, written here with
 * {@code jdk.incubator.vector} (the preferred species, one FMA accumulator per row, as a kernel would), not with
 * the engine's code. It tracks the core's clock, vector width and L2, not DRAM: the memory-bound figures are
 * divided by {@link StreamProbe} instead. FLOP/s = 2 x 64 x 2048 / time.
 *
 * <p>(A tighter loop of independent FMAs over L1-resident arrays was tried first: from one JVM to the next it
 * ran at one of two speeds 18% apart, which made it a poor yardstick.)
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class ComputeProbe {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    static final int N = 2048;
    static final int DOT_ROWS = 64;

    private final float[] b = new float[N];
    private final float[] rows = new float[DOT_ROWS * N];
    private final float[] out = new float[DOT_ROWS];

    @Setup
    public void setup() {
        for (int i = 0; i < N; i++) {
            b[i] = (i % 5) * 0.25f - 0.5f;
        }
        for (int i = 0; i < rows.length; i++) {
            rows[i] = (i % 11) * 0.0625f - 0.3f;
        }
    }

    @Benchmark
    public float[] dot() {
        for (int r = 0; r < DOT_ROWS; r++) {
            FloatVector acc = FloatVector.zero(F);
            int base = r * N;
            for (int i = 0; i < N; i += F.length()) {
                acc = FloatVector.fromArray(F, rows, base + i).fma(FloatVector.fromArray(F, b, i), acc);
            }
            out[r] = acc.reduceLanes(VectorOperators.ADD);
        }
        return out;
    }
}
