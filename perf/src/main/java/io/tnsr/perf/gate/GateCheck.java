package io.tnsr.perf.gate;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The gate's verdicts: pure arithmetic on the samples of the two builds (no processes here, so it is unit-tested
 * with made-up numbers).
 * <ul>
 * <li>{@link Metric.Kind#TIME} and {@link Metric.Kind#P99}: the runs of the reference build and of the tree under
 * test are paired in the order they were measured. A pair's ratio, tree / reference, is the median of its
 * iterations' ratios (iteration i of one build ran next to iteration i of the other, {@link Turns}, so that the
 * host's drift hits both alike), or the ratio of the two runs' figures when they have no iterations (pipelines).
 * {@code change} is the median of the pairs' ratios. REGRESSION when
 * {@code change > 1 + tolerance}; IMPROVED (passes) when {@code change < 1 / (1 + tolerance)}; else PASS. NEW (passes)
 * when the reference build could not measure it (a benchmark it does not have yet).</li>
 * <li>{@link Metric.Kind#ALLOC}: every sample of the tree under test must stay within the allowance plus the
 * background allowance spread over the iteration's operations, else ALLOCATES. Absolute, never compared.</li>
 * <li>MISSING (fails) when the tree under test could not measure a metric.</li>
 * </ul>
 */
public final class GateCheck {
    /**
     * Runs of each build at most for one probe: when the first ones ({@link Probe#minPairs()}) do not all pass, the
     * median of three decides.
     */
    public static final int MAX_PAIRS = 3;
    /**
     * Bytes JMH and the JVM allocate in each measured iteration besides the benchmark (about 6 KB here, whatever
     * its length: {@code gc.alloc.rate.norm} counts every thread), allowed on top of a metric's own allowance,
     * spread over the iteration's operations.
     */
    public static final double BACKGROUND_ALLOC_PER_ITERATION = 16 * 1024;

    private GateCheck() {
    }

    public enum Verdict {
        PASS(false), IMPROVED(false), NEW(false), REGRESSION(true), ALLOCATES(true), MISSING(true);

        private final boolean fails;

        Verdict(boolean fails) {
            this.fails = fails;
        }

        public boolean fails() {
            return fails;
        }
    }

    /**
     * One line of the table.
     *
     * @param reference median of the reference build's figures (NaN for alloc metrics or when it has none)
     * @param now       median of the tree's figures; for alloc metrics the largest B/op of its samples
     * @param change    median of the pairs' ratios (compared metrics), else NaN
     * @param low       smallest pair ratio (NaN if none)
     * @param high      largest pair ratio (NaN if none)
     * @param pairs     pairs measured
     * @param limit     the largest passing change (1 + tolerance), or the allocation allowance in B/op
     */
    public record Row(String metric, Metric.Kind kind, double reference, double now, double change, double low,
                      double high, int pairs, double limit, Verdict verdict, String note) {
    }

    /** All rows, in the suite's order. */
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

    /**
     * A compared metric.
     *
     * @param reference the reference build's samples of the metric's probe, in measuring order (empty: not measured)
     * @param now       the tree's samples, in the same order (sample i was measured beside reference sample i)
     */
    public static Row compare(Metric m, List<Sample> reference, List<Sample> now) {
        double limit = 1 + m.tolerance();
        double[] nowValues = values(m.kind(), now);
        if (nowValues.length == 0) {
            return new Row(m.name(), m.kind(), median(values(m.kind(), reference)), Double.NaN, Double.NaN, Double.NaN,
                    Double.NaN, 0, limit, Verdict.MISSING, "not measured: " + firstError(now));
        }
        double[] refValues = values(m.kind(), reference);
        if (refValues.length == 0) {
            return new Row(m.name(), m.kind(), Double.NaN, median(nowValues), Double.NaN, Double.NaN, Double.NaN, 0, limit,
                    Verdict.NEW, reference.isEmpty() ? "no reference figure"
                            : "the reference build could not measure it (" + firstError(reference) + ")");
        }
        double[] r = ratios(m.kind(), reference, now);
        if (r.length == 0) {
            return new Row(m.name(), m.kind(), median(refValues), median(nowValues), Double.NaN, Double.NaN, Double.NaN, 0,
                    limit, Verdict.MISSING, "no pair of samples measured side by side");
        }
        double change = median(r);
        double low = Arrays.stream(r).min().orElse(Double.NaN);
        double high = Arrays.stream(r).max().orElse(Double.NaN);
        Verdict v;
        String note;
        if (change > limit) {
            v = Verdict.REGRESSION;
            note = String.format(Locale.ROOT, "%.1f%% slower than the reference (tolerance %.0f%%)", (change - 1) * 100,
                    m.tolerance() * 100);
        } else if (change < 1 / limit) {
            v = Verdict.IMPROVED;
            note = String.format(Locale.ROOT, "%.1f%% faster: accept it with --update-baseline to keep it", (1 - change) * 100);
        } else {
            v = Verdict.PASS;
            note = "";
        }
        return new Row(m.name(), m.kind(), median(refValues), median(nowValues), change, low, high, r.length, limit, v, note);
    }

    /** An allocation metric: every sample of the tree under test within its allowance. */
    public static Row alloc(Metric m, List<Sample> now) {
        double worst = Double.NaN;
        double worstAllowed = Double.NaN;
        int measured = 0;
        for (Sample s : now) {
            if (!s.ok() || Double.isNaN(s.alloc())) {
                continue;
            }
            measured++;
            double allowed = m.tolerance() + (Double.isNaN(s.opsPerIteration()) ? 0
                    : BACKGROUND_ALLOC_PER_ITERATION / Math.max(1, s.opsPerIteration()));
            if (Double.isNaN(worst) || s.alloc() - allowed > worst - worstAllowed) {
                worst = s.alloc();
                worstAllowed = allowed;
            }
        }
        if (measured == 0) {
            return new Row(m.name(), m.kind(), Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, 0, Double.NaN,
                    Verdict.MISSING, "not measured: " + firstError(now));
        }
        if (worst > worstAllowed) {
            return new Row(m.name(), m.kind(), Double.NaN, worst, Double.NaN, Double.NaN, Double.NaN, 0, worstAllowed,
                    Verdict.ALLOCATES, String.format(Locale.ROOT, "allocates %.1f B/op, allowed %.2f", worst, worstAllowed));
        }
        return new Row(m.name(), m.kind(), Double.NaN, worst, Double.NaN, Double.NaN, Double.NaN, 0, worstAllowed,
                Verdict.PASS, "");
    }

    /**
     * Whether another pair of runs is needed: fewer than the probe's minimum, or fewer than {@link #MAX_PAIRS} while
     * some pair is beyond the limit (one run's placement in memory or JIT luck must not fail the gate alone).
     */
    public static boolean undecided(Metric m, List<Sample> reference, List<Sample> now) {
        if (!m.kind().compared() || values(m.kind(), reference).length == 0) {
            return false;
        }
        double[] r = ratios(m.kind(), reference, now);
        if (r.length >= MAX_PAIRS) {
            return false;
        }
        if (r.length < m.probe().minPairs()) {
            return true;
        }
        double limit = 1 + m.tolerance();
        return Arrays.stream(r).anyMatch(x -> x > limit);
    }

    /** tree / reference for each pair of runs measured side by side (both ok): see the class comment. */
    static double[] ratios(Metric.Kind kind, List<Sample> reference, List<Sample> now) {
        List<Double> r = new ArrayList<>();
        for (int i = 0; i < Math.min(reference.size(), now.size()); i++) {
            Sample a = reference.get(i);
            Sample b = now.get(i);
            if (!a.ok() || !b.ok()) {
                continue;
            }
            double[] ai = kind.iterations(a);
            double[] bi = kind.iterations(b);
            int n = Math.min(ai.length, bi.length);
            if (n > 0) {
                double[] q = new double[n];
                for (int j = 0; j < n; j++) {
                    q[j] = bi[j] / ai[j];
                }
                r.add(median(q));
            } else if (kind.of(a) > 0 && kind.of(b) > 0) {
                r.add(kind.of(b) / kind.of(a));
            }
        }
        return r.stream().mapToDouble(Double::doubleValue).toArray();
    }

    private static double[] values(Metric.Kind kind, List<Sample> samples) {
        return samples.stream().filter(Sample::ok).mapToDouble(kind::of).filter(v -> v > 0).toArray();
    }

    private static String firstError(List<Sample> samples) {
        return samples.stream().filter(s -> !s.ok()).map(Sample::error).findFirst().orElse("no sample");
    }

    static double median(double[] v) {
        return ForkRunner.median(v);
    }
}
