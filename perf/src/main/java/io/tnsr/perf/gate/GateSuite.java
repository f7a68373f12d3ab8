package io.tnsr.perf.gate;

import io.tnsr.perf.engine.LayerBenchmark;

import io.tnsr.perf.gate.injected.InjectedAllocatingCodec;
import io.tnsr.perf.gate.injected.InjectedCopyingHop;
import io.tnsr.perf.gate.injected.InjectedSlowKernel;
import io.tnsr.perf.kernels.ComputeProbe;
import io.tnsr.perf.kernels.KernelBenchmark;
import io.tnsr.perf.kernels.MemoryProbe;
import io.tnsr.perf.kernels.StreamProbe;
import io.tnsr.perf.stage.HopBenchmark;
import io.tnsr.perf.stage.RingBenchmark;
import io.tnsr.perf.stage.StageLoopBenchmark;
import io.tnsr.perf.wire.CodecBenchmark;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * What the perf gate measures: a short, fixed subset of the benchmarks, and the deliberately regressed variants
 * its self-test must catch. Probes run in the order listed, each reference just before what it is divided by.
 */
public final class GateSuite {
    private GateSuite() {
    }

    static final String COPY = MemoryProbe.class.getName() + ".copy";
    static final String CODEC = CodecBenchmark.class.getName() + ".";
    static final String KERNEL = KernelBenchmark.class.getName() + ".matmul";
    static final String LAYER = LayerBenchmark.class.getName() + ".forward";
    static final String HOP = HopBenchmark.class.getName() + ".roundTrip";
    static final String RING = RingBenchmark.class.getName() + ".handOff";
    static final String STAGE = StageLoopBenchmark.class.getName() + ".frame";

    static final Probe COPY_16K = Probe.avgt(COPY, "size", "16k");
    static final Probe STREAM = Probe.sample(StreamProbe.class.getName() + ".read");
    static final Probe DOT = Probe.sample(ComputeProbe.class.getName() + ".dot");
    /*
     * Floors of the calibrated tolerances: the largest deviation from the median seen on the shared 2-core dev
     * machine (other engineers' builds and benchmarks running, load 2-4), rounded up, so that a baseline calibrated
     * on a quiet machine does not make the gate trip on a noisy one. Each stays well below what the self-test's
     * injected regressions need (2x for the kernel; the hop's floor is Calibration.FLOOR, 3%, for a 6% copy).
     */
    static final double CODEC_FLOOR = 0.10;
    static final double COMPUTE_FLOOR = 0.10;
    static final double MEMORY_FLOOR = 0.20;
    /*
     * The 64 MiB matrix-vector products against the 64 MiB read: both stream the same kind of mapped file, but the
     * read gains more than the kernels from a freshly written file's page-cache state (as in CI's clean clone:
     * 1.8-2.1 ms for the read there against 2.2-2.5 ms in an older checkout, the kernels 10% faster, not 25%), so
     * their ratio moved by up to 22% between checkouts of the same code. The self-test's 2x kernel stays far above.
     */
    static final double PAGE_CACHE_FLOOR = 0.35;

    static final Probe HOP_RAW = Probe.sample(HOP, "path", "raw", "cpu", "last");
    /** Best of 3 forks: the one figure that must resolve a few percent (the self-test's extra copy adds about 5%). */
    static final Probe HOP_STAGE = Probe.sample(HOP, "path", "stage", "cpu", "last").bestOfForks(3);

    /** The gate's metrics, in measuring order. */
    public static List<Metric> metrics() {
        List<Metric> m = new ArrayList<>();
        // Codec: allocation on every path; time (mean per operation: these take nanoseconds) relative to copying 16 KiB.
        m.add(Metric.info("info.copy16k", COPY_16K, "reference: copy 16 KiB off-heap, mean (ns)"));
        for (String[] b : new String[][] {
                {"encodeHeaderOnly", "encodeHeader"}, {"encodeActivation16k", "encode16k"},
                {"decodeHeaderOnly", "decodeHeader"}, {"decodeActivation16k", "decode16k"}}) {
            // The 16 KiB paths copy a frame's payload: per JVM fork their time moves by up to 14% (8 forks of
            // encodeActivation16k: 190-216 ns, the buffers' placement), enough to fail one fresh-clone CI run at +17%;
            // the fastest of 3 forks, as for the stage hop (noise only ever adds time). The same for the header
            // decode (its calibration spread is 18% against a 10% tolerance): with the wire module unchanged, one
            // fresh-clone CI run read it at +10.5%, four runs of `--only codec` right after at -1% to +6%.
            // encodeHeader has no time metric, so one fork.
            Probe p = b[1].equals("encodeHeader") ? Probe.avgt(CODEC + b[0]) : Probe.avgt(CODEC + b[0]).bestOfForks(3);
            m.add(Metric.alloc("alloc.codec." + b[1], p, "CodecBenchmark." + b[0] + ": bytes allocated per frame"));
            if (!b[1].equals("encodeHeader")) {
                m.add(Metric.ratio("time.codec." + b[1], p, COPY_16K, "CodecBenchmark." + b[0] + " / copy 16 KiB")
                        .tolerance(CODEC_FLOOR));
            }
        }
        // Kernels and the layer: median time per call (sampled: a call the scheduler interrupted does not move the
        // median), relative to the reference bound by the same resource: the core and its L2 (dot products of 512
        // KiB) for the cache-resident and compute-bound figures, DRAM (a 64 MiB read of page-cache memory) for the
        // memory-bound matrix-vector products and decode.
        m.add(Metric.info("info.dot", DOT, "reference: dot products over 512 KiB in L2, p50 (ns)"));
        m.add(kernel("F32", "768x768", "1", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        m.add(kernel("F32", "2048x768", "16", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        // Q8_0 and Q4_0 one-token kernels: compute-bound (25 and 40 G weights/s in cache), so against the dot
        // products, on the 768x768 matrix that stays in L2. They guard the repack (row panels) and the C2 boxing
        // accidents once seen on Q4_0. Not 4096x4096: its 19 MB of Q8_0 sit in the L3 that this VM shares with its
        // neighbours, and the same code measured 130 to 201 times the reference from run to run.
        m.add(kernel("Q8_0", "768x768", "1", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        m.add(kernel("Q4_0", "768x768", "1", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        // Q4_0's two-token integer kernel (shared with Q4_K): in one pass it sat at the edge of C2's node budget and
        // boxed in some JVMs (NodeCountInliningCutoff; with four tokens it always did, 3.5 MB per 8-token call at a
        // third of the speed); now two passes. This catches a relapse.
        m.add(kernel("Q4_0", "2048x768", "16", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        // Q4_K and Q6_K likewise (repacked since 2026-11-30: 3.3x). Q4_K's loop sits at the edge of C2's inlining
        // budget (two vector operations more per chunk boxed its vectors, at half the speed): this catches that too.
        m.add(kernel("Q4_K", "768x768", "1", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        m.add(kernel("Q6_K", "768x768", "1", DOT, "L2 dot products").tolerance(COMPUTE_FLOOR));
        Probe prefill = Probe.sample(LAYER, "phase", "prefill", "type", "F32").scaled(3);
        m.add(Metric.ratio("time.layer.prefill", prefill, DOT, "LayerBenchmark prefill (128 tokens) F32 p50 / L2 dot products")
                .tolerance(COMPUTE_FLOOR));
        m.add(Metric.info("info.stream64m", STREAM, "reference: read 64 MiB of mapped weights, p50 (ns)"));
        m.add(kernel("F32", "4096x4096", "1", STREAM, "64 MiB read").tolerance(PAGE_CACHE_FLOOR));
        m.add(kernel("F16", "4096x4096", "1", STREAM, "64 MiB read").tolerance(PAGE_CACHE_FLOOR));
        m.add(Metric.ratio("time.layer.decode", Probe.sample(LAYER, "phase", "decode", "type", "F32"), STREAM,
                "LayerBenchmark decode (1 token) F32 p50 / 64 MiB read").tolerance(MEMORY_FLOOR));
        m.add(Metric.alloc("alloc.layer.decode", Probe.avgt(LAYER, "phase", "decode", "type", "F32"),
                "LayerBenchmark decode F32: bytes per layer forward"));
        m.add(Metric.alloc("alloc.layer.prefill", Probe.avgt(LAYER, "phase", "prefill", "type", "F32").scaled(3),
                "LayerBenchmark prefill F32: bytes per layer forward"));
        // One loopback hop of a 16 KiB frame: the stage's code relative to a raw socket ping-pong, both pinned.
        m.add(Metric.info("info.hop.raw", HOP_RAW, "reference: raw 16 KiB loopback round trip, p50 (ns)"));
        m.add(Metric.ratio("time.hop.stage", HOP_STAGE, HOP_RAW, "HopBenchmark stage path / raw path, round trip p50"));
        m.add(Metric.alloc("alloc.hop.stage", Probe.avgt(HOP, "path", "stage", "cpu", "last"),
                "HopBenchmark stage path: bytes per round trip"));
        // The ring hand-off and the real stage loop: allocation (their times are shown, not judged).
        Probe ring = Probe.avgt(RING, "wait", "block");
        m.add(Metric.alloc("alloc.ring.block", ring, "RingBenchmark (blocking wait): bytes per round trip"));
        m.add(Metric.info("info.ring.block", ring, "RingBenchmark (blocking wait): mean round trip (ns)"));
        Probe stage = Probe.avgt(STAGE, "wait", "block");
        // The stage's metrics thread writes its histogram log once a second (about 24 KB/s here): -prof gc counts it,
        // about 3 B per frame at this frame rate, so this metric allows 8 B/op (one object per frame is 16 or more).
        m.add(Metric.alloc("alloc.stage.loop", stage, "StageLoopBenchmark: bytes per frame, all threads").tolerance(8));
        m.add(Metric.info("info.stage.loop", stage, "StageLoopBenchmark: mean time per frame (ns)"));
        return m;
    }

    private static Metric kernel(String type, String shape, String tokens, Probe reference, String refName) {
        return Metric.ratio("time.kernel." + type.toLowerCase(java.util.Locale.ROOT) + "." + shape + ".n" + tokens,
                Probe.sample(KERNEL, "type", type, "shape", shape, "tokens", tokens), reference,
                "KernelBenchmark " + type + " " + shape + " x " + tokens + " token(s) p50 / " + refName);
    }

    /**
     * A deliberately regressed variant: every probe of benchmark {@code real} whose parameters include
     * {@code match} is measured with benchmark {@code injected} instead (same parameters, minus {@code drop}).
     *
     * @param expected the metric that must catch it
     */
    public record Injection(String name, String description, String real, Map<String, String> match, String injected,
                            Set<String> drop, String expected) {

        /** The probe to measure instead of {@code p}, or {@code p} itself when this injection does not touch it. */
        public Probe replace(Probe p) {
            if (!p.benchmark().equals(real) || !p.params().entrySet().containsAll(match.entrySet())) {
                return p;
            }
            Map<String, String> params = new java.util.TreeMap<>(p.params());
            params.keySet().removeAll(drop);
            return new Probe(injected, params, p.mode(), p.iterationScale(), p.forks());
        }

        /** {@code metrics} with this regression injected. */
        public List<Metric> apply(List<Metric> metrics) {
            List<Metric> out = new ArrayList<>();
            for (Metric m : metrics) {
                Metric r = m.withProbe(replace(m.probe()));
                out.add(m.reference() == null ? r
                        : new Metric(r.name(), r.kind(), r.probe(), replace(m.reference()), r.description(), r.tolerance()));
            }
            return out;
        }
    }

    /** What {@code tools/perf-gate --self-test} injects, one at a time. */
    public static List<Injection> injections() {
        return List.of(
                new Injection("kernel-slow-2x", "F32 matmul doing its work twice (about 2x slower)",
                        KERNEL, Map.of("type", "F32", "shape", "4096x4096", "tokens", "1"),
                        InjectedSlowKernel.class.getName() + ".matmul", Set.of(), "time.kernel.f32.4096x4096.n1"),
                new Injection("codec-allocating", "16 KiB frame decode whose handler allocates a record per frame",
                        CODEC + "decodeActivation16k", Map.of(),
                        InjectedAllocatingCodec.class.getName() + ".decodeActivation16k", Set.of(), "alloc.codec.decode16k"),
                new Injection("hop-extra-copy", "stage hop copying every frame through a heap array before the write",
                        HOP, Map.of("path", "stage"),
                        InjectedCopyingHop.class.getName() + ".roundTrip", Set.of("path"), "time.hop.stage"));
    }
}
