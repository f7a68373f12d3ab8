package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CalibrationTest {
    @Test
    void toleranceIsTwiceTheLargestDeviationRoundedUpWithAFloor() {
        assertEquals(0.03, Calibration.tolerance(0.001, 0.03), 1e-12);
        assertEquals(0.03, Calibration.tolerance(0.015, 0.03), 1e-12);
        assertEquals(0.05, Calibration.tolerance(0.021, 0.03), 1e-12);
        assertEquals(0.24, Calibration.tolerance(0.12, 0.03), 1e-12);
        assertEquals(0.20, Calibration.tolerance(0.05, 0.20), 1e-12);
    }

    @Test
    void onlyTheSlowSideSetsTheTolerance() {
        Metric r = Metric.ratio("time.x", Probe.avgt("a.B.c"), Probe.avgt("a.R.c"), "");
        List<Map<String, GateCheck.Observation>> runs = new ArrayList<>();
        for (double v : new double[] {1.0, 1.01, 0.8, 1.0, 1.02}) {
            runs.add(Map.of("time.x", new GateCheck.Observation(v, 1, null)));
        }
        Calibration.Stats t = Calibration.summarize(List.of(r), runs).get("time.x");
        assertEquals(0.2, t.maxDeviation(), 1e-12);
        assertEquals(0.04, t.suggestedTolerance(), 1e-12, "2 x 2% (the fast run at 0.8 does not loosen it)");
    }

    @Test
    void aRatioMetricsOwnFloorBeatsAQuietCalibration() {
        Metric r = Metric.ratio("time.x", Probe.avgt("a.B.c"), Probe.avgt("a.R.c"), "").tolerance(0.2);
        List<Map<String, GateCheck.Observation>> runs = new ArrayList<>();
        for (double v : new double[] {1.0, 1.01, 0.99}) {
            runs.add(Map.of("time.x", new GateCheck.Observation(v, 1, null)));
        }
        assertEquals(0.2, Calibration.summarize(List.of(r), runs).get("time.x").suggestedTolerance(), 1e-12);
        assertEquals(0.25, r.defaultTolerance(), 1e-12, "a new, uncalibrated ratio starts at the default");
    }

    @Test
    void summarizesEachMetricOverTheRuns() {
        Metric r = Metric.ratio("time.x", Probe.avgt("a.B.c"), Probe.avgt("a.R.c"), "");
        Metric a = Metric.alloc("alloc.x", Probe.avgt("a.B.c"), "").tolerance(8);
        List<Map<String, GateCheck.Observation>> runs = new ArrayList<>();
        for (double v : new double[] {1.0, 1.1, 0.95, 1.02, 1.0}) {
            runs.add(Map.of("time.x", new GateCheck.Observation(v, 1, null), "alloc.x", new GateCheck.Observation(0.004, 1, null)));
        }
        runs.add(Map.of("time.x", GateCheck.Observation.missing("failed once")));
        Map<String, Calibration.Stats> s = Calibration.summarize(List.of(r, a), runs);
        Calibration.Stats t = s.get("time.x");
        assertEquals(5, t.values().length);
        assertEquals(1.0, t.median(), 1e-12);
        assertEquals(0.15, t.spread(), 1e-12);
        assertEquals(0.1, t.maxDeviation(), 1e-12);
        assertEquals(0.1, t.slowest(), 1e-12);
        assertEquals(0.2, t.suggestedTolerance(), 1e-12);
        assertEquals(8, s.get("alloc.x").suggestedTolerance(), 1e-12);

        Baseline b = Calibration.baseline(s, 16384, Map.of());
        assertEquals(1.0, b.metrics().get("time.x").value(), 1e-12);
        assertEquals(0.2, b.metrics().get("time.x").tolerance(), 1e-12);
        assertEquals(0.0, b.metrics().get("alloc.x").value(), 1e-12, "alloc values are kept to 2 decimals");
    }
}
