package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ScheduleTest {
    private static final Probe REF = Probe.sample("x.Ref.run");
    private static final Probe A = Probe.sample("x.A.run");
    private static final Probe B = Probe.avgt("x.B.run");
    private static final Probe C = Probe.avgt("x.C.run");

    private static ProbeRunner.Measurement m(double nanos) {
        return new ProbeRunner.Measurement(nanos, 0.5, new double[] {nanos}, null);
    }

    @Test
    void eachFigureIsBracketedByItsReferenceAndDividedByTheirGeometricMean() {
        List<Metric> metrics = List.of(
                Metric.info("info.ref", REF, ""),
                Metric.alloc("alloc.b", B, ""),          // B first appears through an alloc metric...
                Metric.ratio("time.a", A, REF, ""),
                Metric.ratio("time.b", B, REF, ""),      // ...and is still bracketed, because a ratio metric divides it
                Metric.alloc("alloc.c", C, ""));
        Schedule s = Schedule.of(metrics);
        assertEquals(List.of(REF, B, REF, A, REF, C), s.probes());
        List<ProbeRunner.Measurement> r = new ArrayList<>(List.of(m(100), m(50), m(400), m(1000), m(100), m(7)));
        Map<String, GateCheck.Observation> o = s.observe(metrics, r, 500);
        assertEquals(50 / Math.sqrt(100 * 400), o.get("time.b").value(), 1e-12);
        assertEquals(1000 / Math.sqrt(400 * 100), o.get("time.a").value(), 1e-12);
        assertEquals(100, o.get("info.ref").value(), 1e-12, "median of the reference's three measurements");
        assertEquals(0.5, o.get("alloc.c").value(), 1e-12);
        assertEquals(500e6 / 7, o.get("alloc.c").opsPerIteration(), 1e-6);
    }

    @Test
    void aFailedReferenceMeasurementFallsBackToTheOtherSideAndAFailedFigureIsMissing() {
        List<Metric> metrics = List.of(Metric.ratio("time.a", A, REF, ""), Metric.ratio("time.b", B, REF, ""));
        Schedule s = Schedule.of(metrics);
        assertEquals(List.of(REF, A, REF, B, REF), s.probes());
        List<ProbeRunner.Measurement> r = new ArrayList<>(List.of(m(100), m(300), ProbeRunner.Measurement.failed("boom"),
                ProbeRunner.Measurement.failed("setup failed"), m(200)));
        Map<String, GateCheck.Observation> o = s.observe(metrics, r, 500);
        assertEquals(3.0, o.get("time.a").value(), 1e-12);
        assertTrue(Double.isNaN(o.get("time.b").value()));
        assertEquals("setup failed", o.get("time.b").error());
    }

    @Test
    void injectedVariantsAreMeasuredNextToTheRealFigureInsideTheSameBrackets() {
        List<Metric> real = List.of(Metric.ratio("time.a", A, REF, ""), Metric.ratio("time.b", B, REF, ""));
        List<Metric> injected = List.of(Metric.ratio("time.a", C, REF, ""), Metric.ratio("time.b", B, REF, ""));
        assertEquals(List.of(REF, A, REF, C, REF, B, REF), Schedule.ofVariants(List.of(real, injected)).probes());
    }
}
