package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The suite's wiring: unique names, the coverage it promises, tolerances that catch a 10% slowdown. */
class GateSuiteTest {
    private final List<Metric> metrics = GateSuite.metrics();

    @Test
    void metricNamesAreUnique() {
        Set<String> names = new HashSet<>();
        for (Metric m : metrics) {
            assertTrue(names.add(m.name()), "duplicate " + m.name());
        }
    }

    @Test
    void coversEveryKernelTypeTheLayerAttentionTheHopAndThePipeline() {
        Set<String> names = new HashSet<>();
        metrics.forEach(m -> names.add(m.name()));
        for (String type : List.of("f32", "f16", "q8_0", "q4_0", "q4_k", "q6_k", "q2_k", "q4_1", "q5_0", "q5_k")) {
            assertTrue(names.stream().anyMatch(n -> n.startsWith("time.kernel." + type + ".")), type);
        }
        for (String n : List.of("time.layer.decode", "time.layer.prefill", "alloc.layer.decode", "alloc.layer.prefill",
                "time.hop.stage", "p99.hop.stage", "alloc.hop.stage", "alloc.ring.block", "alloc.stage.loop",
                "time.codec.decode16k", "alloc.codec.decode16k", "time.pipeline.2x2x8", "time.sample.32000",
                "alloc.sample.32000", "time.attention.f32.1x512", "time.attention.f16.1x512", "alloc.attention.f32.1x512",
                "alloc.attention.f16.1x512")) {
            assertTrue(names.contains(n), n);
        }
    }

    @Test
    void everyWeightTypeTheLayerAndTheCodecHaveAFigureThatFailsATenPercentSlowdown() {
        // F32's batched kernel is the layer prefill's work (128 tokens).
        for (String prefix : List.of("time.layer.prefill", "time.kernel.f16.", "time.kernel.q8_0.", "time.kernel.q4_0.",
                "time.kernel.q4_k.", "time.kernel.q6_k.", "time.kernel.q2_k.", "time.kernel.q4_1.", "time.kernel.q5_0.",
                "time.kernel.q5_k.", "time.layer.decode", "time.codec.decodeHeader",
                "time.attention.f16.")) {
            assertTrue(metrics.stream().anyMatch(m -> m.name().startsWith(prefix) && 1.10 > (1 + m.tolerance()) * 1.03),
                    prefix + ": no figure with a tolerance that leaves a margin below 10%");
        }
        for (Metric m : metrics) {
            if (m.kind() != Metric.Kind.ALLOC) {
                assertTrue(m.tolerance() <= 0.20, m.name() + " would let more than 20% through");
            }
        }
    }

    @Test
    void eachInjectionNamesAMetricOfTheSuiteAndReplacesOnlyItsBenchmark() {
        for (GateSuite.Injection inj : GateSuite.injections()) {
            Metric m = metrics.stream().filter(x -> x.name().equals(inj.expected())).findFirst().orElse(null);
            assertNotNull(m, inj.name() + " expects " + inj.expected());
            Probe.Jmh real = (Probe.Jmh) m.probe();
            Probe.Jmh v = inj.variant(m);
            assertEquals(inj.injected(), v.benchmark());
            assertEquals(real.mode(), v.mode(), "measured like the real one");
            assertEquals(real.iterationScale(), v.iterationScale());
            for (String k : real.params().keySet()) {
                assertEquals(inj.drop().contains(k) ? null : real.params().get(k), v.params().get(k), inj.name() + " " + k);
            }
        }
    }

    @Test
    void theHopInjectionKeepsThePinning() {
        GateSuite.Injection hop = GateSuite.injections().stream().filter(i -> i.name().equals("hop-extra-copy")).findFirst().orElseThrow();
        Metric m = metrics.stream().filter(x -> x.name().equals("time.hop.stage")).findFirst().orElseThrow();
        Probe.Jmh p = hop.variant(m);
        assertEquals("last", p.params().get("cpu"));
        assertTrue(!p.params().containsKey("path"));
        assertEquals("InjectedCopyingHop.roundTrip{cpu=last}/sample", p.key());
    }

    @Test
    void probesAreMeasuredOnceForAllTheirMetrics() {
        List<Probe> probes = GateSuite.probes(metrics);
        assertEquals(new HashSet<>(probes).size(), probes.size());
        assertTrue(probes.contains(GateSuite.HOP_STAGE));
        assertEquals(2, metrics.stream().filter(m -> m.probe().equals(GateSuite.HOP_STAGE)).count(), "median and p99 of the same forks");
    }
}
