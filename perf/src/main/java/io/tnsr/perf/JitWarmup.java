package io.tnsr.perf;

import java.lang.management.ManagementFactory;
import java.util.Locale;

/**
 * Warms a vector kernel up until C2 runs it, before JMH's own warm-up iterations begin.
 *
 * <p>Vector API code allocates a box per vector operation wherever it is interpreted or compiled by C1, and nothing
 * once C2 has compiled it with its helpers inlined. So "a run of calls allocated nothing on this thread" marks the
 * moment the measured code is the steady-state code. A fixed warm-up cannot promise that: the perf gate pins every
 * fork of both builds to one CPU, where a kernel's C2 compilation waits for the CPU beside the interpreted benchmark
 * and the other JVMs' compilers. Measured there, a 768x768 Q4_K matrix-vector product was still C1 code (about
 * 7 ms per call, 16 MB allocated, against 16 us) after three warm-up and four measured iterations of 200 ms.
 *
 * <p>The calls are timed in batches of at least {@link #BATCH_NANOS}; warm-up ends after {@link #QUIET_BATCHES}
 * batches in a row that allocated nothing, or at the bound, whichever comes first. A kernel that still allocates
 * at the bound (C2 left a vector helper out of line, or the code allocates) is reported on standard error and
 * measured anyway, so the gate's allocation metrics see it.
 */
public final class JitWarmup {
    /** Least time one batch of calls takes. */
    static final long BATCH_NANOS = 20_000_000L;
    /** Allocation-free batches in a row that end the warm-up. */
    static final int QUIET_BATCHES = 3;
    /** The longest a benchmark's warm-up may take before JMH's own warm-up iterations. */
    public static final long BOUND_NANOS = 30_000_000_000L;

    private JitWarmup() {
    }

    /**
     * How a warm-up went.
     *
     * @param calls          calls made
     * @param nanos          time taken
     * @param settled        whether it ended on allocation-free batches (false: at the bound)
     * @param lastBytesPerCall bytes the last batch allocated per call
     */
    public record Outcome(long calls, long nanos, boolean settled, double lastBytesPerCall) {
    }

    /** {@link #untilAllocationFree(String, Runnable, long)} for at most {@link #BOUND_NANOS}. */
    public static Outcome untilAllocationFree(String what, Runnable op) {
        return untilAllocationFree(what, op, BOUND_NANOS);
    }

    /**
     * Calls {@code op} until {@link #QUIET_BATCHES} batches in a row allocate nothing on this thread, or for at most
     * {@code boundNanos}.
     *
     * @param what names the kernel in the message printed when the bound is reached
     */
    public static Outcome untilAllocationFree(String what, Runnable op, long boundNanos) {
        if (!(ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean threads)
                || !threads.isThreadAllocatedMemorySupported() || !threads.isThreadAllocatedMemoryEnabled()) {
            throw new IllegalStateException("this JVM cannot count a thread's allocated bytes, which the warm-up needs");
        }
        long start = System.nanoTime();
        long calls = 0;
        int quiet = 0;
        double perCall = Double.NaN;
        while (true) {
            long bytes = threads.getCurrentThreadAllocatedBytes();
            long batchStart = System.nanoTime();
            long n = 0;
            long now;
            do {
                op.run();
                n++;
                now = System.nanoTime();
            } while (now - batchStart < BATCH_NANOS);
            long allocated = threads.getCurrentThreadAllocatedBytes() - bytes;
            calls += n;
            perCall = (double) allocated / n;
            quiet = allocated == 0 ? quiet + 1 : 0;
            if (quiet >= QUIET_BATCHES) {
                return new Outcome(calls, now - start, true, perCall);
            }
            if (now - start >= boundNanos) {
                System.err.printf(Locale.ROOT, "warm-up: %s still allocates %.0f B per call after %d calls in %.1f s;"
                        + " measured as it is%n", what, perCall, calls, (now - start) / 1e9);
                return new Outcome(calls, now - start, false, perCall);
            }
        }
    }
}
