package io.tnsr.perf;

import java.lang.management.ManagementFactory;
import java.util.Locale;

/**
 * Warms code up until C2 runs it, before JMH's own warm-up iterations begin: a vector kernel on the calling thread,
 * or a stage's whole loop on the threads that serve it.
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
        com.sun.management.ThreadMXBean threads = threads();
        return untilQuiet(what, op, threads::getCurrentThreadAllocatedBytes, 0, BATCH_NANOS, QUIET_BATCHES, boundNanos);
    }

    /**
     * Calls {@code op} until the whole JVM, every thread counted, allocates at most {@code allowedPerCall} bytes per
     * call for {@code quietBatches} batches of {@code batchNanos} in a row, or for at most {@code boundNanos}. For an
     * operation that other threads serve (a stage's inbound, compute and outbound threads): its steady state is
     * reached when theirs is. The allowance covers what runs beside it on a clock (a metrics log written once a
     * second shows in one batch and resets the count; batches long enough that it is one of many).
     */
    public static Outcome untilAllThreadsQuiet(String what, Runnable op, double allowedPerCall, long batchNanos,
            int quietBatches, long boundNanos) {
        return untilQuiet(what, op, new AllThreadsAllocated(threads()), allowedPerCall, batchNanos, quietBatches, boundNanos);
    }

    private static Outcome untilQuiet(String what, Runnable op, java.util.function.LongSupplier allocatedBytes,
            double allowedPerCall, long batchNanos, int quietBatches, long boundNanos) {
        long start = System.nanoTime();
        long calls = 0;
        int quiet = 0;
        double perCall = Double.NaN;
        while (true) {
            long bytes = allocatedBytes.getAsLong();
            long batchStart = System.nanoTime();
            long n = 0;
            long now;
            do {
                op.run();
                n++;
                now = System.nanoTime();
            } while (now - batchStart < batchNanos);
            long allocated = allocatedBytes.getAsLong() - bytes;
            calls += n;
            perCall = (double) allocated / n;
            quiet = perCall <= allowedPerCall ? quiet + 1 : 0;
            if (quiet >= quietBatches) {
                return new Outcome(calls, now - start, true, perCall);
            }
            if (now - start >= boundNanos) {
                System.err.printf(Locale.ROOT, "warm-up: %s still allocates %.0f B per call after %d calls in %.1f s;"
                        + " measured as it is%n", what, perCall, calls, (now - start) / 1e9);
                return new Outcome(calls, now - start, false, perCall);
            }
        }
    }

    private static com.sun.management.ThreadMXBean threads() {
        if (!(ManagementFactory.getThreadMXBean() instanceof com.sun.management.ThreadMXBean threads)
                || !threads.isThreadAllocatedMemorySupported() || !threads.isThreadAllocatedMemoryEnabled()) {
            throw new IllegalStateException("this JVM cannot count a thread's allocated bytes, which the warm-up needs");
        }
        return threads;
    }

    /**
     * Bytes allocated so far by every live thread, less what reading them allocated on the calling thread (the id
     * and count arrays), so that counting does not count itself. A thread that ended takes its bytes with it; the
     * warm-up's threads live as long as it does.
     */
    private static final class AllThreadsAllocated implements java.util.function.LongSupplier {
        private final com.sun.management.ThreadMXBean threads;
        private final long self = Thread.currentThread().getId();
        private long ownReadingBytes;

        AllThreadsAllocated(com.sun.management.ThreadMXBean threads) {
            this.threads = threads;
        }

        @Override
        public long getAsLong() {
            long before = threads.getCurrentThreadAllocatedBytes();
            long[] ids = threads.getAllThreadIds();
            long[] bytes = threads.getThreadAllocatedBytes(ids);
            long total = before - ownReadingBytes;
            for (int i = 0; i < ids.length; i++) {
                if (ids[i] != self && bytes[i] > 0) {
                    total += bytes[i];
                }
            }
            ownReadingBytes += threads.getCurrentThreadAllocatedBytes() - before;
            return total;
        }
    }
}
