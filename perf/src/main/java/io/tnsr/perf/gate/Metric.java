package io.tnsr.perf.gate;

/**
 * One figure the gate judges.
 *
 * @param name        stable name, shown in the table and kept in the results file
 * @param kind        what is taken from each {@link Sample} of the probe, and how it is judged
 * @param probe       the measurement it comes from
 * @param tolerance   {@link Kind#TIME} and {@link Kind#P99}: the largest slowdown that passes, relative (0.05: the
 *                    tree under test may take up to 5% longer than the reference); {@link Kind#ALLOC}: the allowance
 *                    in bytes per operation
 * @param description one line for the legend
 */
public record Metric(String name, Kind kind, Probe probe, double tolerance, String description) {

    public enum Kind {
        /**
         * The sample's time, tree under test / reference build, pair by pair (each pair measured back to back on
         * the same CPU); judged on the median of the pairs' ratios.
         */
        TIME,
        /** The sample's 99th percentile, judged like {@link #TIME}. */
        P99,
        /**
         * Bytes allocated per operation in the tree under test, judged absolutely (they do not depend on the host):
         * at most the tolerance plus the background allowance spread over the iteration's operations.
         */
        ALLOC;

        /** This kind's figure in a sample (NaN when the sample has none). */
        public double of(Sample s) {
            return switch (this) {
                case TIME -> s.time();
                case P99 -> s.p99();
                case ALLOC -> s.alloc();
            };
        }

        /** This kind's figure in each measured iteration of a sample (empty when it has none). */
        public double[] iterations(Sample s) {
            return switch (this) {
                case TIME -> s.iterations();
                case P99 -> s.iterationsP99();
                case ALLOC -> new double[0];
            };
        }

        public boolean compared() {
            return this != ALLOC;
        }
    }

    public static Metric time(String name, Probe probe, double tolerance, String description) {
        return new Metric(name, Kind.TIME, probe, tolerance, description);
    }

    public static Metric p99(String name, Probe probe, double tolerance, String description) {
        return new Metric(name, Kind.P99, probe, tolerance, description);
    }

    public static Metric alloc(String name, Probe probe, double allowance, String description) {
        return new Metric(name, Kind.ALLOC, probe, allowance, description);
    }
}
