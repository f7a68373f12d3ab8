package io.tnsr.perf.gate.injected;

/** Makes a piece of code slower by an exact fraction of its own time, call by call, whatever bounds it. */
final class Slowdown {
    private Slowdown() {
    }

    /**
     * Spins until {@code (1 + fraction)} times the time since {@code start} has passed: called right after the
     * real work, the call takes that much longer than the work did, and its noise scales with it.
     */
    static void stretch(long start, double fraction) {
        long work = System.nanoTime() - start;
        long until = start + work + (long) (work * fraction);
        while (System.nanoTime() - until < 0) {
            Thread.onSpinWait();
        }
    }
}
