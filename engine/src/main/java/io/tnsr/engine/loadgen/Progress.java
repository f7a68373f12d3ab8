package io.tnsr.engine.loadgen;

import java.io.PrintStream;
import java.util.Locale;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;

/**
 * Progress of a phase on stderr (stdout keeps the report alone): on a terminal, one line rewritten in place a few
 * times a second; otherwise (a log file, a pipe, CI) one line each time another tenth of the phase is done, by
 * requests or, with a duration, by time, whichever is further.
 */
public final class Progress implements AutoCloseable {
    private static final long TERMINAL_PERIOD_MILLIS = 200;
    private static final long LOG_PERIOD_MILLIS = 100;

    private final PrintStream err;
    private final boolean terminal;
    private final String label;
    private final long total;
    private final long durationNanos;
    private final BenchStats stats;
    private final LongSupplier sent;
    private final long t0 = System.nanoTime();
    private final ScheduledExecutorService ticker;
    private int tenthsShown;
    private int width;
    private boolean closed;

    /**
     * Starts showing progress.
     *
     * @param terminal      whether stderr is a terminal (rewrite one line) or not (a line per tenth)
     * @param label         what the phase is, e.g. {@code "measuring"}
     * @param total         requests the phase sends at most ({@link Long#MAX_VALUE}: no limit)
     * @param durationNanos how long the phase sends (0: no limit)
     * @param sent          requests sent so far
     */
    public Progress(PrintStream err, boolean terminal, String label, long total, long durationNanos, BenchStats stats,
                    LongSupplier sent) {
        this.err = err;
        this.terminal = terminal;
        this.label = label;
        this.total = total;
        this.durationNanos = durationNanos;
        this.stats = stats;
        this.sent = sent;
        this.ticker = Executors.newSingleThreadScheduledExecutor(r -> {
            Thread t = new Thread(r, "serve-bench-progress");
            t.setDaemon(true);
            return t;
        });
        long period = terminal ? TERMINAL_PERIOD_MILLIS : LOG_PERIOD_MILLIS;
        ticker.scheduleAtFixedRate(this::tick, period, period, TimeUnit.MILLISECONDS);
    }

    /** How far the phase is, 0 to 1. */
    private double fraction(long done, long elapsed) {
        double byRequests = total == Long.MAX_VALUE ? 0 : (double) done / total;
        double byTime = durationNanos == 0 ? 0 : (double) elapsed / durationNanos;
        return Math.min(1.0, Math.max(byRequests, byTime));
    }

    private synchronized void tick() {
        if (closed) {
            return;
        }
        long elapsed = System.nanoTime() - t0;
        long done = stats.done();
        if (terminal) {
            String line = line(done, elapsed);
            err.print("\r" + line + " ".repeat(Math.max(0, width - line.length())));
            width = line.length();
            err.flush();
            return;
        }
        int tenths = (int) Math.floor(fraction(done, elapsed) * 10 + 1e-9);
        if (tenths > tenthsShown && tenths < 10) {
            tenthsShown = tenths;
            err.println(String.format(Locale.ROOT, "%3d%% ", tenths * 10) + line(done, elapsed));
        }
    }

    private String line(long done, long elapsed) {
        String of = total == Long.MAX_VALUE ? "" : "/" + total;
        return String.format(Locale.ROOT, "serve-bench: %s: %d%s requests done (%d failed), %d in flight, %.1f s", label,
                done, of, stats.failed(), Math.max(0, sent.getAsLong() - done), elapsed / 1e9);
    }

    /** Stops, leaving the last line: the whole phase done. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        ticker.shutdownNow();
        long elapsed = System.nanoTime() - t0;
        String line = line(stats.done(), elapsed);
        if (terminal) {
            err.println("\r" + line + " ".repeat(Math.max(0, width - line.length())));
        } else {
            err.println("100% " + line);
        }
        err.flush();
    }
}
