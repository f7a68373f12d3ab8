package io.tnsr.perf.gate;

/**
 * One figure the gate checks.
 *
 * @param name        stable name, the key in {@code perf/baseline.json}
 * @param kind        how it is computed and judged
 * @param probe       the measurement it comes from
 * @param reference   for {@link Kind#RATIO}: the measurement it is divided by (same gate run); else null
 * @param description one line for the table's legend
 * @param tolerance   alloc: the allowance in B/op (NaN: {@link GateCheck#DEFAULT_ALLOC_TOLERANCE}); ratio: the least
 *                    tolerance a calibration may set (NaN: {@link Calibration#FLOOR}); also what a new baseline
 *                    entry starts with (at least {@link GateCheck#DEFAULT_RATIO_TOLERANCE} for a ratio)
 */
public record Metric(String name, Kind kind, Probe probe, Probe reference, String description, double tolerance) {

    public enum Kind {
        /**
         * Bytes allocated per operation (JMH {@code -prof gc}: {@code gc.alloc.rate.norm}, all threads of the JVM),
         * median over iterations. Must be 0 up to a small allowance; the baseline value is not used.
         */
        ALLOC("B/op"),
        /** Time per operation / time per operation of the reference. Judged against the baseline's ratio. */
        RATIO("x"),
        /** Time per operation in nanoseconds, shown for context, never judged (machine-dependent). */
        INFO("ns");

        private final String unit;

        Kind(String unit) {
            this.unit = unit;
        }

        public String unit() {
            return unit;
        }
    }

    public static Metric alloc(String name, Probe probe, String description) {
        return new Metric(name, Kind.ALLOC, probe, null, description, Double.NaN);
    }

    /** This metric with another starting tolerance. */
    public Metric tolerance(double t) {
        return new Metric(name, kind, probe, reference, description, t);
    }

    /** The tolerance a new baseline entry gets. */
    public double defaultTolerance() {
        if (!Double.isNaN(tolerance) && kind != Kind.RATIO) {
            return tolerance;
        }
        return switch (kind) {
            case RATIO -> Double.isNaN(tolerance) ? GateCheck.DEFAULT_RATIO_TOLERANCE : Math.max(tolerance, GateCheck.DEFAULT_RATIO_TOLERANCE);
            case ALLOC -> GateCheck.DEFAULT_ALLOC_TOLERANCE;
            case INFO -> Double.NaN;
        };
    }

    public static Metric ratio(String name, Probe probe, Probe reference, String description) {
        return new Metric(name, Kind.RATIO, probe, reference, description, Double.NaN);
    }

    public static Metric info(String name, Probe probe, String description) {
        return new Metric(name, Kind.INFO, probe, null, description, Double.NaN);
    }

    /** This metric measured from other probes (the self-test's injected variants). */
    public Metric withProbe(Probe p) {
        return new Metric(name, kind, p, reference, description, tolerance);
    }
}
