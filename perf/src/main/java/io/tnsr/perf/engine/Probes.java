package io.tnsr.perf.engine;

import io.tnsr.engine.memory.Region;
import java.util.function.DoubleSupplier;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The two physical limits the engine is compared with, measured in the benchmark's own JVM on one thread:
 * memory bandwidth (a streaming read, with the Vector API, over a buffer much larger than the caches) and peak
 * FMA throughput (independent FMA chains held in registers). Each is the best of several runs.
 */
final class Probes {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    /** 512 MiB: 16x the L3 of the machine this was written on. */
    static final int STREAM_BYTES = 512 << 20;

    private Probes() {
    }

    /**
     * Bytes per second of a streaming read of {@link #STREAM_BYTES} from a heap float[], best of {@code runs}.
     * Measured here, a heap array streams 10-20% faster than an off-heap buffer ({@link #bufferBandwidth}; the
     * engine's mapped F32 weights land in between), so the engine bench takes the better of the two as the
     * ceiling a Java kernel can hope for.
     */
    static double heapBandwidth(int runs) {
        float[] a = new float[STREAM_BYTES / 4];
        for (int i = 0; i < a.length; i++) {
            a[i] = i;
        }
        return bestRate(runs, () -> stream(a));
    }

    private static float stream(float[] b) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        int step = F.length();
        for (int i = 0; i + 4 * step <= b.length; i += 4 * step) {
            a0 = a0.add(FloatVector.fromArray(F, b, i));
            a1 = a1.add(FloatVector.fromArray(F, b, i + step));
            a2 = a2.add(FloatVector.fromArray(F, b, i + 2 * step));
            a3 = a3.add(FloatVector.fromArray(F, b, i + 3 * step));
        }
        return a0.add(a1).add(a2).add(a3).reduceLanes(VectorOperators.ADD);
    }

    /** Bytes per second of a streaming read of {@link #STREAM_BYTES} from an off-heap buffer, best of {@code runs}. */
    static double bufferBandwidth(int runs) {
        Region b = Region.allocate(STREAM_BYTES);
        for (int i = 0; i < STREAM_BYTES; i += 4) {
            b.putFloat(i, i);
        }
        return bestRate(runs, () -> stream(b));
    }

    /** The best bytes per second of {@code runs} timed reads of {@link #STREAM_BYTES}, after 3 that compile the loop. */
    private static double bestRate(int runs, DoubleSupplier read) {
        double best = 0;
        double sink = 0;
        for (int r = 0; r < runs + 3; r++) {
            long t0 = System.nanoTime();
            sink += read.getAsDouble();
            best = Math.max(best, STREAM_BYTES * 1e9 / (System.nanoTime() - t0));
        }
        return sink == 42 ? best + 1e-9 : best; // uses the sums, so the reads cannot be optimized away
    }

    private static float stream(Region b) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        int step = F.length() * 4;
        for (int i = 0; i + 4 * step <= STREAM_BYTES; i += 4 * step) {
            a0 = a0.add(b.floats(F, i));
            a1 = a1.add(b.floats(F, i + step));
            a2 = a2.add(b.floats(F, i + 2 * step));
            a3 = a3.add(b.floats(F, i + 3 * step));
        }
        return a0.add(a1).add(a2).add(a3).reduceLanes(VectorOperators.ADD);
    }

    /** Floating-point operations per second (an FMA counts 2 per lane), best of {@code runs}. */
    static double peakFlops(int runs) {
        double best = 0;
        float sink = 0;
        long iters = 20_000_000;
        for (int r = 0; r < runs + 3; r++) {
            long t0 = System.nanoTime();
            sink += fmaLoop(iters);
            best = Math.max(best, iters * 12.0 * 2 * F.length() * 1e9 / (System.nanoTime() - t0));
        }
        return sink == 42f ? best + 1e-9 : best;
    }

    /** 12 independent FMA chains: enough to cover FMA latency x throughput on current x86 cores. */
    private static float fmaLoop(long iters) {
        FloatVector m = FloatVector.broadcast(F, 0.999999f);
        FloatVector c = FloatVector.broadcast(F, 1e-7f);
        FloatVector a0 = FloatVector.broadcast(F, 1f), a1 = a0.add(1), a2 = a0.add(2), a3 = a0.add(3);
        FloatVector a4 = a0.add(4), a5 = a0.add(5), a6 = a0.add(6), a7 = a0.add(7);
        FloatVector a8 = a0.add(8), a9 = a0.add(9), a10 = a0.add(10), a11 = a0.add(11);
        for (long i = 0; i < iters; i++) {
            a0 = a0.fma(m, c); a1 = a1.fma(m, c); a2 = a2.fma(m, c); a3 = a3.fma(m, c);
            a4 = a4.fma(m, c); a5 = a5.fma(m, c); a6 = a6.fma(m, c); a7 = a7.fma(m, c);
            a8 = a8.fma(m, c); a9 = a9.fma(m, c); a10 = a10.fma(m, c); a11 = a11.fma(m, c);
        }
        return a0.add(a1).add(a2).add(a3).add(a4).add(a5).add(a6).add(a7).add(a8).add(a9).add(a10).add(a11)
                .reduceLanes(VectorOperators.ADD);
    }
}
