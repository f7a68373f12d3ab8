package io.tnsr.perf.gate;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The spread of each metric over several gate runs on unchanged code, and the tolerances derived from it
 * ({@code tools/perf-gate --calibrate N}).
 *
 * <p>Rule for a ratio metric: {@code tolerance = max(floor, FACTOR x (slowest / median - 1))}, rounded up to a
 * whole percent: with FACTOR = 2 a run on unchanged code may be twice as much slower than the median as the slowest
 * calibration run before it fails. Only the slow side counts, because only that side fails (a run that came out
 * faster than usual is no reason to loosen the gate). The floor is
 * the metric's own ({@link Metric#tolerance()}: the noise measured on the shared dev machine) or {@link #FLOOR}:
 * it keeps a calibration on a quiet machine from producing a gate that trips on a noisy one.
 * Allocation tolerances are not calibrated: zero is the requirement; the metric's tolerance (usually
 * {@link GateCheck#DEFAULT_ALLOC_TOLERANCE}) plus the background allowance absorb JMH's own allocations.
 */
public final class Calibration {
    public static final double FLOOR = 0.03;
    public static final double FACTOR = 2.0;

    private Calibration() {
    }

    /**
     * One metric over the runs. spread = (max - min) / median; maxDeviation = max |v / median - 1|; slowest =
     * max(v / median - 1, 0), the largest deviation on the failing side (a ratio metric fails when it grows);
     * tolerance = the metric's own: the floor of a ratio metric's tolerance, an alloc metric's allowance.
     */
    public record Stats(Metric.Kind kind, double[] values, double min, double median, double max, double spread,
                        double maxDeviation, double slowest, double tolerance) {
        public double suggestedTolerance() {
            return kind == Metric.Kind.RATIO ? Calibration.tolerance(slowest, Double.isNaN(tolerance) ? FLOOR : tolerance)
                    : tolerance;
        }
    }

    /** max(floor, FACTOR x deviation), rounded up to a whole percent. */
    public static double tolerance(double deviation, double floor) {
        return Math.ceil(Math.max(floor, FACTOR * deviation) * 100 - 1e-9) / 100;
    }

    /** Per metric (suite order), over the runs in which it was measured. */
    public static Map<String, Stats> summarize(List<Metric> metrics, List<Map<String, GateCheck.Observation>> runs) {
        Map<String, Stats> out = new LinkedHashMap<>();
        for (Metric m : metrics) {
            List<Double> v = new ArrayList<>();
            for (Map<String, GateCheck.Observation> run : runs) {
                GateCheck.Observation o = run.get(m.name());
                if (o != null && !Double.isNaN(o.value())) {
                    v.add(o.value());
                }
            }
            if (v.isEmpty()) {
                continue;
            }
            double[] a = v.stream().mapToDouble(Double::doubleValue).toArray();
            double min = Double.MAX_VALUE;
            double max = -Double.MAX_VALUE;
            for (double x : a) {
                min = Math.min(min, x);
                max = Math.max(max, x);
            }
            double med = ProbeRunner.median(a);
            double dev = 0;
            for (double x : a) {
                dev = Math.max(dev, med == 0 ? 0 : Math.abs(x / med - 1));
            }
            out.put(m.name(), new Stats(m.kind(), a, min, med, max, med == 0 ? 0 : (max - min) / med, dev,
                    med == 0 ? 0 : Math.max(0, max / med - 1),
                    m.kind() == Metric.Kind.RATIO ? m.tolerance() : m.defaultTolerance()));
        }
        return out;
    }

    /** An allocation figure as the baseline keeps it: B/op to 2 decimals (so noise does not churn the file). */
    public static double allocValue(double v) {
        return Math.max(0, Math.round(v * 100) / 100.0);
    }

    /** A baseline with each metric's median and calibrated tolerance. */
    public static Baseline baseline(Map<String, Stats> stats, double background, Map<String, String> notes) {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>();
        for (Map.Entry<String, Stats> e : stats.entrySet()) {
            Stats s = e.getValue();
            m.put(e.getKey(), switch (s.kind()) {
                case RATIO -> new Baseline.Entry(s.kind(), s.median(), s.suggestedTolerance(), s.spread());
                case ALLOC -> new Baseline.Entry(s.kind(), allocValue(s.median()), s.suggestedTolerance(), Double.NaN);
                case INFO -> new Baseline.Entry(s.kind(), s.median(), Double.NaN, s.spread());
            });
        }
        return new Baseline(m, background, notes);
    }
}
