package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

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

    private static List<Sample> times(double... ns) {
        List<Sample> l = new ArrayList<>();
        for (double t : ns) {
            l.add(Sample.of(t, t * 2, 0, 1e4));
        }
        return l;
    }

    @Test
    void theMedianPairRatioIsJudgedAgainstTheTolerance() {
        GateCheck.Row pass = GateCheck.compare(KERNEL, times(100, 110, 90), times(104, 112, 92));
        assertEquals(Verdict.PASS, pass.verdict());
        assertEquals(1.0222, pass.change(), 1e-4, "median of 1.04, 1.018, 1.022");
        assertEquals(1.0182, pass.low(), 1e-4);
        assertEquals(1.04, pass.high(), 1e-9);
        assertEquals(3, pass.pairs());
        assertEquals(100, pass.reference(), 1e-9);

        GateCheck.Row slow = GateCheck.compare(KERNEL, times(100, 110, 90), times(110, 121, 99));
        assertEquals(Verdict.REGRESSION, slow.verdict(), "10% slower in every pair");
        assertTrue(slow.note().startsWith("10.0% slower than the reference (tolerance 5%)"), slow.note());

        GateCheck.Row fast = GateCheck.compare(KERNEL, times(100, 110, 90), times(80, 90, 70));
        assertEquals(Verdict.IMPROVED, fast.verdict());
        assertFalse(fast.verdict().fails());
        assertTrue(fast.note().contains("--update-baseline"), fast.note());
    }

    @Test
    void pairsNotAbsoluteLevelsCancelTheHostsDrift() {
        // The host slows down by half between pairs; each pair is measured back to back, so the change stays 1.
        GateCheck.Row r = GateCheck.compare(KERNEL, times(100, 150, 200), times(101, 151.5, 202));
        assertEquals(Verdict.PASS, r.verdict());
        assertEquals(1.01, r.change(), 1e-9);
    }

    private static Sample iterations(double... ns) {
        return new Sample(ns[0], Double.NaN, 0, 1e4, ns, new double[0], null);
    }

    @Test
    void iterationsTakenInTurnsArePairedWithinTheRun() {
        // Within one run the host's memory bandwidth drops and recovers; iteration i of both builds ran a second apart.
        Sample ref = iterations(100, 130, 180, 120, 100);
        Sample same = iterations(101, 129, 182, 121, 99);
        GateCheck.Row r = GateCheck.compare(KERNEL, List.of(ref), List.of(same));
        assertEquals(Verdict.PASS, r.verdict());
        assertEquals(1.0083, r.change(), 1e-3, "median of the iteration ratios, not of drifting levels");
        assertEquals(1, r.pairs());
        Sample slower = iterations(110, 143, 198, 132, 110);
        assertEquals(Verdict.REGRESSION, GateCheck.compare(KERNEL, List.of(ref), List.of(slower)).verdict());
    }

    @Test
    void oneOutlierPairDoesNotDecideButAMajorityDoes() {
        assertEquals(Verdict.PASS, GateCheck.compare(KERNEL, times(100, 100, 100), times(101, 140, 99)).verdict());
        assertEquals(Verdict.REGRESSION, GateCheck.compare(KERNEL, times(100, 100, 100), times(108, 140, 99)).verdict());
    }

    @Test
    void anotherRunIsNeededOnlyWhileSomeRunIsBeyondTheLimitAndAtMostThree() {
        assertFalse(GateCheck.undecided(KERNEL, times(100), times(104)), "one JMH run within the limit passes");
        assertTrue(GateCheck.undecided(KERNEL, times(100), times(107)), "one run beyond it does not fail alone");
        assertTrue(GateCheck.undecided(KERNEL, times(100, 100), times(107, 101)));
        assertFalse(GateCheck.undecided(KERNEL, times(100, 100, 100), times(107, 101, 108)), "the median of three decides");
        assertFalse(GateCheck.undecided(ALLOC, times(100), times(100)), "allocation is never paired");
        assertFalse(GateCheck.undecided(KERNEL, List.of(Sample.failed("No matching benchmarks")), times(100)),
                "nothing to pair with in a reference that lacks the benchmark");
        Metric pipeline = Metric.time("time.pipeline", new Probe.Pipeline("2x2x8"), 0.08, "pipeline");
        assertTrue(GateCheck.undecided(pipeline, times(100), times(100)), "a pipeline run is one figure: two at least");
        assertFalse(GateCheck.undecided(pipeline, times(100, 100), times(100, 103)));
    }

    @Test
    void theTailIsJudgedOnItsOwnFigure() {
        List<Sample> ref = times(100, 100, 100);
        List<Sample> now = List.of(Sample.of(100, 260, 0, 1e4), Sample.of(100, 250, 0, 1e4), Sample.of(100, 240, 0, 1e4));
        assertEquals(Verdict.PASS, GateCheck.compare(KERNEL, ref, now).verdict());
        GateCheck.Row tail = GateCheck.compare(TAIL, ref, now);
        assertEquals(Verdict.REGRESSION, tail.verdict(), "p99 250 against 200");
        assertEquals(1.25, tail.change(), 1e-9);
    }

    @Test
    void aReferenceWithoutTheBenchmarkMakesItNewAndATreeWithoutItFails() {
        GateCheck.Row added = GateCheck.compare(KERNEL, List.of(Sample.failed("No matching benchmarks. Miss-spelled regexp?")),
                times(100));
        assertEquals(Verdict.NEW, added.verdict());
        assertFalse(added.verdict().fails());
        assertTrue(added.note().contains("No matching benchmarks"), added.note());
        GateCheck.Row broken = GateCheck.compare(KERNEL, times(100, 100, 100),
                List.of(Sample.failed("exit status 1: java.lang.OutOfMemoryError")));
        assertEquals(Verdict.MISSING, broken.verdict());
        assertTrue(broken.verdict().fails());
        assertTrue(broken.note().contains("OutOfMemoryError"), broken.note());
    }

    @Test
    void failedPairsAreLeftOut() {
        List<Sample> ref = new ArrayList<>(times(100, 100, 100));
        ref.set(1, Sample.failed("killed"));
        GateCheck.Row r = GateCheck.compare(KERNEL, ref, times(100, 300, 102));
        assertEquals(2, r.pairs());
        assertEquals(Verdict.PASS, r.verdict());
    }

    @Test
    void allocationIsAbsoluteWithTheBackgroundSpreadOverTheIterationsOperations() {
        // 10,000 operations per iteration: 16 KiB of background adds 1.64 B/op to the 1 B/op allowance.
        assertEquals(Verdict.PASS, GateCheck.alloc(ALLOC, List.of(Sample.of(100, 0, 2.5, 1e4))).verdict());
        GateCheck.Row one = GateCheck.alloc(ALLOC, List.of(Sample.of(100, 0, 0, 1e4), Sample.of(100, 0, 24, 1e4)));
        assertEquals(Verdict.ALLOCATES, one.verdict(), "one fork allocating an object per operation fails");
        assertEquals(24, one.now(), 1e-9);
        assertEquals(2.638, one.limit(), 1e-3);
        // A slow operation (10 per iteration) may carry the whole background.
        assertEquals(Verdict.PASS, GateCheck.alloc(ALLOC, List.of(Sample.of(1e8, 0, 1500, 10))).verdict());
        assertEquals(Verdict.MISSING, GateCheck.alloc(ALLOC, List.of(Sample.failed("exit status 1"))).verdict());
    }

    @Test
    void theReportPassesOnlyWithoutFailingRows() {
        GateCheck.Report ok = new GateCheck.Report(List.of(GateCheck.compare(KERNEL, times(100, 100, 100), times(100, 100, 100)),
                GateCheck.alloc(ALLOC, times(100))));
        assertTrue(ok.passed());
        GateCheck.Report bad = new GateCheck.Report(List.of(GateCheck.compare(KERNEL, times(100, 100, 100), times(120, 120, 120)),
                GateCheck.alloc(ALLOC, times(100))));
        assertFalse(bad.passed());
        assertEquals("time.kernel", bad.failures().get(0).metric());
    }
}
