package io.tnsr.engine.util;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import me.tongfei.progressbar.ConsoleProgressBarConsumer;
import me.tongfei.progressbar.ProgressBar;
import me.tongfei.progressbar.ProgressBarBuilder;
import me.tongfei.progressbar.ProgressBarStyle;

/**
 * A progress bar on stderr for work that can take more than a few seconds (writing or loading a model, computing its
 * fingerprint, a benchmark's phases), drawn by {@code me.tongfei:progressbar} once the work has taken a second; nothing
 * at all unless both stdout and stderr are terminals (a pipe, a file, CI or a stage process started by a coordinator stay clean),
 * and one bar at a time (work started while a bar is open gets none). Thread-safe: {@link #stepBy} may be called from
 * several workers.
 *
 * <pre>{@code
 * try (TaskProgress p = TaskProgress.start("writing stories110M", totalBytes, TaskProgress.MIB)) {
 *     ... p.stepBy(bytesWritten) ...
 * }
 * }</pre>
 */
public final class TaskProgress implements AutoCloseable {
    /** Unit: bytes shown as MiB. */
    public static final Unit MIB = new Unit(" MiB", 1 << 20);
    /** Unit: counted items (layers, tokens) shown as they are. */
    public static final Unit ITEMS = new Unit("", 1);

    /** How the bar labels its counts: a suffix and how many counted units make one shown. */
    public record Unit(String name, long size) {
    }

    /** Work done within this long draws no bar: only what takes a while shows one. */
    static final long DELAY_NANOS = 1_000_000_000L;

    private static final TaskProgress SILENT = new TaskProgress(null, 0, null);
    /** The bar open now, if any ({@link #start}). */
    private static final AtomicReference<TaskProgress> OPEN =
            new AtomicReference<>();

    /** Null when silent. */
    private final String task;
    private final long total;
    private final Unit unit;
    private final long startNanos = System.nanoTime();
    private final AtomicLong done = new AtomicLong();
    /** Drawn once the work has taken {@link #DELAY_NANOS} (by a step, or by {@link #timer()}); null before. */
    private ProgressBar bar;
    /** Set by {@link #close}: nothing is drawn after. */
    private boolean closed;
    /** The first draw if no step comes after the delay (work whose first step takes long). */
    private ScheduledFuture<?> firstDraw;
    /** Shown after the counts ({@link #message}). */
    private String message = "";

    private TaskProgress(String task, long total, Unit unit) {
        this.task = task;
        this.total = Math.max(1, total);
        this.unit = unit;
    }

    /**
     * Progress of {@code task}, {@code total} counts in all: a bar once the work has taken a second, when
     * {@link #interactive()}; else nothing.
     */
    public static TaskProgress start(String task, long total, Unit unit) {
        return start(interactive(), task, total, unit);
    }

    /**
     * One bar at a time: work started while another bar is open (a benchmark's run starting a pipeline, whose stages'
     * loading has a bar of its own) gets a silent one, so that two bars never fight over the line.
     */
    static TaskProgress start(boolean interactive, String task, long total, Unit unit) {
        if (!interactive) {
            return SILENT;
        }
        TaskProgress p = new TaskProgress(task, total, unit);
        if (!OPEN.compareAndSet(null, p)) {
            return SILENT;
        }
        synchronized (p) {
            p.firstDraw = timer().schedule(() -> p.show(p.done.get()), DELAY_NANOS + 10_000_000L, TimeUnit.NANOSECONDS);
        }
        return p;
    }

    private static ScheduledExecutorService timer;

    /** One daemon thread for every bar's first draw, started with the first bar. */
    private static synchronized ScheduledExecutorService timer() {
        if (timer == null) {
            ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
                Thread th = new Thread(r, "progress-bar");
                th.setDaemon(true);
                return th;
            });
            t.setRemoveOnCancelPolicy(true);
            timer = t;
        }
        return timer;
    }

    /** Adds {@code n} to the count done. */
    public void stepBy(long n) {
        if (task != null) {
            show(done.addAndGet(n));
        }
    }

    /** Sets the count done. */
    public void stepTo(long n) {
        if (task != null) {
            done.set(n);
            show(n);
        }
    }

    private synchronized void show(long now) {
        if (closed) {
            return;
        }
        if (bar == null) {
            long elapsed = System.nanoTime() - startNanos;
            if (elapsed < DELAY_NANOS) {
                return;
            }
            bar = new ProgressBarBuilder()
                    .setTaskName(task)
                    .setInitialMax(total)
                    .setUnit(unit.name(), unit.size())
                    .setStyle(ProgressBarStyle.ASCII)
                    .setUpdateIntervalMillis(200)
                    .setConsumer(new ConsoleProgressBarConsumer(System.err, width()))
                    .showSpeed()
                    .startsFrom(0, Duration.ofNanos(elapsed))
                    .build();
            bar.setExtraMessage(message);
            ConsoleLog.printTo(line -> println(System.err, line)); // other lines on stderr go above the bar
        }
        bar.stepTo(now);
    }

    /** A short note shown after the counts, such as what is in flight; replaces the last one. */
    public synchronized void message(String m) {
        if (task != null) {
            message = m;
            if (bar != null) {
                bar.setExtraMessage(m);
            }
        }
    }

    /**
     * Prints {@code line} to {@code out} (stdout or stderr) above the bar: the bar's line is cleared first and drawn
     * again after, so that a report printed while the work goes on stays whole.
     */
    public synchronized void println(PrintStream out, String line) {
        if (bar == null || closed) {
            out.println(line);
            return;
        }
        System.err.print("\r\033[K");
        System.err.flush();
        out.println(line);
        out.flush();
        bar.refresh();
    }

    /**
     * A stream whose lines go to {@code out} above the bar ({@link #println}), the same bytes as written to {@code out}
     * itself: for code that prints a report to a {@link PrintStream} while the work goes on. A last line
     * without its newline is written when the stream is closed. {@code out} itself when this one never draws.
     */
    public PrintStream above(PrintStream out) {
        if (task == null) {
            return out;
        }
        OutputStream lines = new OutputStream() {
            private final ByteArrayOutputStream line = new ByteArrayOutputStream();

            @Override
            public synchronized void write(int b) {
                if (b == '\n') {
                    println(out, line.toString(StandardCharsets.UTF_8));
                    line.reset();
                } else {
                    line.write(b);
                }
            }

            @Override
            public synchronized void close() {
                if (line.size() > 0) {
                    out.print(line.toString(StandardCharsets.UTF_8));
                    line.reset();
                }
                out.flush();
            }
        };
        return new PrintStream(lines, true, StandardCharsets.UTF_8);
    }

    /** Whether this one may draw (it does once the work has taken a second). */
    public boolean shown() {
        return task != null;
    }

    /** Draws the bar at its last count and ends its line, if it was drawn. */
    @Override
    public synchronized void close() {
        if (task == null || closed) {
            return;
        }
        closed = true;
        OPEN.compareAndSet(this, null);
        if (firstDraw != null) {
            firstDraw.cancel(false);
        }
        if (bar != null) {
            ConsoleLog.printTo(null);
            bar.stepTo(done.get());
            bar.close();
        }
    }

    /**
     * Whether stdout and stderr are both terminals. On Linux from {@code /proc/self/fd}; the tools' launcher filters
     * the JVM's stderr through a pipe, so it says whether its own stderr is a terminal in {@code TNSR_STDERR_TTY=1}.
     * Elsewhere, {@code System.console()} (stdin and stdout terminals). {@code TNSR_PROGRESS=0} turns bars off.
     */
    public static boolean interactive() {
        if ("0".equals(System.getenv("TNSR_PROGRESS"))) {
            return false;
        }
        Path fd = Paths.get("/proc/self/fd");
        if (!Files.isDirectory(fd)) {
            return System.console() != null;
        }
        return isTerminal(fd.resolve("1")) && (isTerminal(fd.resolve("2")) || "1".equals(System.getenv("TNSR_STDERR_TTY")));
    }

    private static boolean isTerminal(Path fd) {
        try {
            String target = Files.readSymbolicLink(fd).toString();
            return target.startsWith("/dev/pts/") || target.startsWith("/dev/tty");
        } catch (java.io.IOException | UnsupportedOperationException e) {
            return false;
        }
    }

    /** The terminal's columns as the launcher found them ({@code TNSR_COLUMNS}), else 100. */
    private static int width() {
        try {
            int w = Integer.parseInt(System.getenv().getOrDefault("TNSR_COLUMNS", "100").trim());
            return w >= 40 ? w : 100;
        } catch (NumberFormatException e) {
            return 100;
        }
    }
}
