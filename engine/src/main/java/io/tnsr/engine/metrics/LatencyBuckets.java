package io.tnsr.engine.metrics;

import java.util.Map;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * A latency's distribution as fixed buckets in a process's buckets file (a {@link CounterFile} named
 * {@code <process>}{@value #SUFFIX}, apart from its event counters), so that another process (a server's
 * {@code /metrics}) can read it live without parsing interval logs: one counter per bucket ({@code <metric>-le-<ns>},
 * the last {@code <metric>-le-inf}, each counting the values in it, not cumulatively) and {@code <metric>-sum-ns}.
 * Recording is a scan of {@link #BOUNDS_NANOS} and two counter increments: no allocation.
 */
public final class LatencyBuckets {
    /** Upper bounds of the buckets, in nanoseconds (a last bucket takes everything above). */
    static final long[] BOUNDS_NANOS = {5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000,
            5_000_000, 10_000_000, 20_000_000, 50_000_000, 100_000_000, 1_000_000_000};

    /** File name suffix of a process's buckets file. */
    public static final String SUFFIX = ".buckets";

    private final AtomicCounter[] counts;
    private final AtomicCounter sumNanos;

    LatencyBuckets(CounterFile log, String metric) {
        counts = new AtomicCounter[BOUNDS_NANOS.length + 1];
        for (int i = 0; i < BOUNDS_NANOS.length; i++) {
            counts[i] = log.counter(metric + "-le-" + BOUNDS_NANOS[i], "values of " + metric + " up to " + BOUNDS_NANOS[i] + " ns");
        }
        counts[BOUNDS_NANOS.length] = log.counter(metric + "-le-inf", "values of " + metric + " above the last bound");
        sumNanos = log.counter(metric + "-sum-ns", "sum of " + metric + "'s values in ns");
    }

    /** Writer thread only. */
    void record(long nanos) {
        int i = 0;
        while (i < BOUNDS_NANOS.length && nanos > BOUNDS_NANOS[i]) {
            i++;
        }
        counts[i].incrementRelease();
        sumNanos.getAndAddRelease(nanos);
    }

    /** A distribution read back: bounds in seconds (the last +Inf), each bucket's count, the sum in seconds. */
    public record Snapshot(double[] upperBoundsSeconds, long[] counts, double sumSeconds) {
    }

    /** Reads {@code metric}'s buckets from a process's buckets file ({@link CounterFile#read}), or null when it has none. */
    public static Snapshot read(Map<String, CounterFile.Reading> counters, String metric) {
        CounterFile.Reading sum = counters.get(metric + "-sum-ns");
        if (sum == null) {
            return null;
        }
        double[] bounds = new double[BOUNDS_NANOS.length + 1];
        long[] counts = new long[bounds.length];
        for (int i = 0; i < bounds.length; i++) {
            String key = i < BOUNDS_NANOS.length ? metric + "-le-" + BOUNDS_NANOS[i] : metric + "-le-inf";
            bounds[i] = i < BOUNDS_NANOS.length ? BOUNDS_NANOS[i] / 1e9 : Double.POSITIVE_INFINITY;
            CounterFile.Reading r = counters.get(key);
            counts[i] = r == null ? 0 : r.value();
        }
        return new Snapshot(bounds, counts, sum.value() / 1e9);
    }
}
