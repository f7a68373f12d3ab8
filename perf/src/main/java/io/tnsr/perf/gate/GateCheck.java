package io.tnsr.perf.gate;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The gate's verdicts: pure arithmetic on the samples of the two builds (no processes here, so it is unit-tested
 * with made-up numbers).
 * <ul>
 * <li>{@link Metric.Kind#TIME} and {@link Metric.Kind#P99}: a probe is measured in rounds. In a round a few forks
 * of each build run at once and take turns iteration by iteration ({@link Turns}), so iteration i of every fork
 * ran within a second or two of the others and the host's drift (its memory bandwidth moves from second to
 * second) hits all alike. A fork's <em>level</em> is the median over its iterations of its figure / the reference
 * forks' median figure in the same iteration (a pipeline run, without iterations: its figure / the reference's
 * in the round). What remains is each JVM's own luck, where its memory landed and what its JIT made: it holds
 * for the JVM's life, here up to 15% either way for the memory-bound figures, 18x once for a C2 boxing accident.
 * So every build's levels from all rounds are pooled and {@code change} = median(tree levels) / median(reference
 * levels): a median, because lucky and unlucky JVMs come in both directions and a few extreme ones must not
 * move it. REGRESSION when {@code change > 1 + tolerance} and the tree is surely slower: its band lies above 1. The
 * band is the wider of two: {@code change} +- two standard errors (from the levels' spread), and, once each build
 * has four levels or more, the distribution-free band of the pairs ({@link #pairBand}). The second is there for JVMs
 * whose luck comes in two modes (on one Xeon VM, an F32 matrix-vector product ran at 41 or 50 us per JVM): there a
 * median lands in either mode, and the spread about it, measured within that mode, looks small; a median of the
 * tree in the slow mode against a reference's in the fast one once read x1.162 +- 0.09 on unchanged code. A change
 * beyond the limit whose band still holds 1 passes with a note: on a host where JVMs of the same code differ by a
 * fifth, such a figure cannot tell a 5% slowdown from none, nor, in two modes, a slowdown smaller than their gap.
 * IMPROVED (passes) when {@code change < 1 / (1 + tolerance)}; else PASS. NEW (passes) when the reference build
 * could not measure it (a benchmark it does not have yet).</li>
 * <li>Another round is measured, up to {@link #MAX_ROUNDS}, while the change's band reaches above the limit: one
 * round passes a steady figure, a noisy one gets more JVMs before it is judged, and a regression is only declared
 * on all of them.</li>
 * <li>{@link Metric.Kind#ALLOC}: the tree under test's bytes per operation against the allowance plus JMH's
 * background spread over the iteration's operations; ALLOCATES when most of its forks, and at least three, exceed
 * it (a fork that exceeds brings more forks). Absolute, never compared.</li>
 * <li>MISSING (fails) when the tree under test could not measure a metric.</li>
 * </ul>
 */
public final class GateCheck {
    /** Rounds at most for one probe. */
    public static final int MAX_ROUNDS = 3;
    /** Standard errors between {@code change} and the limit for a verdict before {@link #MAX_ROUNDS}. */
    static final double SETTLED = 2.0;
    /**
     * The least spread of levels assumed, whatever a few forks showed: two JVMs of the same code differ by about 1%
     * at best here, and two forks that happen to agree must not look like proof.
     */
    static final double MIN_SPREAD = 0.01;
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
     * @param change    median of the tree's levels / median of the reference's (compared metrics), else NaN
     * @param low       change - 2 standard errors (NaN if none)
     * @param high      change + 2 standard errors (NaN if none)
     * @param pairs     forks (or runs) of each build compared
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

    /** One round of a probe: the forks of the reference and of one other build (or variant), run together. */
    public record Round(List<Sample> reference, List<Sample> now) {
    }

    /** A compared metric over its probe's rounds. */
    public static Row compare(Metric m, List<Round> rounds) {
        double limit = 1 + m.tolerance();
        double[] nowValues = values(m.kind(), rounds.stream().flatMap(r -> r.now().stream()).toList());
        List<Sample> reference = rounds.stream().flatMap(r -> r.reference().stream()).toList();
        if (nowValues.length == 0) {
            return new Row(m.name(), m.kind(), median(values(m.kind(), reference)), Double.NaN, Double.NaN, Double.NaN,
                    Double.NaN, 0, limit, Verdict.MISSING,
                    "not measured: " + firstError(rounds.stream().flatMap(r -> r.now().stream()).toList()));
        }
        double[] refValues = values(m.kind(), reference);
        if (refValues.length == 0) {
            return new Row(m.name(), m.kind(), Double.NaN, median(nowValues), Double.NaN, Double.NaN, Double.NaN, 0, limit,
                    Verdict.NEW, reference.isEmpty() ? "no reference figure"
                            : "the reference build could not measure it (" + firstError(reference) + ")");
        }
        Comparison c = comparison(m.kind(), rounds);
        if (c == null) {
            return new Row(m.name(), m.kind(), median(refValues), median(nowValues), Double.NaN, Double.NaN, Double.NaN, 0,
                    limit, Verdict.MISSING, "no round measured both builds");
        }
        double change = c.change();
        double low = c.low();
        double high = c.high();
        Verdict v;
        String note;
        if (change > limit && !(low > 1)) {
            // Beyond the limit, but not even surely slower: after every round, the tree's JVMs and the reference's
            // still overlap (a figure of tens of nanoseconds whose JVMs differ by a fifth). Named, not failed.
            v = Verdict.PASS;
            note = String.format(Locale.ROOT, "x%.3f but its band holds no change (%.3f..%.3f): "
                    + "the host's spread, not a measured slowdown", change, low, high);
        } else if (change > limit) {
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
        return new Row(m.name(), m.kind(), median(refValues), median(nowValues), change, low, high, c.forks(), limit, v, note);
    }

    /** Forks of the tree under test that must show an allocation before a metric fails on it. */
    static final int ALLOC_CONFIRMATIONS = 3;

    /**
     * An allocation metric: ALLOCATES when most of the tree's forks, and at least {@link #ALLOC_CONFIRMATIONS}, allocate
     * beyond their allowance. A change that allocates on the hot path does so in every JVM; one JVM alone that does
     * (C2 boxing the vectors of one compilation, seen once in about forty JVMs of the F32 layer, 23 KB per call) is
     * the JIT's accident, not the change's: it passes, and the note names it.
     */
    public static Row alloc(Metric m, List<Sample> now) {
        List<double[]> measured = new ArrayList<>(); // {bytes per op, allowance}
        for (Sample s : now) {
            if (s.ok() && !Double.isNaN(s.alloc())) {
                measured.add(new double[] {s.alloc(), allowance(m, s)});
            }
        }
        if (measured.isEmpty()) {
            return new Row(m.name(), m.kind(), Double.NaN, Double.NaN, Double.NaN, Double.NaN, Double.NaN, 0, Double.NaN,
                    Verdict.MISSING, "not measured: " + firstError(now));
        }
        List<double[]> over = measured.stream().filter(x -> x[0] > x[1]).toList();
        double[] typical = measured.stream().sorted((a, b) -> Double.compare(a[0] - a[1], b[0] - b[1])).toList()
                .get((measured.size() - 1) / 2);
        if (over.size() * 2 > measured.size() && over.size() >= Math.min(ALLOC_CONFIRMATIONS, measured.size())) {
            double[] worst = over.stream().max((a, b) -> Double.compare(a[0] - a[1], b[0] - b[1])).orElseThrow();
            return new Row(m.name(), m.kind(), Double.NaN, typical[0], Double.NaN, Double.NaN, Double.NaN, measured.size(),
                    typical[1], Verdict.ALLOCATES, String.format(Locale.ROOT, "allocates %.1f B/op (up to %.1f) in %d of %d JVMs, "
                    + "allowed %.2f", typical[0], worst[0], over.size(), measured.size(), worst[1]));
        }
        String note = over.isEmpty() ? "" : String.format(Locale.ROOT, "%d of %d JVMs allocated (up to %.1f B/op): a JIT accident, "
                + "not steady", over.size(), measured.size(), over.stream().mapToDouble(x -> x[0]).max().orElseThrow());
        return new Row(m.name(), m.kind(), Double.NaN, typical[0], Double.NaN, Double.NaN, Double.NaN, measured.size(), typical[1],
                Verdict.PASS, note);
    }

    /** Whether an allocation metric needs more forks: some allocated, too few to tell a change from an accident. */
    public static boolean allocUndecided(Metric m, List<Sample> now) {
        List<Sample> measured = now.stream().filter(s -> s.ok() && !Double.isNaN(s.alloc())).toList();
        long over = measured.stream().filter(s -> s.alloc() > allowance(m, s)).count();
        return over > 0 && measured.size() < ALLOC_CONFIRMATIONS;
    }

    /** A fork's allowance: the metric's own plus JMH's background spread over the iteration's operations. */
    private static double allowance(Metric m, Sample s) {
        return m.tolerance() + (Double.isNaN(s.opsPerIteration()) ? 0 : BACKGROUND_ALLOC_PER_ITERATION / Math.max(1, s.opsPerIteration()));
    }

    /**
     * Whether another round is needed: fewer than the probe's minimum, or fewer than {@link #MAX_ROUNDS} while the
     * change's band reaches above the limit. A metric passes as soon as it clearly does; it fails only on all the
     * rounds, since a few JVMs can all be unlucky.
     */
    public static boolean undecided(Metric m, List<Round> rounds) {
        if (!m.kind().compared() || rounds.size() >= MAX_ROUNDS
                || values(m.kind(), rounds.stream().flatMap(r -> r.reference().stream()).toList()).length == 0) {
            return false;
        }
        Comparison c = comparison(m.kind(), rounds);
        if (c == null || c.rounds() < m.probe().minRounds()) {
            return true;
        }
        return c.high() > 1 + m.tolerance();
    }

    /**
     * The tree against the reference over some rounds.
     *
     * @param change the median of the tree's levels / the median of the reference's
     * @param low    the lower end of the change's band: the lower of {@code change} - {@link #SETTLED} standard errors
     *               (from the levels' median absolute deviation and their count) and the pairs' band
     *               ({@link #pairBand}) where the levels are enough for one
     * @param high   its upper end, likewise
     * @param forks  levels of each build (the smaller count)
     * @param rounds rounds that measured both builds
     */
    record Comparison(double change, double low, double high, int forks, int rounds) {
    }

    /**
     * The distribution-free band of the tree's levels against the reference's, or null when there are too few for one
     * (three of each or fewer). Every pair's ratio, tree level / reference level, sorted: the band runs from the
     * (c+1)-th smallest to the (c+1)-th largest, c being the Mann-Whitney statistic's lower critical value at
     * {@link #SETTLED} standard errors (normal approximation, continuity-corrected: 0 for four levels of each, 5 for
     * six, 17 for nine, as in the exact tables at 5%). The pairs' median is the Hodges-Lehmann estimate of the change
     * and this its Moses interval. It assumes nothing about the shape of the JVMs' luck: when lucky and unlucky JVMs
     * fall in two modes, whichever mode each build's median landed in, the pairs of a fast tree JVM with a slow
     * reference one, and those of JVMs in the same mode, keep the band's lower end at or below 1 unless they are
     * fewer than c + 1.
     */
    static double[] pairBand(double[] reference, double[] now) {
        int n = reference.length;
        int m = now.length;
        long pairs = (long) n * m;
        double c = pairs / 2.0 - SETTLED * Math.sqrt(pairs * (n + m + 1) / 12.0) - 0.5;
        if (c < 0) {
            return null;
        }
        int k = (int) Math.floor(c);
        double[] ratios = new double[(int) pairs];
        int i = 0;
        for (double r : reference) {
            for (double x : now) {
                ratios[i++] = x / r;
            }
        }
        Arrays.sort(ratios);
        return new double[] {ratios[k], ratios[ratios.length - 1 - k]};
    }

    /** See the class comment; null when no round measured both builds. */
    static Comparison comparison(Metric.Kind kind, List<Round> rounds) {
        List<Double> ref = new ArrayList<>();
        List<Double> now = new ArrayList<>();
        int used = 0;
        for (Round r : rounds) {
            double[][] l = levels(kind, r);
            if (l != null) {
                used++;
                for (double x : l[0]) {
                    ref.add(x);
                }
                for (double x : l[1]) {
                    now.add(x);
                }
            }
        }
        if (used == 0) {
            return null;
        }
        double[] a = ref.stream().mapToDouble(Double::doubleValue).toArray();
        double[] b = now.stream().mapToDouble(Double::doubleValue).toArray();
        double ma = median(a);
        double mb = median(b);
        // Robust spread of a level about its build's median, both builds pooled; 1.4826 x MAD estimates a standard
        // deviation, 1.253 x sd / sqrt(n) a median's standard error.
        double[] dev = new double[a.length + b.length];
        for (int i = 0; i < a.length; i++) {
            dev[i] = Math.abs(a[i] / ma - 1);
        }
        for (int i = 0; i < b.length; i++) {
            dev[a.length + i] = Math.abs(b[i] / mb - 1);
        }
        double sd = Math.max(MIN_SPREAD, 1.4826 * median(dev));
        double change = mb / ma;
        double se = change * 1.253 * sd * Math.sqrt(1.0 / a.length + 1.0 / b.length);
        double low = change - SETTLED * se;
        double high = change + SETTLED * se;
        double[] pairs = pairBand(a, b);
        if (pairs != null) {
            low = Math.min(low, pairs[0]);
            high = Math.max(high, pairs[1]);
        }
        return new Comparison(change, low, high, Math.min(a.length, b.length), used);
    }

    /**
     * One round's levels, {reference, tree}: each fork's median over iterations of its figure / the reference forks'
     * median in that iteration, or (without iterations) its figure / the median figure of both builds' runs. Null when a
     * side measured nothing.
     */
    static double[][] levels(Metric.Kind kind, Round round) {
        List<Sample> ref = round.reference().stream().filter(s -> s.ok() && kind.of(s) > 0).toList();
        List<Sample> now = round.now().stream().filter(s -> s.ok() && kind.of(s) > 0).toList();
        if (ref.isEmpty() || now.isEmpty()) {
            return null;
        }
        int n = Integer.MAX_VALUE;
        for (Sample s : ref) {
            n = Math.min(n, kind.iterations(s).length);
        }
        for (Sample s : now) {
            n = Math.min(n, kind.iterations(s).length);
        }
        if (n == 0) {
            // Against the median of both builds' figures: against the reference's alone, a round of one run per
            // build would give the reference a level of exactly 1 every time and hide half of the spread.
            double base = median(java.util.stream.Stream.concat(ref.stream(), now.stream()).mapToDouble(kind::of).toArray());
            return new double[][] {ref.stream().mapToDouble(s -> kind.of(s) / base).toArray(),
                    now.stream().mapToDouble(s -> kind.of(s) / base).toArray()};
        }
        double[] column = new double[n];
        for (int i = 0; i < n; i++) {
            final int at = i;
            column[i] = median(ref.stream().mapToDouble(s -> kind.iterations(s)[at]).toArray());
        }
        return new double[][] {levels(kind, ref, column, n), levels(kind, now, column, n)};
    }

    private static double[] levels(Metric.Kind kind, List<Sample> forks, double[] column, int n) {
        double[] out = new double[forks.size()];
        for (int f = 0; f < out.length; f++) {
            double[] q = new double[n];
            for (int i = 0; i < n; i++) {
                q[i] = kind.iterations(forks.get(f))[i] / column[i];
            }
            out[f] = median(q);
        }
        return out;
    }

    /** One round's change on its own (for the progress line); NaN when a side measured nothing. */
    static double ratio(Metric.Kind kind, Round round) {
        Comparison c = comparison(kind, List.of(round));
        return c == null ? Double.NaN : c.change();
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
