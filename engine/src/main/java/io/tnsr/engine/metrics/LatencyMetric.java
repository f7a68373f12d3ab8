package io.tnsr.engine.metrics;

import org.HdrHistogram.Histogram;
import org.HdrHistogram.SingleWriterRecorder;

/**
 * One latency metric (nanoseconds, 1 ns to 1 h, 3 significant digits) recorded by exactly one thread, read by
 * another without stopping it: the writer calls {@link #record}; a reader periodically takes the interval since
 * the last read with {@link #sampleInterval()} (HdrHistogram's interval flipping, {@link SingleWriterRecorder}).
 *
 * <pre>{@code
 * // once, before the threads start
 * MetricsLog log = new MetricsLog(runDir, 1000, "stage1-metrics");
 * LatencyMetric hop = log.add(new LatencyMetric("hop-stage0-stage1", "one-way hop: written by stage0 to decoded by stage1"));
 * log.start();                                        // its thread calls sampleInterval() every second
 *
 * // the one recording thread, per frame (no allocation, no lock)
 * long now = System.nanoTime();
 * hop.record(now - FrameHeader.traceNanos(buf, 0));
 *
 * // at the end
 * log.close();                                        // writes the last interval
 * }</pre>
 *
 * <p>Hazards:
 * <ul>
 *   <li>One writer thread per metric. Two threads calling {@link #record} on the same metric race on the
 *       recorder's counts and lose samples without any error; give each thread its own metric.</li>
 *   <li>One reader. {@link #sampleInterval()} returns a histogram it reuses on the next call: write or copy
 *       it before calling again.</li>
 *   <li>Values are clamped into [0, 1 h]: a negative value (a trace stamp from another host's clock, see
 *       {@link Correction} and the README on hops across hosts) is recorded as 0, not rejected.</li>
 *   <li>{@link #record} costs a few nanoseconds and allocates nothing (measured by {@code RecordBenchmark}
 *       in the perf module, 0 B/op under {@code -prof gc}).</li>
 * </ul>
 */
public final class LatencyMetric {
    /** One hour in nanoseconds: longer values are clamped (and would mean something else is badly wrong). */
    public static final long HIGHEST = 3_600_000_000_000L;
    /** Significant decimal digits kept by every histogram: values within 0.1% of each other may share a bucket. */
    public static final int DIGITS = 3;

    private final String name;
    private final String description;
    private final Correction correction;
    private LatencyBuckets buckets;
    private final SingleWriterRecorder recorder = new SingleWriterRecorder(1, HIGHEST, DIGITS);
    private Histogram interval;                   // recycled by sampleInterval (reader side only)

    /** A per-frame metric ({@link Correction#PER_FRAME}). */
    public LatencyMetric(String name, String description) {
        this(name, description, Correction.PER_FRAME);
    }

    /**
     * @param name        file-name-safe, e.g. {@code hop-stage0-stage1}; the log is {@code <name>.hlog}
     * @param description one line for people
     * @param correction  whether values are measured from an intended start (coordinated omission)
     */
    public LatencyMetric(String name, String description, Correction correction) {
        if (name.isEmpty() || !name.chars().allMatch(c -> Character.isLetterOrDigit(c) || c == '-' || c == '_' || c == '.')) {
            throw new IllegalArgumentException("a metric name must be file-name-safe (letters, digits, - _ .): '" + name + "'");
        }
        this.name = name;
        this.description = description;
        this.correction = correction;
    }

    /** File-name-safe metric name, e.g. {@code hop-stage0-stage1}. */
    public String name() {
        return name;
    }

    public String description() {
        return description;
    }

    public Correction correction() {
        return correction;
    }

    /** Writer thread only. Negative values (clock skew between hosts) are recorded as 0. */
    public void record(long nanos) {
        long v = nanos < 0 ? 0 : Math.min(nanos, HIGHEST);
        recorder.recordValue(v);
        if (buckets != null) {
            buckets.record(v);
        }
    }

    /** Also counts every value into {@code b} (set once, before recording starts). */
    void countInto(LatencyBuckets b) {
        this.buckets = b;
    }

    /** Reader thread only: the values recorded since the previous call (the returned histogram is reused). */
    public Histogram sampleInterval() {
        interval = recorder.getIntervalHistogram(interval);
        return interval;
    }
}
