package io.tnsr.engine.metrics;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.SingleWriterRecorder;

/**
 * One latency metric (nanoseconds, 3 significant digits) recorded by exactly one thread, read by another
 * without stopping it: the writer calls {@link #record}; a reader periodically takes the interval since the
 * last read with {@link #sampleInterval()} (HdrHistogram's interval flipping).
 *
 * <p>{@link #record} allocates nothing and takes no lock: a few nanoseconds on the hot path.
 */
public final class LatencyMetric {
    /** One hour in nanoseconds: longer values are clamped (and would mean something else is badly wrong). */
    public static final long HIGHEST = 3_600_000_000_000L;

    private final String name;
    private final String description;
    private final SingleWriterRecorder recorder = new SingleWriterRecorder(1, HIGHEST, 3);
    private Histogram interval;                   // recycled by sampleInterval (reader side only)

    public LatencyMetric(String name, String description) {
        this.name = name;
        this.description = description;
    }

    /** File-name-safe metric name, e.g. {@code hop-stage0-stage1}. */
    public String name() {
        return name;
    }

    public String description() {
        return description;
    }

    /** Writer thread only. Negative values (clock skew between hosts) are recorded as 0. */
    public void record(long nanos) {
        recorder.recordValue(nanos < 0 ? 0 : Math.min(nanos, HIGHEST));
    }

    /** Reader thread only: the values recorded since the previous call (the returned histogram is reused). */
    public Histogram sampleInterval() {
        interval = recorder.getIntervalHistogram(interval);
        return interval;
    }
}
