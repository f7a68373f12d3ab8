package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.perf.gate.GateCheck.Round;
import io.tnsr.perf.gate.GateCheck.Verdict;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The verdict arithmetic on made-up samples. */
class GateCheckTest {
    private static final Probe P = Probe.Jmh.sample("x.Bench.run");
    private static final Metric KERNEL = Metric.time("time.kernel", P, 0.05, "kernel");
    private static final Metric TAIL = Metric.p99("p99.kernel", P, 0.15, "kernel tail");
    private static final Metric ALLOC = Metric.alloc("alloc.kernel", P, 1, "kernel bytes per op");
    private static final Metric STREAMING = Metric.time("time.kernel.f32", P, 0.12, "streaming kernel");
    private static final Metric PIPELINE = Metric.time("time.pipeline", new Probe.Pipeline("2x2x8", "q4_0"), 0.08, "pipeline");

    /** A fork whose iterations took these times (its p99 twice as long). */
    private static Sample fork(double... ns) {
        double[] p99 = new double[ns.length];
        for (int i = 0; i < ns.length; i++) {
            p99[i] = 2 * ns[i];
        }
        return new Sample(GateCheck.median(ns), GateCheck.median(p99), 0, 1e4, ns, p99, null);
    }

    /** A run without iterations (a pipeline). */
    private static Sample run(double ns) {
        return Sample.of(ns, Double.NaN, Double.NaN, Double.NaN);
    }

    private static Round round(List<Sample> reference, List<Sample> now) {
        return new Round(reference, now);
    }

    @Test
    void iterationsTakenInTurnsCancelTheHostsDrift() {
        // Within the round the host's memory bandwidth drops and recovers; iteration i of every fork ran a second apart.
        Round r = round(List.of(fork(100, 130, 180, 120, 100), fork(101, 131, 181, 121, 101)),
                List.of(fork(101, 129, 182, 121, 99), fork(102, 132, 183, 122, 102)));
        GateCheck.Row row = GateCheck.compare(KERNEL, List.of(r));
        assertEquals(Verdict.PASS, row.verdict());
        assertEquals(1.0, row.change(), 0.01, "levels against the same iterations, not drifting absolute figures");
        assertEquals(2, row.pairs(), "forks of each build");
        Round slower = round(r.reference(), List.of(fork(110, 143, 198, 132, 110), fork(111, 144, 199, 133, 111)));
        GateCheck.Row slow = GateCheck.compare(KERNEL, List.of(slower));
        assertEquals(Verdict.REGRESSION, slow.verdict());
        assertEquals(1.10, slow.change(), 0.001);
        assertTrue(slow.note().startsWith("10.0% slower than the reference (tolerance 5%)"), slow.note());
    }

    @Test
    void oneUnluckyJvmAsksForMoreForksAndDoesNotDecide() {
        // One tree fork landed badly (its JIT boxed, or its memory sat badly): 18x. The others are as fast as the reference.
        Round bad = round(List.of(fork(100, 100, 100), fork(104, 104, 104)), List.of(fork(1800, 1800, 1800), fork(101, 101, 101)));
        assertTrue(GateCheck.undecided(KERNEL, List.of(bad)), "two forks that disagree this much settle nothing");
        Round good = round(List.of(fork(100, 100, 100), fork(103, 103, 103)), List.of(fork(102, 102, 102), fork(101, 101, 101)));
        GateCheck.Row row = GateCheck.compare(KERNEL, List.of(bad, good, good));
        assertEquals(Verdict.PASS, row.verdict(), "the median of six levels");
        assertEquals(6, row.pairs());
        assertEquals(1.0, row.change(), 0.02);
    }

    @Test
    void beyondTheLimitButNotSurelySlowerPassesWithANote() {
        // A figure of tens of nanoseconds on a noisy host: JVMs of both builds spread by a fifth, the median 5.2% up.
        List<Sample> ref = List.of(fork(100, 100), fork(80, 80), fork(115, 115));
        Round r = round(ref, List.of(fork(110, 110), fork(92, 92), fork(118, 118)));
        GateCheck.Row row = GateCheck.compare(KERNEL, List.of(r, r, r));
        assertTrue(row.change() > 1.05 && row.low() <= 1, row.toString());
        assertEquals(Verdict.PASS, row.verdict());
        assertTrue(row.note().contains("its band holds no change"), row.note());
    }

    /** Three rounds of three forks each way, every fork at one of two speeds, 100 or 120, for its whole life. */
    private static List<Round> twoModes(int[] referenceSlow, int[] treeSlow, double treeFactor) {
        List<Round> rounds = new ArrayList<>();
        for (int r = 0; r < 3; r++) {
            List<Sample> ref = new ArrayList<>();
            List<Sample> now = new ArrayList<>();
            for (int f = 0; f < 3; f++) {
                double jitter = 1 + 0.002 * (f - 1); // JVMs in one mode still differ a little
                double a = (f < referenceSlow[r] ? 120 : 100) * jitter;
                double b = (f < treeSlow[r] ? 120 : 100) * treeFactor / jitter;
                ref.add(fork(a, a, a, a));
                now.add(fork(b, b, b, b));
            }
            rounds.add(round(ref, now));
        }
        return rounds;
    }

    @Test
    void jvmsInTwoModesDoNotFailUnchangedCodeAndStillCatchAGrossSlowdown() {
        // Unchanged code: 5 of the tree's 9 JVMs landed in the slow mode, 3 of the reference's. The medians land in
        // different modes (x1.2) and the spread about each looks small; the pairs of JVMs show the luck.
        List<Round> luck = twoModes(new int[] {1, 1, 1}, new int[] {2, 2, 1}, 1.0);
        GateCheck.Row row = GateCheck.compare(STREAMING, luck);
        assertEquals(1.2, row.change(), 0.01, "the medians' ratio");
        assertEquals(Verdict.PASS, row.verdict(), row.toString());
        assertTrue(row.low() <= 1, "the pairs' band holds 1: " + row.low());
        assertTrue(row.note().contains("its band holds no change"), row.note());
        // Every JVM of the tree 40% slower: caught whatever the modes.
        GateCheck.Row slow = GateCheck.compare(STREAMING, twoModes(new int[] {1, 1, 1}, new int[] {1, 1, 1}, 1.4));
        assertEquals(Verdict.REGRESSION, slow.verdict(), slow.toString());
        assertTrue(slow.low() > 1.1, slow.toString());
    }

    @Test
    void thePairsBandFollowsTheMannWhitneyTables() {
        double[] ones = {1, 1.001, 1.002, 1.003, 1.004, 1.005, 1.006, 1.007, 1.008};
        assertEquals(null, GateCheck.pairBand(new double[] {1, 2, 3}, new double[] {1, 2, 3}), "three of each: no band");
        // Four of each: critical value 0, the band runs from the smallest ratio to the largest.
        double[] band4 = GateCheck.pairBand(new double[] {1, 1, 1, 1}, new double[] {0.9, 1.0, 1.1, 1.3});
        assertEquals(0.9, band4[0], 1e-12);
        assertEquals(1.3, band4[1], 1e-12);
        // Nine of each: 81 ratios, critical value 17, the band from the 18th smallest to the 18th largest.
        double[] band9 = GateCheck.pairBand(new double[] {1, 1, 1, 1, 1, 1, 1, 1, 1}, ones);
        assertEquals(1.001, band9[0], 1e-12, "the 18th of 81 sorted ratios (nine each of 1.000..1.008)");
        assertEquals(1.007, band9[1], 1e-12);
    }

    @Test
    void fasterIsImprovedAndPasses() {
        Round r = round(List.of(fork(100, 100), fork(101, 101)), List.of(fork(80, 80), fork(81, 81)));
        GateCheck.Row row = GateCheck.compare(KERNEL, List.of(r));
        assertEquals(Verdict.IMPROVED, row.verdict());
        assertFalse(row.verdict().fails());
        assertTrue(row.note().contains("--update-baseline"), row.note());
    }

    @Test
    void theLevelsOfAllRoundsArePooled() {
        Round same = round(List.of(fork(100, 100)), List.of(fork(100, 100)));
        Round slow = round(List.of(fork(100, 100)), List.of(fork(108, 108)));
        assertEquals(Verdict.PASS, GateCheck.compare(KERNEL, List.of(slow, same, same)).verdict());
        GateCheck.Row twoOfThree = GateCheck.compare(KERNEL, List.of(slow, same, slow));
        assertEquals(Verdict.REGRESSION, twoOfThree.verdict());
        assertEquals(1.08, twoOfThree.change(), 1e-9);
        assertTrue(twoOfThree.low() < 1.08 && twoOfThree.high() > 1.08, "the band of two standard errors");
        assertEquals(3, twoOfThree.pairs());
    }

    @Test
    void aMetricPassesAsSoonAsItClearlyDoesAndFailsOnlyOnThreeRounds() {
        List<Sample> ref = List.of(fork(100, 100), fork(101, 101), fork(99, 99));
        Round clear = round(ref, List.of(fork(100, 100), fork(101, 101), fork(100, 100)));
        Round clearlySlow = round(ref, List.of(fork(120, 120), fork(121, 121), fork(119, 119)));
        Round near = round(ref, List.of(fork(105, 105), fork(106, 106), fork(104, 104)));
        assertFalse(GateCheck.undecided(KERNEL, List.of(clear)), "one JMH round far within the limit passes");
        assertTrue(GateCheck.undecided(KERNEL, List.of(clearlySlow)), "one round far beyond it: a few JVMs may all be unlucky");
        assertFalse(GateCheck.undecided(KERNEL, List.of(clearlySlow, clearlySlow, clearlySlow)));
        assertEquals(Verdict.REGRESSION, GateCheck.compare(KERNEL, List.of(clearlySlow, clearlySlow, clearlySlow)).verdict());
        assertTrue(GateCheck.undecided(KERNEL, List.of(near)), "at the limit: more forks");
        assertTrue(GateCheck.undecided(KERNEL, List.of(near, near)));
        assertFalse(GateCheck.undecided(KERNEL, List.of(near, near, near)), "three rounds at most");
        assertFalse(GateCheck.undecided(ALLOC, List.of(near)), "allocation is never compared");
        assertFalse(GateCheck.undecided(KERNEL, List.of(round(List.of(Sample.failed("No matching benchmarks")), List.of(fork(100))))),
                "nothing to compare with in a reference that lacks the benchmark");
        assertTrue(GateCheck.undecided(KERNEL, List.of(round(List.of(fork(100)), List.of(fork(107))))),
                "one fork of each is never proof: the spread is at least 1%");
        assertTrue(GateCheck.undecided(PIPELINE, List.of(round(List.of(run(100)), List.of(run(100))))),
                "a pipeline run is one figure: two rounds at least");
        assertFalse(GateCheck.undecided(PIPELINE, List.of(round(List.of(run(100)), List.of(run(100))),
                round(List.of(run(100)), List.of(run(101))))));
    }

    @Test
    void runsWithoutIterationsCompareTheirFigures() {
        GateCheck.Row row = GateCheck.compare(PIPELINE, List.of(round(List.of(run(100)), List.of(run(110))),
                round(List.of(run(120)), List.of(run(126)))));
        assertEquals(Verdict.PASS, row.verdict(), "ratios 1.10 and 1.05 in the two rounds: about 1.075, within 8%");
        // Levels against each round's median of both runs: 100/105, 120/123 and 110/105, 126/123.
        assertEquals((110 / 105.0 + 126 / 123.0) / (100 / 105.0 + 120 / 123.0), row.change(), 1e-12);
    }

    @Test
    void oneRunPerBuildAndRoundStillShowsTheSpreadOfBoth() {
        // Same code, one run of each build per round: ratios 1.24, 0.98 and 1.42. Against the reference's own figure
        // its levels would all be exactly 1 and the band would shrink to the 1% floor around 1.24.
        GateCheck.Row row = GateCheck.compare(PIPELINE, List.of(round(List.of(run(508)), List.of(run(631))),
                round(List.of(run(555)), List.of(run(543))), round(List.of(run(547)), List.of(run(778)))));
        assertTrue(row.high() - row.low() > 0.3, "a wide band: " + row.low() + ".." + row.high());
    }

    @Test
    void theTailIsJudgedOnItsOwnFigure() {
        Sample ref = fork(100, 100, 100);
        Sample now = new Sample(100, 250, 0, 1e4, new double[] {100, 100, 100}, new double[] {260, 250, 240}, null);
        Round r = round(List.of(ref), List.of(now));
        assertEquals(Verdict.PASS, GateCheck.compare(KERNEL, List.of(r)).verdict());
        GateCheck.Row tail = GateCheck.compare(TAIL, List.of(r));
        assertEquals(Verdict.REGRESSION, tail.verdict(), "p99 250 against 200");
        assertEquals(1.25, tail.change(), 1e-9);
    }

    @Test
    void aReferenceWithoutTheBenchmarkMakesItNewAndATreeWithoutItFails() {
        GateCheck.Row added = GateCheck.compare(KERNEL, List.of(round(
                List.of(Sample.failed("No matching benchmarks. Miss-spelled regexp?")), List.of(fork(100)))));
        assertEquals(Verdict.NEW, added.verdict());
        assertFalse(added.verdict().fails());
        assertTrue(added.note().contains("No matching benchmarks"), added.note());
        GateCheck.Row broken = GateCheck.compare(KERNEL, List.of(round(List.of(fork(100)),
                List.of(Sample.failed("exit status 1: java.lang.OutOfMemoryError")))));
        assertEquals(Verdict.MISSING, broken.verdict());
        assertTrue(broken.verdict().fails());
        assertTrue(broken.note().contains("OutOfMemoryError"), broken.note());
    }

    @Test
    void failedForksAreLeftOut() {
        List<Sample> ref = new ArrayList<>(List.of(fork(100, 100), Sample.failed("killed"), fork(100, 100)));
        GateCheck.Row r = GateCheck.compare(KERNEL, List.of(round(ref, List.of(fork(102, 102), Sample.failed("killed")))));
        assertEquals(Verdict.PASS, r.verdict());
        assertEquals(1.02, r.change(), 1e-9);
        assertEquals(1, r.pairs());
    }

    @Test
    void allocationIsAbsoluteWithTheBackgroundSpreadOverTheIterationsOperations() {
        // 10,000 operations per iteration: 16 KiB of background adds 1.64 B/op to the 1 B/op allowance.
        assertEquals(Verdict.PASS, GateCheck.alloc(ALLOC, List.of(Sample.of(100, 0, 2.5, 1e4))).verdict());
        // A slow operation (10 per iteration) may carry the whole background.
        assertEquals(Verdict.PASS, GateCheck.alloc(ALLOC, List.of(Sample.of(1e8, 0, 1500, 10))).verdict());
        assertEquals(Verdict.MISSING, GateCheck.alloc(ALLOC, List.of(Sample.failed("exit status 1"))).verdict());
    }

    @Test
    void anAllocationFailsWhenMostJvmsAndAtLeastThreeShowItNotOneAccident() {
        Sample clean = Sample.of(100, 0, 0, 1e4);
        Sample boxed = Sample.of(100, 0, 24, 1e4);
        assertTrue(GateCheck.allocUndecided(ALLOC, List.of(boxed)), "one JVM allocating asks for more");
        assertTrue(GateCheck.allocUndecided(ALLOC, List.of(clean, boxed)));
        assertFalse(GateCheck.allocUndecided(ALLOC, List.of(clean, clean)));
        GateCheck.Row accident = GateCheck.alloc(ALLOC, List.of(clean, boxed, clean));
        assertEquals(Verdict.PASS, accident.verdict());
        assertTrue(accident.note().startsWith("1 of 3 JVMs allocated (up to 24.0 B/op)"), accident.note());
        GateCheck.Row steady = GateCheck.alloc(ALLOC, List.of(boxed, boxed, boxed));
        assertEquals(Verdict.ALLOCATES, steady.verdict(), "an object per operation in every JVM");
        assertEquals(24, steady.now(), 1e-9);
        assertEquals(2.638, steady.limit(), 1e-3);
        assertTrue(steady.note().startsWith("allocates 24.0 B/op (up to 24.0) in 3 of 3 JVMs"), steady.note());
        assertEquals(Verdict.ALLOCATES, GateCheck.alloc(ALLOC, List.of(boxed, clean, boxed, boxed)).verdict());
    }

    @Test
    void theReportPassesOnlyWithoutFailingRows() {
        Round same = round(List.of(fork(100, 100), fork(100, 100)), List.of(fork(100, 100), fork(100, 100)));
        Round slow = round(List.of(fork(100, 100), fork(100, 100)), List.of(fork(120, 120), fork(120, 120)));
        GateCheck.Report ok = new GateCheck.Report(List.of(GateCheck.compare(KERNEL, List.of(same)),
                GateCheck.alloc(ALLOC, List.of(Sample.of(100, 0, 0, 1e4)))));
        assertTrue(ok.passed());
        GateCheck.Report bad = new GateCheck.Report(List.of(GateCheck.compare(KERNEL, List.of(slow, slow, slow)),
                GateCheck.alloc(ALLOC, List.of(Sample.of(100, 0, 0, 1e4)))));
        assertFalse(bad.passed());
        assertEquals("time.kernel", bad.failures().get(0).metric());
    }
}
