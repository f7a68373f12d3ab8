package io.tnsr.perf;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class JitWarmupTest {
    private static volatile Object sink;

    @Test
    void anOperationThatAllocatesNothingEndsTheWarmUpAfterTheQuietBatches() {
        long[] counter = new long[1];
        JitWarmup.Outcome o = JitWarmup.untilAllocationFree("a counter", () -> counter[0]++, 10_000_000_000L);
        assertTrue(o.settled(), o.toString());
        assertTrue(o.lastBytesPerCall() == 0, o.toString());
        assertTrue(o.nanos() < 10_000_000_000L, o.toString());
        assertTrue(o.calls() >= JitWarmup.QUIET_BATCHES, o.toString());
    }

    @Test
    void anOperationThatKeepsAllocatingStopsAtTheBoundAndSaysHowMuch() {
        JitWarmup.Outcome o = JitWarmup.untilAllocationFree("an allocator", () -> sink = new byte[1000], 100_000_000L);
        assertFalse(o.settled(), o.toString());
        assertTrue(o.lastBytesPerCall() >= 1000, o.toString());
        assertTrue(o.nanos() >= 100_000_000L, o.toString());
    }

    @Test
    void allocationOnAnotherThreadKeepsTheWholeJvmWarmUpGoingUntilItStops() throws Exception {
        // The op hands each call to a server thread and waits for it (spinning: a hand-off that allocates nothing).
        java.util.concurrent.atomic.AtomicBoolean allocate = new java.util.concurrent.atomic.AtomicBoolean(true);
        java.util.concurrent.atomic.AtomicBoolean stop = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicLong asked = new java.util.concurrent.atomic.AtomicLong();
        java.util.concurrent.atomic.AtomicLong served = new java.util.concurrent.atomic.AtomicLong();
        Thread server = new Thread(() -> {
            while (!stop.get()) {
                if (served.get() < asked.get()) {
                    if (allocate.get()) {
                        sink = new byte[1000];
                    }
                    served.incrementAndGet();
                } else {
                    Thread.onSpinWait();
                }
            }
        });
        server.setDaemon(true);
        server.start();
        Runnable op = () -> {
            long n = asked.incrementAndGet();
            while (served.get() < n) {
                Thread.onSpinWait();
            }
        };
        try {
            JitWarmup.Outcome busy = JitWarmup.untilAllThreadsQuiet("a served op", op, 100, 20_000_000L, 3, 200_000_000L);
            assertFalse(busy.settled(), busy.toString());
            assertTrue(busy.lastBytesPerCall() >= 1000, busy.toString());
            allocate.set(false);
            JitWarmup.Outcome quiet = JitWarmup.untilAllThreadsQuiet("a served op", op, 100, 20_000_000L, 3, 10_000_000_000L);
            assertTrue(quiet.settled(), quiet.toString());
        } finally {
            stop.set(true);
            server.join(10_000);
        }
    }
}
