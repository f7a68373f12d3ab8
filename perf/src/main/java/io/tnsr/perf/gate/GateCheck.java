package io.tnsr.perf.gate;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The gate's verdicts: pure arithmetic on measured values and the baseline (no JMH here, so it is unit-tested
 * with made-up numbers).
 * <ul>
 * <li>ratio metric: {@code change = now / baseline}. REGRESSION when {@code change > 1 + tolerance}; IMPROVED
 * (passes) when {@code change < 1 / (1 + tolerance)}; else PASS. NEW (passes) when the baseline lacks it.</li>
 * <li>alloc metric: ALLOCATES when {@code now > tolerance + background / operations per iteration} (B/op;
 * the metric's default tolerance when the baseline has none); else PASS. Judged even without a baseline
 * entry: zero allocation is an absolute requirement.</li>
 * <li>info metric: shown, never judged.</li>
 * <li>MISSING (fails) when a metric was not measured (its benchmark failed), or the baseline names a metric
 * this gate does not measure.</li>
 * </ul>
 */
public final class GateCheck {
    /** Tolerance of a ratio metric the baseline has no tolerance for. */
    public static final double DEFAULT_RATIO_TOLERANCE = 0.25;
    /** Allowed bytes per operation of an alloc metric the baseline has no tolerance for. */
    public static final double DEFAULT_ALLOC_TOLERANCE = 1.0;

    private GateCheck() {
    }

    public enum Verdict {
        PASS(false), IMPROVED(false), NEW(false), INFO(false), REGRESSION(true), ALLOCATES(true), MISSING(true);

        private final boolean fails;

        Verdict(boolean fails) {
            this.fails = fails;
        }

        public boolean fails() {
            return fails;
        }
    }

    /**
     * A metric's value in this run.
     *
     * @param value           ratio, B/op or ns (per the metric's kind); NaN when not measured
     * @param opsPerIteration operations in one measured iteration of the metric's own probe (iteration time / time
     *                        per op): the background allowance is spread over them
     * @param error           why it was not measured, else null
     */
    public record Observation(double value, double opsPerIteration, String error) {
        public static Observation missing(String error) {
            return new Observation(Double.NaN, Double.NaN, error);
        }
    }

    /**
     * One line of the table.
     *
     * @param baseline the baseline's value (NaN if none)
     * @param change   now / baseline for ratio metrics (NaN otherwise)
     * @param limit    the largest passing value: baseline x (1 + tolerance), or the allocation allowance
     */
    public record Row(String metric, Metric.Kind kind, double baseline, double now, double change, double limit,
                      Verdict verdict, String note) {
    }

    /** All rows, in the suite's order then any baseline-only metrics. */
    public record Report(List<Row> rows) {
        public boolean passed() {
            return rows.stream().noneMatch(r -> r.verdict().fails());
        }

        public List<Row> failures() {
            return rows.stream().filter(r -> r.verdict().fails()).toList();
        }

        public Row row(String metric) {
            return rows.stream().filter(r -> r.metric().equals(metric)).findFirst().orElse(null);
        }
    }

    public static Report check(List<Metric> metrics, Map<String, Observation> now, Baseline baseline) {
        List<Row> rows = new ArrayList<>();
        Set<String> seen = new LinkedHashSet<>();
        for (Metric m : metrics) {
            seen.add(m.name());
            rows.add(row(m.name(), m.kind(), now.get(m.name()), baseline.metrics().get(m.name()),
                    baseline.backgroundAllocBytesPerIteration(), m.defaultTolerance()));
        }
        for (Map.Entry<String, Baseline.Entry> e : baseline.metrics().entrySet()) {
            if (!seen.contains(e.getKey())) {
                rows.add(new Row(e.getKey(), e.getValue().kind(), e.getValue().value(), Double.NaN, Double.NaN, Double.NaN,
                        e.getValue().kind() == Metric.Kind.INFO ? Verdict.INFO : Verdict.MISSING,
                        "in the baseline but not measured by this gate (renamed or removed? review, then --update-baseline)"));
            }
        }
        return new Report(rows);
    }

    static Row row(String name, Metric.Kind kind, Observation o, Baseline.Entry b, double background, double defaultTolerance) {
        double base = b != null ? b.value() : Double.NaN;
        if (o == null || Double.isNaN(o.value())) {
            String why = o != null && o.error() != null ? o.error() : "not measured";
            return new Row(name, kind, base, Double.NaN, Double.NaN, Double.NaN,
                    kind == Metric.Kind.INFO ? Verdict.INFO : Verdict.MISSING, why);
        }
        double v = o.value();
        switch (kind) {
            case INFO:
                return new Row(name, kind, base, v, Double.NaN, Double.NaN, Verdict.INFO, "");
            case ALLOC: {
                double tol = b != null && !Double.isNaN(b.tolerance()) ? b.tolerance() : defaultTolerance;
                double allowed = tol + (Double.isNaN(o.opsPerIteration()) ? 0 : background / Math.max(1, o.opsPerIteration()));
                if (v > allowed) {
                    return new Row(name, kind, base, v, Double.NaN, allowed, Verdict.ALLOCATES,
                            String.format(Locale.ROOT, "allocates %.1f B/op, allowed %.2f", v, allowed));
                }
                return new Row(name, kind, base, v, Double.NaN, allowed, b == null ? Verdict.NEW : Verdict.PASS,
                        b == null ? "not in the baseline" : "");
            }
            case RATIO: {
                if (b == null || Double.isNaN(base) || base <= 0) {
                    return new Row(name, kind, base, v, Double.NaN, Double.NaN, Verdict.NEW,
                            "not in the baseline: run --update-baseline to start gating it");
                }
                double tol = !Double.isNaN(b.tolerance()) ? b.tolerance() : defaultTolerance;
                double change = v / base;
                double limit = base * (1 + tol);
                if (change > 1 + tol) {
                    return new Row(name, kind, base, v, change, limit, Verdict.REGRESSION, String.format(Locale.ROOT,
                            "%.0f%% slower than the baseline (tolerance %.0f%%)", (change - 1) * 100, tol * 100));
                }
                if (change < 1 / (1 + tol)) {
                    return new Row(name, kind, base, v, change, limit, Verdict.IMPROVED, String.format(Locale.ROOT,
                            "%.0f%% faster: update the baseline to keep it", (1 - change) * 100));
                }
                return new Row(name, kind, base, v, change, limit, Verdict.PASS, "");
            }
            default:
                throw new IllegalStateException(kind.toString());
        }
    }
}
