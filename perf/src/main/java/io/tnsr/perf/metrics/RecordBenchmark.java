package io.tnsr.perf.metrics;

import io.tnsr.engine.metrics.LatencyMetric;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The cost of recording one latency on the hot path ({@link LatencyMetric#record}: HdrHistogram's
 * {@code SingleWriterRecorder}, 3 significant digits), and its allocation (run with {@code -prof gc}:
 * gc.alloc.rate.norm must be about 0 B/op):
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc RecordBenchmark
 * </pre>
 * <ul>
 * <li>{@code record}: {@code metric.record(v)} over values spread from 1 us to 10 ms (so the bucket changes).</li>
 * <li>{@code recordSinceStamp}: what a stage does per frame, {@code metric.record(System.nanoTime() - stamp)}.</li>
 * <li>{@code histogramRecordValue}: a bare {@code Histogram.recordValue}, the floor under the two above.</li>
 * <li>{@code flipping:writer} / {@code flipping:reader}: one thread records while another takes an interval
 * histogram every millisecond, as {@code MetricsLog} does every second (1000 times more often here, so the
 * writer meets flips); the reader's time per op is mostly its 1 ms sleep.</li>
 * </ul>
 * Not final: JMH generates subclasses of benchmark classes.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RecordBenchmark {
    private static final int VALUES = 1 << 12;

    /** Pseudo-random latencies, log-uniform between 1 us and 10 ms, fixed seed. */
    static long[] values() {
        SplittableRandom r = new SplittableRandom(42);
        long[] v = new long[VALUES];
        for (int i = 0; i < VALUES; i++) {
            v[i] = (long) Math.pow(10, 3 + 4 * r.nextDouble());
        }
        return v;
    }

    /** One thread's metric. */
    @State(Scope.Thread)
    public static class Single {
        final LatencyMetric metric = new LatencyMetric("bench", "benchmark");
        final Histogram histogram = new Histogram(1, LatencyMetric.HIGHEST, LatencyMetric.DIGITS);
        long[] values;
        int i;
        long stamp;

        @Setup
        public void setup() {
            values = values();
            stamp = System.nanoTime();
        }

        long next() {
            return values[i++ & (VALUES - 1)];
        }
    }

    /** A metric shared by its writer and its reader. */
    @State(Scope.Group)
    public static class Shared {
        final LatencyMetric metric = new LatencyMetric("bench", "benchmark");
        long[] values;

        @Setup
        public void setup() {
            values = values();
        }
    }

    /** The writer's own cursor. */
    @State(Scope.Thread)
    public static class Cursor {
        int i;
    }

    @Benchmark
    public void record(Single s) {
        s.metric.record(s.next());
    }

    @Benchmark
    public void recordSinceStamp(Single s) {
        s.metric.record(System.nanoTime() - s.stamp);
    }

    @Benchmark
    public void histogramRecordValue(Single s) {
        s.histogram.recordValue(s.next());
    }

    @Benchmark
    @Group("flipping")
    @GroupThreads(1)
    public void writer(Shared s, Cursor c) {
        s.metric.record(s.values[c.i++ & (VALUES - 1)]);
    }

    @Benchmark
    @Group("flipping")
    @GroupThreads(1)
    public long reader(Shared s) throws InterruptedException {
        Thread.sleep(1);
        return s.metric.sampleInterval().getTotalCount();
    }
}
