package io.tnsr.engine.metrics;

import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogWriter;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * Writes each {@link LatencyMetric} of a process to its own HdrHistogram interval log
 * ({@code DIR/<metric>.hlog}, readable by HdrHistogram's {@code HistogramLogReader} and
 * {@code HistogramLogProcessor}), one interval per period, from a background thread, so the threads that
 * record never wait for I/O. {@link #close()} writes the last interval.
 *
 * <p>Each log starts with comment lines the HdrHistogram tools skip and {@link LatencySummary} reads back:
 * <pre>
 * #[metric: hop-stage0-stage1]
 * #[description: one-way hop: written by stage0 to decoded by stage1]
 * #[unit: nanoseconds]
 * #[coordinated omission: uncorrected: per-frame time recorded as it happened; ...]
 * </pre>
 *
 * <p>Counters (events such as stalls, frames, compute time) are Agrona counters in {@code DIR/<process>.counters}
 * ({@link CounterFile}), counted in place and readable by other processes at any time.
 *
 * <p>Every process of a run (each stage, the coordinator) has its own MetricsLog writing into the same run
 * directory; metric names are unique across the run (they name the stage or hop), so files never collide.
 */
public final class MetricsLog implements AutoCloseable {
    private final Path dir;
    private final List<LatencyMetric> metrics = new ArrayList<>();
    private final List<HistogramLogWriter> writers = new ArrayList<>();
    private final List<PrintStream> streams = new ArrayList<>();
    private CounterFile counters;
    private CounterFile buckets;        // latency distributions for live readers (LatencyBuckets), apart from the events
    private final String processName;   // names the counters file and the flushing thread
    private final ScheduledExecutorService flusher;
    private final long periodMillis;
    private final long startMillis = System.currentTimeMillis();

    public MetricsLog(Path dir, long periodMillis, String threadName) {
        this.dir = dir;
        this.periodMillis = periodMillis;
        this.processName = threadName;
        this.flusher = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, threadName);
            t.setDaemon(true);
            return t;
        });
    }

    /** Registers a metric before {@link #start()}; returns it for the recording thread. */
    public synchronized LatencyMetric add(LatencyMetric m) {
        metrics.add(m);
        return m;
    }

    /**
     * Registers a metric that is also counted into {@link LatencyBuckets} in this process's buckets file
     * ({@code <process>}{@value LatencyBuckets#SUFFIX}), for readers in other processes.
     */
    public synchronized LatencyMetric addBucketed(LatencyMetric m) {
        if (buckets == null) {
            buckets = CounterFile.create(createdDir(), processName, LatencyBuckets.SUFFIX);
        }
        m.countInto(new LatencyBuckets(buckets, m.name()));
        return add(m);
    }

    /** A new event counter in this process's counters file (with its one-line description). */
    public synchronized AtomicCounter counter(String name, String description) {
        if (counters == null) {
            counters = CounterFile.create(createdDir(), processName);
        }
        return counters.counter(name, description);
    }

    private Path createdDir() {
        try {
            return Files.createDirectories(dir);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write metrics to " + dir, e);
        }
    }

    public void start() {
        try {
            Files.createDirectories(dir);
            for (LatencyMetric m : metrics) {
                PrintStream out = new PrintStream(new FileOutputStream(dir.resolve(m.name() + ".hlog").toFile()), false, "UTF-8");
                HistogramLogWriter w = new HistogramLogWriter(out);
                w.outputComment("[" + LatencySummary.HEADER_METRIC + m.name() + "]");
                w.outputComment("[" + LatencySummary.HEADER_DESCRIPTION + m.description() + "]");
                w.outputComment("[" + LatencySummary.HEADER_UNIT + "nanoseconds]");
                w.outputComment("[" + LatencySummary.HEADER_CORRECTION + m.correction().describe() + "]");
                w.outputLogFormatVersion();
                w.outputStartTime(startMillis);
                w.setBaseTime(startMillis);
                w.outputLegend();
                streams.add(out);
                writers.add(w);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write metrics to " + dir, e);
        }
        flusher.scheduleAtFixedRate(this::flush, periodMillis, periodMillis, TimeUnit.MILLISECONDS);
    }

    private synchronized void flush() {
        for (int i = 0; i < metrics.size() && i < writers.size(); i++) {
            Histogram h = metrics.get(i).sampleInterval();
            if (h.getTotalCount() > 0) {
                writers.get(i).outputIntervalHistogram(h);
            }
            streams.get(i).flush();
        }
    }

    @Override
    public void close() {
        flusher.shutdown();
        try {
            if (!flusher.awaitTermination(5, TimeUnit.SECONDS)) {
                flusher.shutdownNow();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        flush();
        synchronized (this) {
            for (PrintStream s : streams) {
                s.close();
            }
            if (buckets != null) {
                buckets.close();
            }
            if (counters != null) {
                counters.close();
                counters = null;
            }
        }
    }
}
