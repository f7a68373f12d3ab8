package io.tnsr.perf.gate;

import io.tnsr.perf.engine.LayerBenchmark;
import io.tnsr.perf.gate.injected.InjectedAllocatingCodec;
import io.tnsr.perf.gate.injected.InjectedCopyingHop;
import io.tnsr.perf.gate.injected.InjectedSlowKernel;
import io.tnsr.perf.gate.injected.InjectedSlowLayer;
import io.tnsr.perf.kernels.AttentionBenchmark;
import io.tnsr.perf.kernels.KernelBenchmark;
import io.tnsr.perf.sampling.SamplerBenchmark;
import io.tnsr.perf.stage.HopBenchmark;
import io.tnsr.perf.stage.RingBenchmark;
import io.tnsr.perf.stage.StageLoopBenchmark;
import io.tnsr.perf.wire.CodecBenchmark;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;

/**
 * What the perf gate measures (a short, fixed subset of the benchmarks, each in both builds) and the
 * deliberately regressed variants its self-test must catch.
 *
 * <p>Tolerances of the compared figures are the largest slowdown of the tree under test against the reference
 * build that passes. They sit between the noise of the same code measured against itself ({@code tools/perf-gate
 * --calibrate}, docs/perf-gate.md) and the regressions the gate must catch: 5% where the figure is steady from one
 * JVM to the next, so that 10% fails; more for the figures each JVM's luck moves.
 */
public final class GateSuite {
    private GateSuite() {
    }

    static final String CODEC = CodecBenchmark.class.getName() + ".";
    static final String KERNEL = KernelBenchmark.class.getName() + ".matmul";
    static final String LAYER = LayerBenchmark.class.getName() + ".forward";
    static final String HOP = HopBenchmark.class.getName() + ".roundTrip";
    static final String RING = RingBenchmark.class.getName() + ".handOff";
    static final String STAGE = StageLoopBenchmark.class.getName() + ".frame";
    static final String SAMPLER = SamplerBenchmark.class.getName() + ".sample";
    static final String ATTENTION = AttentionBenchmark.class.getName() + ".attend";

    /** Kernels, the layer and the codec's header work: a 10% slowdown fails, the noise of the same code does not. */
    static final double KERNEL_TOLERANCE = 0.05;
    /**
     * Figures bound by streaming weights from L2 or memory, which a JVM's placement moves by up to 15-20% either way
     * for its whole life on the VMs this was measured on (docs/perf-gate.md): with the gate's forks, 12% keeps
     * unchanged code passing; a 2x slowdown, or a lost repack, still fails.
     */
    static final double STREAMING_TOLERANCE = 0.12;
    /**
     * A 16 KiB frame encoded or decoded: a copy between two buffers whose speed depends on where each JVM placed them
     * (cache sets, 4K aliasing) for its whole life. Same code against itself in CI gate runs on the AMD EPYC VM: the
     * reference's own encode forks spread 143..165 ns in one run (x1.066 against an unchanged encoder), decode's
     * levels 0.906..1.258 in another (x1.082). The header-only figures keep the codec's logic at 5%.
     */
    static final double COPY_TOLERANCE = 0.12;
    /** F32's batched product of 6 MB of weights: 4% above the limit of 5% in one comparison of the same code. */
    static final double F32_BATCHED_TOLERANCE = 0.08;
    /**
     * Q6_K's matrix-vector product runs at one of two speeds, 10.3 or 11.6 us, chosen per JVM: a median over a few
     * JVMs of each build lands on either, 10% apart.
     */
    static final double BIMODAL_TOLERANCE = 0.20;
    /** The pinned stage hop's median: the self-test's extra copy of each frame adds about 6%. */
    static final double HOP_TOLERANCE = 0.03;
    /** The stage hop's 99th percentile: a tail moves more from fork to fork than a median. */
    static final double HOP_P99_TOLERANCE = 0.15;
    /**
     * Real stage processes on both CPUs, scheduled by the OS, one run of each build after the other: their ratio
     * moved between 0.90 and 1.05 for the same code over ten gate runs. Q4_0 weights: with F32 ones each stage JVM
     * brings its own luck (F32 layer decode differs by up to 23% from JVM to JVM), and a run at 128-bit vectors
     * read 1.24, 0.98 and 1.42 for the same code.
     */
    static final double PIPELINE_TOLERANCE = 0.15;

    /** Forks of each build per round for the probes whose speed moves most from one JVM to the next. */
    static final int NOISY_FORKS = 3;

    static final Probe.Jmh HOP_STAGE = Probe.Jmh.sample(HOP, "path", "stage", "cpu", "last");
    static final Probe.Pipeline PIPELINE = new Probe.Pipeline("2x2x8", "q4_0");

    /** The gate's metrics, in measuring order. */
    public static List<Metric> metrics() {
        List<Metric> m = new ArrayList<>();
        // Codec: mean time per operation (these take nanoseconds) and bytes per frame.
        Probe.Jmh encodeHeader = Probe.Jmh.avgt(CODEC + "encodeHeaderOnly");
        m.add(Metric.alloc("alloc.codec.encodeHeader", encodeHeader, 1, "CodecBenchmark.encodeHeaderOnly: bytes per frame"));
        // The header-only figures resolve 5% of the codec's own work; the 16 KiB ones are a copy whose speed each JVM's
        // placement moves (COPY_TOLERANCE), so they get more forks and catch only a gross slowdown of the copy.
        for (String[] b : new String[][] {{"encodeActivation16k", "encode16k"}, {"decodeHeaderOnly", "decodeHeader"},
                {"decodeActivation16k", "decode16k"}}) {
            boolean copy = b[1].endsWith("16k");
            Probe.Jmh p = Probe.Jmh.avgt(CODEC + b[0]).forks(copy ? NOISY_FORKS : Probe.Jmh.FORKS);
            m.add(Metric.time("time.codec." + b[1], p, copy ? COPY_TOLERANCE : KERNEL_TOLERANCE,
                    "CodecBenchmark." + b[0] + ", mean"));
            m.add(Metric.alloc("alloc.codec." + b[1], p, 1, "CodecBenchmark." + b[0] + ": bytes per frame"));
        }
        // Weight-matrix kernels, one per weight type at least: median time per call. 768x768 stays in L2 (compute
        // and the repacked panels), 2048x768 x 16 tokens is the batched path, 4096x4096 streams from memory. Q8_0's and
        // Q6_K's batched kernels run at 768x768: at 2048x768 their panels (1.8 and 2.0 MB of bytes and scales) fill a
        // 2 MB L2, and each JVM there ran at its own speed, up to 1.7x apart (docs/perf-gate.md).
        // Matrix-vector products (1 token) of F32, Q8_0 and Q6_K stream their weights once per call: each JVM's luck
        // moves their speed (docs/perf-gate.md), so they get more forks and a wider tolerance. Every type also has a
        // figure that resolves 10%: its batched kernel (16 tokens; for F32, the layer prefill below, which is its
        // batched kernel over 128 tokens) or, for F16, Q4_0 and Q4_K, its matrix-vector product (F16 reads the
        // mapped file, shared by every JVM; Q4_0 and Q4_K unpack, which makes them compute-bound).
        m.add(kernel("F32", "768x768", "1", NOISY_FORKS, STREAMING_TOLERANCE));
        m.add(kernel("F32", "2048x768", "16", NOISY_FORKS, F32_BATCHED_TOLERANCE));
        m.add(kernel("F32", "4096x4096", "1", NOISY_FORKS, STREAMING_TOLERANCE));
        m.add(kernel("F16", "4096x4096", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q8_0", "768x768", "1", NOISY_FORKS, STREAMING_TOLERANCE));
        m.add(kernel("Q8_0", "768x768", "16", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // 71 MB, more than a last-level cache of 32 MB holds: the int8 panels' one-token calls from memory, which read
        // ahead where that times faster (without it, 12 GB/s on the Zen 5 guest whose streaming read is 25-33)
        m.add(kernel("Q8_0", "16384x4096", "1", NOISY_FORKS, STREAMING_TOLERANCE));
        // 128 tokens: the prefill path of the int8 panels (Q8_0, Q6_K, Q5_0, IQ4_NL, IQ4_XS, Q3_K), which widens them
        // to floats once per call
        m.add(kernel("Q8_0", "768x768", "128", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q4_0", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q4_0", "2048x768", "16", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // 128 tokens: Q4_0's prefill path, its panels widened to floats once per call
        m.add(kernel("Q4_0", "768x768", "128", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q4_K", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // 40 MB, from memory, as a model's decode reads it: Q4_K keeps its scales and mins as bytes, which costs the
        // in-L2 call above a few percent of work and saves a fifth of the bytes streamed here
        m.add(kernel("Q4_K", "16384x4096", "1", NOISY_FORKS, STREAMING_TOLERANCE));
        m.add(kernel("Q6_K", "768x768", "1", NOISY_FORKS, BIMODAL_TOLERANCE));
        m.add(kernel("Q6_K", "768x768", "16", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // Q2_K's one-token kernel, which Q3_K shares: nibbles and scale bytes unpacked in registers, compute-bound
        m.add(kernel("Q2_K", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // One-token kernels of their own, compute-bound as Q4_0's: Q4_1 (Q4_0's nibbles, d and ggml's min as halves
        // widened in registers), Q5_0 (Q4_0's nibbles and a plane of fifth bits), Q5_K (a byte per weight, Q4_K's
        // scales and mins)
        m.add(kernel("Q4_1", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q5_0", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        m.add(kernel("Q5_K", "768x768", "1", Probe.Jmh.FORKS, KERNEL_TOLERANCE));
        // One decode token's attention over all 12 layers of stories110M, one sequence at position 512, and what it
        // allocates (a boxed kernel did: 154 KB per frame, once in a test JVM). The KV cache of floats streams 37.8 MB
        // a call, moved by each JVM's placement as the streaming kernels are; the cache of halves reads half of it and
        // widens it in registers, steady to 1% from JVM to JVM.
        for (String kv : new String[] {"f32", "f16"}) {
            boolean streams = kv.equals("f32");
            m.add(Metric.time("time.attention." + kv + ".1x512", attention(kv, false),
                    streams ? STREAMING_TOLERANCE : KERNEL_TOLERANCE,
                    "AttentionBenchmark " + kv + " cache, 1 sequence at position 512: median per token"));
            m.add(Metric.alloc("alloc.attention." + kv + ".1x512", attention(kv, true), 1,
                    "AttentionBenchmark " + kv + " cache, 1 sequence at position 512: bytes per token"));
        }
        // A last stage's sampling of one row at the default settings of run-pipeline (a trained model's logits):
        // vector passes over 128 KB, which L2 holds; a pass gone scalar is 3-5x
        Probe.Jmh sample = Probe.Jmh.sample(SAMPLER, "vocab", "32000", "settings", "t0.8-p0.95", "logits", "peaked");
        m.add(Metric.time("time.sample.32000", sample, STREAMING_TOLERANCE,
                "SamplerBenchmark 32000 tokens, T 0.8, top-p 0.95, peaked logits: median per token"));
        m.add(Metric.alloc("alloc.sample.32000", Probe.Jmh.avgt(SAMPLER, "vocab", "32000", "settings", "t0.8-p0.95",
                "logits", "peaked"), 1, "SamplerBenchmark 32000 tokens, T 0.8, top-p 0.95: bytes per token"));
        // One stories110M layer: decode with F32 weights (memory-bound, as the streaming kernels) and with Q4_0 (the
        // same attention, norms and activations; steady to 1% from JVM to JVM), and a 128-token F32 prefill
        // (compute-bound). Their allocation in average-time mode: sample mode allocates for its own bookkeeping.
        m.add(Metric.time("time.layer.decode", Probe.Jmh.sample(LAYER, "phase", "decode", "type", "F32").forks(NOISY_FORKS),
                STREAMING_TOLERANCE, "LayerBenchmark decode (1 token at position 128) F32, median"));
        m.add(Metric.time("time.layer.decode.q4_0", Probe.Jmh.sample(LAYER, "phase", "decode", "type", "Q4_0"), KERNEL_TOLERANCE,
                "LayerBenchmark decode (1 token at position 128) Q4_0, median"));
        m.add(Metric.time("time.layer.prefill", Probe.Jmh.sample(LAYER, "phase", "prefill", "type", "F32").scaled(3),
                KERNEL_TOLERANCE, "LayerBenchmark prefill (128 tokens) F32, median"));
        // JMH's background (about 6 KB per iteration) is spread over a layer's few hundred calls per iteration.
        m.add(Metric.alloc("alloc.layer.decode", Probe.Jmh.avgt(LAYER, "phase", "decode", "type", "F32"), 1,
                "LayerBenchmark decode F32: bytes per layer forward"));
        m.add(Metric.alloc("alloc.layer.prefill", Probe.Jmh.avgt(LAYER, "phase", "prefill", "type", "F32").scaled(3), 1,
                "LayerBenchmark prefill F32: bytes per layer forward"));
        // One loopback hop of a 16 KiB frame through the stage's code, both threads pinned to one CPU.
        m.add(Metric.time("time.hop.stage", HOP_STAGE, HOP_TOLERANCE, "HopBenchmark stage path, round trip, median"));
        m.add(Metric.p99("p99.hop.stage", HOP_STAGE, HOP_P99_TOLERANCE, "HopBenchmark stage path, round trip, 99th percentile"));
        m.add(Metric.alloc("alloc.hop.stage", Probe.Jmh.avgt(HOP, "path", "stage", "cpu", "last"), 1,
                "HopBenchmark stage path: bytes per round trip"));
        m.add(Metric.alloc("alloc.ring.block", Probe.Jmh.avgt(RING, "wait", "block"), 1,
                "RingBenchmark (blocking wait): bytes per round trip"));
        // The stage's metrics thread writes its histogram log once a second (about 24 KB/s here): -prof gc counts it,
        // about 3 B per frame at this frame rate, so this metric allows 8 B/op (one object per frame is 16 or more).
        // Iterations three times as long: the stage's threads must be past their start-up before anything counts.
        m.add(Metric.alloc("alloc.stage.loop", Probe.Jmh.avgt(STAGE, "wait", "block").scaled(3), 8,
                "StageLoopBenchmark: bytes per frame, all threads"));
        // End to end: 2 stage processes, 2 micro-batches of 8 sequences in flight, stories110M shape, Q4_0.
        m.add(Metric.time("time.pipeline.2x2x8", PIPELINE, PIPELINE_TOLERANCE,
                "pipeline-bench 2 stages x 2 micro-batches of 8: time per decode token (1 / tokens/s)"));
        return m;
    }

    private static Metric kernel(String type, String shape, String tokens, int forks, double tolerance) {
        return Metric.time("time.kernel." + type.toLowerCase(Locale.ROOT) + "." + shape + ".n" + tokens,
                Probe.Jmh.sample(KERNEL, "type", type, "shape", shape, "tokens", tokens).forks(forks), tolerance,
                "KernelBenchmark " + type + " " + shape + " x " + tokens + " token(s), median");
    }

    private static Probe.Jmh attention(String kv, boolean average) {
        String[] params = {"kv", kv, "position", "512", "sequences", "1"};
        return average ? Probe.Jmh.avgt(ATTENTION, params)
                : Probe.Jmh.sample(ATTENTION, params).forks(kv.equals("f32") ? NOISY_FORKS : Probe.Jmh.FORKS);
    }

    /** The distinct probes of {@code metrics}, in order. */
    public static List<Probe> probes(List<Metric> metrics) {
        Set<Probe> s = new LinkedHashSet<>();
        for (Metric x : metrics) {
            s.add(x.probe());
        }
        return new ArrayList<>(s);
    }

    /**
     * A deliberately regressed variant: measured in the tree under test beside the probe of metric {@code expected},
     * it is benchmark {@code injected} with that probe's parameters minus {@code drop}, and must make the metric fail.
     */
    public record Injection(String name, String description, String expected, String injected, Set<String> drop) {

        /** The variant of {@code metric}'s probe. */
        public Probe.Jmh variant(Metric metric) {
            if (!(metric.probe() instanceof Probe.Jmh j)) {
                throw new IllegalArgumentException(name + ": " + metric.name() + " is not a JMH measurement");
            }
            return j.of(injected, drop);
        }
    }

    /** What {@code tools/perf-gate --self-test} injects, each measured beside the real code. */
    public static List<Injection> injections() {
        String slowKernel = InjectedSlowKernel.class.getName();
        return List.of(
                new Injection("kernel-2x", "Q4_0 768x768 matmul doing its work twice",
                        "time.kernel.q4_0.768x768.n1", slowKernel + ".twice", Set.of()),
                new Injection("kernel-10pct", "Q8_0 768x768 matmul of 16 tokens 10% slower",
                        "time.kernel.q8_0.768x768.n16", slowKernel + ".tenPercent", Set.of()),
                new Injection("layer-10pct", "Q4_0 layer decode 10% slower",
                        "time.layer.decode.q4_0", InjectedSlowLayer.class.getName() + ".tenPercent", Set.of()),
                new Injection("codec-allocating", "16 KiB frame decode whose handler allocates a record per frame",
                        "alloc.codec.decode16k", InjectedAllocatingCodec.class.getName() + ".decodeActivation16k", Set.of()),
                new Injection("hop-extra-copy", "stage hop copying every frame through a heap array before the write",
                        "time.hop.stage", InjectedCopyingHop.class.getName() + ".roundTrip", Set.of("path")));
    }
}
