package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The suite's wiring: unique names, references measured first, each injection touching what it should. */
class GateSuiteTest {
    private final List<Metric> metrics = GateSuite.metrics();

    @Test
    void metricNamesAreUniqueAndReferencesComeBeforeWhatTheyDivide() {
        Set<String> names = new HashSet<>();
        for (Metric m : metrics) {
            assertTrue(names.add(m.name()), "duplicate " + m.name());
        }
        List<Probe> probes = Schedule.of(metrics).probes();
        for (Metric m : metrics) {
            if (m.reference() != null) {
                int i = probes.indexOf(m.probe());
                assertEquals(m.reference(), probes.get(i - 1), m.name() + " is measured right after its reference");
                assertEquals(m.reference(), probes.get(i + 1), m.name() + " is measured right before its reference");
            }
        }
    }

    @Test
    void eachInjectionReplacesExactlyTheProbesOfItsBenchmarkAndItsExpectedMetricIsOneOfThem() {
        for (GateSuite.Injection inj : GateSuite.injections()) {
            List<Metric> regressed = inj.apply(metrics);
            int changed = 0;
            for (int i = 0; i < metrics.size(); i++) {
                Metric before = metrics.get(i);
                Metric after = regressed.get(i);
                assertEquals(before.name(), after.name());
                if (!before.probe().equals(after.probe())) {
                    changed++;
                    assertEquals(inj.injected(), after.probe().benchmark());
                    assertEquals(before.probe().mode(), after.probe().mode());
                    assertEquals(before.probe().forks(), after.probe().forks(), "measured like the real one");
                }
                if (before.name().equals(inj.expected())) {
                    assertNotEquals(before.probe(), after.probe(), inj.name() + " must change " + inj.expected());
                }
                if (before.reference() != null) {
                    assertEquals(before.reference(), after.reference(), "references are never injected");
                }
            }
            assertTrue(changed > 0, inj.name());
        }
    }

    @Test
    void theHopInjectionDropsThePathParameterAndKeepsThePinning() {
        GateSuite.Injection hop = GateSuite.injections().stream().filter(i -> i.name().equals("hop-extra-copy")).findFirst().orElseThrow();
        Probe p = hop.replace(GateSuite.HOP_STAGE);
        assertEquals("last", p.params().get("cpu"));
        assertEquals(3, p.forks(), "best of as many forks as the real hop");
        assertTrue(!p.params().containsKey("path"));
        assertEquals(GateSuite.HOP_RAW, hop.replace(GateSuite.HOP_RAW), "the raw reference is untouched");
    }

    @Test
    void bestOfForksShowsInTheKeyAndRejectsNonsense() {
        assertEquals("HopBenchmark.roundTrip{cpu=last,path=stage}/sample/best-of-3", GateSuite.HOP_STAGE.key());
        assertEquals(1, GateSuite.HOP_RAW.forks());
        org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class, () -> GateSuite.HOP_RAW.bestOfForks(0));
    }
}
