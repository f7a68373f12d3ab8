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
}
