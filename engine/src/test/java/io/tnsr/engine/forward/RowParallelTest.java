package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import org.junit.jupiter.api.Test;

/** Work shared among a caller and its workers: every part once per call, and workers that rest hold no core. */
class RowParallelTest {

    @Test
    void everyPartRunsOncePerCallAlsoRightAfterARest() {
        int calls = 2_000;
        AtomicIntegerArray runs = new AtomicIntegerArray(3);
        try (RowParallel threads = new RowParallel(3, "test-parts")) {
            for (int i = 0; i < calls; i++) {
                threads.run((part, parts) -> {
                    assertEquals(3, parts);
                    runs.incrementAndGet(part);
                }, "the test's parts");
                if (i % 2 == 0) {
                    threads.rest(); // the next call must wake the parked workers at once, or wait for their park
                }
            }
        }
        for (int part = 0; part < 3; part++) {
            assertEquals(calls, runs.get(part), "part " + part);
        }
    }

    @Test
    void restingWorkersHoldNoCoreAndWakeForTheNextCall() throws InterruptedException {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        assumeTrue(mx.isThreadCpuTimeSupported(), "this JVM measures no thread's CPU time");
        try (RowParallel threads = new RowParallel(2, "test-rest")) {
            threads.run((part, parts) -> { }, "a first part");
            threads.rest();
            Thread worker = thread("test-rest-matmul-1");
            assertNotNull(worker, "the worker thread, named after its role");
            // A rested worker parks at once and stays parked: over 200 ms it wakes a few times for its bounded park.
            // One that spun instead would run for most of the window on a core of its own.
            long cpu0 = mx.getThreadCpuTime(worker.getId());
            Thread.sleep(200);
            long cpuMillis = TimeUnit.NANOSECONDS.toMillis(mx.getThreadCpuTime(worker.getId()) - cpu0);
            assertTrue(cpuMillis < 20, "the resting worker ran for " + cpuMillis + " ms of 200");
            int[] ran = new int[1];
            threads.run((part, parts) -> {
                if (part == 1) {
                    ran[0]++;
                }
            }, "a part after the rest");
            assertEquals(1, ran[0], "the worker woke for the next call");
        }
    }

    private static Thread thread(String name) {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals(name)) {
                return t;
            }
        }
        return null;
    }
}
