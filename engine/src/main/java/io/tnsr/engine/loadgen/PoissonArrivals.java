package io.tnsr.engine.loadgen;

import java.util.SplittableRandom;

/**
 * Arrival times of an open-loop load: a Poisson process at {@code rate} requests per second (exponential gaps), from a
 * seeded generator so that two runs send at the same instants.
 */
final class PoissonArrivals {
    private final double meanGapNanos;
    private final SplittableRandom random;
    private long next;

    PoissonArrivals(double ratePerSecond, long seed) {
        if (!(ratePerSecond > 0) || Double.isInfinite(ratePerSecond)) {
            throw new IllegalArgumentException("--rate must be a positive number, got " + ratePerSecond);
        }
        this.meanGapNanos = 1e9 / ratePerSecond;
        this.random = new SplittableRandom(seed);
    }

    /** Nanoseconds from the start to the next arrival (the first arrival is one gap after the start). */
    long next() {
        next += (long) (-Math.log(1.0 - random.nextDouble()) * meanGapNanos);
        return next;
    }
}
