package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.perf.gate.GateCheck.Observation;
import io.tnsr.perf.gate.GateCheck.Verdict;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The verdict arithmetic on made-up numbers. */
class GateCheckTest {
    private static final Probe P = Probe.avgt("x.Bench.run");
    private static final Probe REF = Probe.avgt("x.Ref.run");
    private static final Metric KERNEL = Metric.ratio("time.kernel", P, REF, "kernel / copy");
    private static final Metric ALLOC = Metric.alloc("alloc.codec", P, "codec bytes per op");
    private static final Metric INFO = Metric.info("info.copy", REF, "copy");
    private static final List<Metric> SUITE = List.of(KERNEL, ALLOC, INFO);

    private static Baseline baseline() {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>();
        m.put("time.kernel", new Baseline.Entry(Metric.Kind.RATIO, 2.0, 0.20, 0.05));
        m.put("alloc.codec", new Baseline.Entry(Metric.Kind.ALLOC, 0.0, 1.0, Double.NaN));
        m.put("info.copy", new Baseline.Entry(Metric.Kind.INFO, 5e6, Double.NaN, Double.NaN));
        return new Baseline(m, 16384, Map.of());
    }

    private static Map<String, Observation> now(double kernelRatio, double allocBytes, double allocOpsPerIteration) {
        Map<String, Observation> o = new HashMap<>();
        o.put("time.kernel", new Observation(kernelRatio, 100, null));
        o.put("alloc.codec", new Observation(allocBytes, allocOpsPerIteration, null));
        o.put("info.copy", new Observation(4e6, 100, null));
        return o;
    }

    @Test
    void unchangedWithinTolerancePasses() {
        GateCheck.Report r = GateCheck.check(SUITE, now(2.3, 0.001, 1e7), baseline());
        assertTrue(r.passed(), r.toString());
        assertEquals(Verdict.PASS, r.row("time.kernel").verdict());
        assertEquals(1.15, r.row("time.kernel").change(), 1e-12);
        assertEquals(2.4, r.row("time.kernel").limit(), 1e-12);
        assertEquals(Verdict.PASS, r.row("alloc.codec").verdict());
        assertEquals(Verdict.INFO, r.row("info.copy").verdict());
    }

    @Test
    void aSlowerRatioBeyondTheToleranceIsARegressionNamedInTheReport() {
        GateCheck.Report r = GateCheck.check(SUITE, now(4.0, 0, 1e7), baseline());
        assertFalse(r.passed());
        assertEquals(List.of("time.kernel"), r.failures().stream().map(GateCheck.Row::metric).toList());
        GateCheck.Row row = r.row("time.kernel");
        assertEquals(Verdict.REGRESSION, row.verdict());
        assertEquals(2.0, row.change(), 1e-12);
        assertTrue(row.note().contains("100% slower"), row.note());
    }

    @Test
    void justOverTheLimitFailsJustUnderPasses() {
        assertEquals(Verdict.REGRESSION, GateCheck.check(SUITE, now(2.41, 0, 1e7), baseline()).row("time.kernel").verdict());
        assertEquals(Verdict.PASS, GateCheck.check(SUITE, now(2.39, 0, 1e7), baseline()).row("time.kernel").verdict());
    }

    @Test
    void aFasterRatioBeyondTheTolerancePassesAsAnImprovement() {
        GateCheck.Report r = GateCheck.check(SUITE, now(1.5, 0, 1e7), baseline());
        assertTrue(r.passed());
        assertEquals(Verdict.IMPROVED, r.row("time.kernel").verdict());
        assertTrue(r.row("time.kernel").note().contains("update the baseline"));
    }

    @Test
    void allocationAboveTheAllowanceFailsWhateverTheTiming() {
        GateCheck.Report r = GateCheck.check(SUITE, now(2.0, 40, 1e7), baseline());
        assertFalse(r.passed());
        assertEquals(Verdict.ALLOCATES, r.row("alloc.codec").verdict());
        assertTrue(r.row("alloc.codec").note().contains("40.0 B/op"), r.row("alloc.codec").note());
    }

    @Test
    void theBackgroundAllowanceIsSpreadOverTheOperationsOfAnIteration() {
        // 16384 B of background per iteration over 1000 ops: 16.4 B/op allowed on top of the 1 B/op tolerance.
        assertEquals(Verdict.PASS, GateCheck.check(SUITE, now(2.0, 17, 1000), baseline()).row("alloc.codec").verdict());
        assertEquals(17.384, GateCheck.check(SUITE, now(2.0, 17, 1000), baseline()).row("alloc.codec").limit(), 1e-9);
        assertEquals(Verdict.ALLOCATES, GateCheck.check(SUITE, now(2.0, 17.5, 1000), baseline()).row("alloc.codec").verdict());
        // Fewer than one op per iteration spreads it over one.
        assertEquals(16385, GateCheck.check(SUITE, now(2.0, 1, 0.5), baseline()).row("alloc.codec").limit(), 1e-9);
    }

    @Test
    void aMetricThatWasNotMeasuredIsMissingAndFails() {
        Map<String, Observation> o = now(2.0, 0, 1e7);
        o.put("time.kernel", Observation.missing("setup failed: boom"));
        GateCheck.Report r = GateCheck.check(SUITE, o, baseline());
        assertFalse(r.passed());
        assertEquals(Verdict.MISSING, r.row("time.kernel").verdict());
        assertEquals("setup failed: boom", r.row("time.kernel").note());

        o.remove("alloc.codec");
        assertEquals(Verdict.MISSING, GateCheck.check(SUITE, o, baseline()).row("alloc.codec").verdict());
    }

    @Test
    void aBaselineMetricTheGateNoLongerMeasuresFails() {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>(baseline().metrics());
        m.put("time.renamed", new Baseline.Entry(Metric.Kind.RATIO, 1.0, 0.1, Double.NaN));
        GateCheck.Report r = GateCheck.check(SUITE, now(2.0, 0, 1e7), new Baseline(m, 16384, Map.of()));
        assertFalse(r.passed());
        assertEquals(Verdict.MISSING, r.row("time.renamed").verdict());
        assertTrue(r.row("time.renamed").note().contains("--update-baseline"));
    }

    @Test
    void aMetricNotInTheBaselineIsNewAndPassesUnlessItAllocates() {
        Baseline empty = new Baseline(Map.of(), 16384, Map.of());
        GateCheck.Report r = GateCheck.check(SUITE, now(9.0, 0.2, 1e7), empty);
        assertTrue(r.passed());
        assertEquals(Verdict.NEW, r.row("time.kernel").verdict());
        assertEquals(Verdict.NEW, r.row("alloc.codec").verdict());
        assertEquals(Verdict.ALLOCATES, GateCheck.check(SUITE, now(9.0, 64, 1e7), empty).row("alloc.codec").verdict());
    }

    @Test
    void aMetricsOwnDefaultToleranceAppliesWhenTheBaselineHasNone() {
        Metric lenient = Metric.alloc("alloc.codec", P, "").tolerance(8);
        Baseline empty = new Baseline(Map.of(), 0, Map.of());
        assertEquals(Verdict.NEW, GateCheck.check(List.of(lenient), now(0, 7.9, 1e7), empty).row("alloc.codec").verdict());
        assertEquals(Verdict.ALLOCATES, GateCheck.check(List.of(lenient), now(0, 8.1, 1e7), empty).row("alloc.codec").verdict());
    }

    @Test
    void infoMetricsNeverFail() {
        Map<String, Observation> o = now(2.0, 0, 1e7);
        o.put("info.copy", new Observation(1e12, 1, null));
        assertTrue(GateCheck.check(SUITE, o, baseline()).passed());
        o.put("info.copy", Observation.missing("failed"));
        assertEquals(Verdict.INFO, GateCheck.check(SUITE, o, baseline()).row("info.copy").verdict());
    }
}
