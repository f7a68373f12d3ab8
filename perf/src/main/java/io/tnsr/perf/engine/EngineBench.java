package io.tnsr.perf.engine;

import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.process.ChildJvm;
import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.util.TaskProgress;
import io.tnsr.perf.CpuPin;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.function.DoubleSupplier;
import java.util.stream.Collectors;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code tools/engine-bench}: single-process, single-thread decode and prefill speed of the engine on a
 * synthetic model, printed as a table. Each figure is the median of several timed repeats after a warm-up,
 * with the spread (min..max), beside the physical ceiling of the workload (from two probes run in the same
 * JVM: streaming read bandwidth and FMA peak, see {@link Probes}), llama.cpp's figure on the same shape (fixed
 * figures from another host, or measured here and read with {@code --llama-cpp}, see {@link LlamaCppFigures}) and
 * the target ratio,
 * and the bytes allocated per token (0 in steady state).
 */
@Command(name = "engine-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Measures single-thread decode and prefill tokens/s of the engine on a synthetic model"
                + " (generated once into .build/models). Prints one row per workload: median of the repeats, min..max."})
public final class EngineBench implements Callable<Integer> {

    @Option(names = "--preset", defaultValue = "stories110M", description = "Model shape: stories110M, stories15M, tiny (default: ${DEFAULT-VALUE}).")
    String preset;

    @Option(names = "--types", defaultValue = "f32,q8_0,q4_0", split = ",",
            description = {"Weight types to measure: f32, f16, bf16, q8_0, q6_k, q5_k, q5_0, q4_k, q4_1, q4_0, iq4_nl,"
                    + " iq4_xs, q3_k, q2_k (default: ${DEFAULT-VALUE}).",
                    "The K-quants and iq4_xs need a preset whose dim and FFN are multiples of 256 (stories110M);"
                    + " llama.cpp's fixed figures cover f32, q8_0 and q4_0 only."})
    List<String> types;

    @Option(names = "--arch", defaultValue = "llama", paramLabel = "NAME",
            description = {"Architecture of the synthetic model: llama, qwen2 (Q/K/V biases) or qwen3 (per-head Q/K norms,"
                    + " head size 128 as Qwen3's files have it, so Q is wider than the model) (default: ${DEFAULT-VALUE})."})
    String arch;

    @Option(names = "--decode-tokens", defaultValue = "48", description = "Decode steps timed per repeat (default: ${DEFAULT-VALUE}).")
    int decodeSteps;

    @Option(names = "--prefill", defaultValue = "128", description = "Prompt length of the prefill workload (default: ${DEFAULT-VALUE}).")
    int prefill;

    @Option(names = "--batches", defaultValue = "8,16", split = ",", description = "Batched decode sizes (default: ${DEFAULT-VALUE}).")
    List<Integer> batches;

    @picocli.CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    @Option(names = "--decode-at", defaultValue = "0", paramLabel = "POSITION",
            description = {"Also time one sequence decoding from POSITION on (after a prefill to it): the cost of attention"
                    + " over a long context, which the other rows (positions 16-64) hardly see. 0 = off (default).",
                    "Its ceiling counts the KV cache bytes read per step as well; llama.cpp has no figure for it."})
    int decodeAt;

    @Option(names = "--repeats", defaultValue = "3", description = "Timed repeats per workload (default: ${DEFAULT-VALUE}).")
    int repeats;

    @Option(names = "--warmup", defaultValue = "3", paramLabel = "SECONDS",
            description = "Untimed warm-up per workload, so that the JIT has compiled the kernels (default: ${DEFAULT-VALUE}).")
    double warmupSeconds;

    @Option(names = "--probe-runs", defaultValue = "5", description = "Runs of each hardware probe; the best counts (default: ${DEFAULT-VALUE}).")
    int probeRuns;

    @Option(names = "--threads", defaultValue = "1", paramLabel = "N",
            description = {"Threads sharing the rows of every matmul (default: ${DEFAULT-VALUE}); the rest of the pass stays"
                    + " on one. Compare with llama.cpp run with as many threads (-t N -tb N). The %% of ceiling column"
                    + " stays one core's ceiling."})
    int threads;

    @Option(names = "--cpu", defaultValue = "last", paramLabel = "LIST|last|none",
            description = {"Pin the probes and every workload, all their threads and every JVM forked for them, to these"
                    + " CPUs: last (default: the last N CPUs this process may use, N = --threads), a list as taskset takes it"
                    + " (1, 0,1, 0-3), or none. The vCPUs of a VM can differ in speed by up to 1.5x for minutes at a time:"
                    + " run llama.cpp on the same CPUs (taskset -c LIST llama-bench ...) when comparing."})
    String cpu;

    @Option(names = "--kv-cache-type", defaultValue = "f32", paramLabel = "TYPE", converter = KvCacheTypeConverter.class,
            description = {"Elements of the KV cache: f32 (exact) or f16 (halves, as llama.cpp's default cache): half the"
                    + " bytes attention reads per position (default: ${DEFAULT-VALUE}). The ceiling counts them."})
    KvCacheType kvCacheType;

    /** Reads {@code --kv-cache-type}: f32 or f16, any case. */
    static final class KvCacheTypeConverter implements CommandLine.ITypeConverter<KvCacheType> {
        @Override
        public KvCacheType convert(String value) {
            return KvCacheType.parse(value, "--kv-cache-type");
        }
    }

    @Option(names = "--fork", negatable = true, defaultValue = "true", fallbackValue = "true",
            description = {"Measure each weight type in a JVM of its own, as a stage runs one model per process (default)."
                    + " --no-fork: every type in this one JVM, where a type measured after others can lose up to 12%%"
                    + " to the JIT profiles they left in the Vector API's shared code (Q4_0 decode 235 vs 268 tokens/s)."})
    boolean fork;

    @Option(names = "--llama-cpp", paramLabel = "TYPE=FILE",
            description = {"Compare TYPE's rows against llama.cpp measured here: FILE holds the JSON lines of `llama-bench"
                    + " -t 1 -o jsonl` and `llama-batched-bench -t 1 -tb 1 --output-format jsonl` (-t N -tb N with --threads N)"
                    + " run on the model file"
                    + " engine-bench uses (.build/models/synthetic-PRESET-TYPE-s42.gguf); repeated runs give a range."
                    + " Repeat the option per type. Without it: fixed figures measured on another AMD EPYC host (stories110M)."})
    Map<String, java.nio.file.Path> llamaCppFiles;

    /** Set by the parent for a forked child: the probes' {bandwidth, peak}; the child prints its rows only. */
    @Option(names = "--probed", hidden = true, split = ",", paramLabel = "BYTES_PER_S,FLOPS")
    double[] probed;

    /** Longest a forked type may take before it is killed (its workloads at the defaults take about a minute). */
    private static final long CHILD_TIMEOUT_MINUTES = 60;

    /** llama.cpp (CPU build, -march=native, 1 thread) on the same stories110M shape, measured once on another AMD EPYC host. */
    private static final Map<GgmlType, Map<String, LlamaCppFigures.Range>> REFERENCE_FIGURES = Map.of( // workload -> tokens/s
            GgmlType.F32, Map.of("decode1", new LlamaCppFigures.Range(71, 76), "prefill128", new LlamaCppFigures.Range(670, 670),
                    "decode8", new LlamaCppFigures.Range(231, 231), "decode16", new LlamaCppFigures.Range(339, 339)),
            GgmlType.Q8_0, Map.of("decode1", new LlamaCppFigures.Range(216, 225)),
            GgmlType.Q4_0, Map.of("decode1", new LlamaCppFigures.Range(318, 324)));

    /** The target ratio to llama.cpp per row, against whichever llama.cpp figure the row shows. */
    private static final Map<GgmlType, Map<String, Double>> TARGETS = Map.of(
            GgmlType.F32, Map.of("decode1", 1.0, "prefill128", 0.7, "decode8", 0.8, "decode16", 0.8),
            GgmlType.Q8_0, Map.of("decode1", 0.9),
            GgmlType.Q4_0, Map.of("decode1", 0.8));

    /** A usage error (before anything runs) unless {@code value >= min}. */
    private void atLeast(String option, int value, int min) {
        if (value < min) {
            throw new CommandLine.ParameterException(spec.commandLine(), option + " must be " + min + " or more, got " + value);
        }
    }

    @Override
    public Integer call() throws Exception {
        atLeast("--decode-tokens", decodeSteps, 1);
        atLeast("--prefill", prefill, 1);
        atLeast("--repeats", repeats, 1);
        atLeast("--probe-runs", probeRuns, 1);
        for (int b : batches) {
            atLeast("--batches", b, 1);
        }
        if (!(warmupSeconds >= 0)) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--warmup must be 0 or more seconds, got " + warmupSeconds);
        }
        List<ModelSpec> specs = new ArrayList<>(); // every type checked against the preset before the probes run
        Architecture a = Architecture.fromGgufName(arch.trim().toLowerCase(java.util.Locale.ROOT));
        if (a == null) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--arch: unknown architecture '" + arch + "' ("
                    + Architecture.supportedList() + ")");
        }
        for (String t : types) {
            ModelSpec m = ModelSpec.preset(preset).withType(ModelSpec.parseType(t));
            specs.add(a == Architecture.LLAMA ? m : m.withArch(a, a == Architecture.QWEN3 ? 128 : 0));
        }
        int context = specs.isEmpty() ? 0 : specs.get(0).contextLength();
        if (decodeAt < 0 || decodeAt > 0 && decodeAt + decodeSteps + 1 > context) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--decode-at " + decodeAt + " with --decode-tokens "
                    + decodeSteps + " does not fit the " + context + "-position context of " + preset
                    + " (at most " + Math.max(0, context - decodeSteps - 1) + ")");
        }
        Map<GgmlType, Map<String, LlamaCppFigures.Range>> measured = readLlamaCppFigures(specs);
        if (probed != null) { // a forked child: the parent printed the header and ran the probes
            if (probed.length != 2 || specs.size() != 1) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--probed takes BYTES_PER_S,FLOPS and one type");
            }
            measure(specs.get(0), probed[0], probed[1], measured);
            return 0;
        }
        boolean forkEach = fork && specs.size() > 1;
        int cpus = Runtime.getRuntime().availableProcessors(); // before pinning narrows it
        String pinned = pin();
        System.out.printf(Locale.ROOT, "engine-bench: %s, %d compute thread%s, %d repeats (median, min..max), %s, JDK %s, %d CPUs, %s, %d-bit vectors, %s%n",
                preset, threads, threads == 1 ? "" : "s", repeats, forkEach ? "each type in a JVM of its own" : "in one JVM", Runtime.version(),
                cpus, cpuName(), jdk.incubator.vector.FloatVector.SPECIES_PREFERRED.vectorBitSize(), pinned);
        double offHeap = Probes.bufferBandwidth(probeRuns);
        double heap = Probes.heapBandwidth(probeRuns);
        double bw = Math.max(offHeap, heap);
        double peak = Probes.peakFlops(probeRuns);
        System.out.printf(Locale.ROOT, "probes (1 thread, best of %d): streaming read %.1f GB/s over %d MiB (heap array %.1f, "
                        + "off-heap buffer %.1f); FMA peak %.1f GFLOP/s%n",
                probeRuns, bw / 1e9, Probes.STREAM_BYTES >> 20, heap / 1e9, offHeap / 1e9, peak / 1e9);
        System.out.println("ceiling = tokens/s if the step took only max((weight + KV cache bytes) / bandwidth, FLOPs / peak); bound = which one;");
        System.out.println("ratio = tokens/s / llama.cpp's (middle of its range); target ratio, '!' when missed; B/tok = bytes allocated per token");
        System.out.println(measured.isEmpty() ? "llama.cpp = fixed figures measured on another AMD EPYC host (CPU build, -march=native, 1 thread; stories110M)"
                : "llama.cpp = measured here, " + llamaCppFiles.entrySet().stream().map(e -> e.getKey() + " from " + e.getValue())
                        .collect(Collectors.joining(", ")) + (measured.size() < specs.size() ? "; other types: the fixed figures" : ""));
        System.out.printf(Locale.ROOT, "%-34s %9s %15s %9s %-4s %6s %11s %6s %6s %6s%n", "workload", "tokens/s", "spread",
                "ceiling", "bound", "%ceil", "llama.cpp", "ratio", "target", "B/tok");
        List<String> failed = new ArrayList<>();
        for (int i = 0; i < specs.size(); i++) {
            if (forkEach) {
                String problem = measureInChild(types.get(i), bw, peak);
                if (problem != null) {
                    System.err.println("engine-bench: " + problem);
                    failed.add(types.get(i));
                }
            } else {
                measure(specs.get(i), bw, peak, measured);
            }
        }
        if (!failed.isEmpty()) {
            System.err.println("engine-bench: no figures for " + String.join(", ", failed) + " (see above)");
            return 1;
        }
        return 0;
    }

    /**
     * The --llama-cpp files, read before anything is measured: weight type -> workload key -> tokens/s. A
     * type that is not measured, or a file that cannot be used, is a usage error naming it.
     */
    private Map<GgmlType, Map<String, LlamaCppFigures.Range>> readLlamaCppFigures(List<ModelSpec> specs) {
        Map<GgmlType, Map<String, LlamaCppFigures.Range>> measured = new java.util.EnumMap<>(GgmlType.class);
        if (llamaCppFiles == null) {
            return measured;
        }
        for (var e : llamaCppFiles.entrySet()) {
            GgmlType type;
            try {
                type = ModelSpec.parseType(e.getKey());
            } catch (IllegalArgumentException ex) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--llama-cpp " + e.getKey() + "=" + e.getValue()
                        + ": " + ex.getMessage());
            }
            if (specs.stream().noneMatch(s -> s.type() == type)) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--llama-cpp " + e.getKey() + "=" + e.getValue()
                        + ": " + e.getKey() + " is not one of the measured --types " + String.join(",", types));
            }
            try {
                measured.put(type, LlamaCppFigures.read(e.getValue(), threads));
            } catch (LlamaCppFigures.InvalidFiguresException ex) {
                throw new CommandLine.ParameterException(spec.commandLine(), "--llama-cpp " + e.getKey() + ": " + ex.getMessage());
            }
        }
        return measured;
    }

    /** Every workload of one weight type, in this JVM: one row each. */
    private void measure(ModelSpec spec, double bw, double peak, Map<GgmlType, Map<String, LlamaCppFigures.Range>> measured)
            throws Exception {
        GgmlType type = spec.type();
        // workload key -> llama.cpp's tokens/s: from --llama-cpp, else the fixed figures (measured on stories110M only)
        Map<String, LlamaCppFigures.Range> llamaCpp = measured.getOrDefault(type,
                preset.equalsIgnoreCase("stories110M") && spec.arch() == Architecture.LLAMA
                        ? REFERENCE_FIGURES.getOrDefault(type, Map.of()) : Map.of());
        String label = spec.arch() == Architecture.LLAMA ? type.toString() : spec.arch().ggufName() + " " + type;
        try (GgufFile file = GgufFile.open(io.tnsr.engine.synth.ModelCache.get(spec))) {
            LlamaConfig c = LlamaConfig.fromGguf(file);
            Work work = Work.of(file, c, kvCacheType);
            int maxSeqs = batches.stream().mapToInt(Integer::intValue).max().orElse(1);
            int maxTokens = Math.max(prefill, maxSeqs * 16);
            LayerRange range = new LayerRange(file, c, 0, c.layers(),
                    new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, (long) (maxSeqs + 1) * c.contextLength(),
                            kvCacheType),
                    maxTokens, maxSeqs, threads, bytes -> { });
            Runner r = new Runner(range, maxTokens, maxSeqs);
            r.warmupNanos = (long) (warmupSeconds * 1e9);
            int workloads = 2 + batches.size() + (decodeAt > 0 ? 1 : 0);
            // A bar on a terminal (--no-fork); a forked run's stdout is a pipe, where the parent draws the bar.
            try (TaskProgress progress = TaskProgress.start("engine-bench " + label, workloads, TaskProgress.ITEMS)) {
                progress.println(System.out, report("decode, 1 sequence, " + label, "decode1", type, llamaCpp,
                        r.decode(1, decodeSteps, repeats), work.ceiling(1, 1, 1, 16 + decodeSteps / 2, bw, peak), r.allocatedPerToken));
                progress.stepBy(1);
                progress.println(System.out, report("prefill " + prefill + " tokens, " + label, "prefill" + prefill, type, llamaCpp,
                        r.prefill(prefill, repeats), work.ceiling(prefill, 1, 1, prefill / 2, bw, peak), r.allocatedPerToken));
                progress.stepBy(1);
                for (int b : batches) {
                    int steps = Math.max(8, decodeSteps / 4);
                    progress.println(System.out, report("decode, " + b + " sequences batched, " + label, "decode" + b, type,
                            llamaCpp, r.decode(b, steps, repeats), work.ceiling(b, b, b, 16 + steps / 2, bw, peak),
                            r.allocatedPerToken));
                    progress.stepBy(1);
                }
                if (decodeAt > 0) {
                    progress.println(System.out, report("decode at position " + decodeAt + ", " + label, "decodeAt" + decodeAt,
                            type, llamaCpp, r.decodeAt(decodeAt, decodeSteps, repeats),
                            work.ceiling(1, 1, 1, decodeAt + decodeSteps / 2, bw, peak), r.allocatedPerToken));
                    progress.stepBy(1);
                }
            } finally {
                range.close();
            }
        }
    }

    /**
     * Pins this JVM (every thread; the JVMs it forks inherit the mask) to the CPUs {@code --cpu} names, before the
     * probes run; says where for the header. Where pinning is not possible (no taskset), runs unpinned and says so.
     */
    private String pin() throws IOException {
        String cpus;
        try {
            cpus = CpuPin.resolve(cpu, threads);
        } catch (IllegalArgumentException e) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpu: " + e.getMessage());
        }
        if (cpus == null) {
            return "not pinned";
        }
        int named = CpuPin.parseList(cpus).size();
        if (named < threads) {
            throw new CommandLine.ParameterException(spec.commandLine(), "--cpu " + cpu + " names " + named + " CPU"
                    + (named == 1 ? "" : "s") + " (" + cpus + ") for " + threads + " threads (--threads): name at least as many,"
                    + " or none");
        }
        if (!CpuPin.available()) {
            System.err.println("engine-bench: no /usr/bin/taskset here: running unpinned (expect more spread)");
            return "not pinned (no taskset)";
        }
        CpuPin.pin(ProcessHandle.current().pid(), cpus);
        return (cpus.contains(",") ? "pinned to CPUs " : "pinned to CPU ") + cpus;
    }

    /**
     * Every workload of one weight type in a fresh JVM (this one's options and class path): its rows copied to
     * System.out and its messages to System.err as they come (JDK's incubator-module warning dropped, as the
     * launcher does). Waits at most {@link #CHILD_TIMEOUT_MINUTES}. Returns null, or what went wrong.
     */
    private String measureInChild(String type, double bw, double peak) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(childCommand(type, bw, peak)).start();
        int workloads = 2 + batches.size() + (decodeAt > 0 ? 1 : 0); // one row each
        try (TaskProgress progress = TaskProgress.start("engine-bench " + type, workloads, TaskProgress.ITEMS)) {
            Thread out = pump(p.getInputStream(), System.out, progress, "engine-bench " + type + " stdout");
            Thread err = pump(p.getErrorStream(), System.err, progress, "engine-bench " + type + " stderr");
            return awaitChild(p, type, out, err);
        }
    }

    private String awaitChild(Process p, String type, Thread out, Thread err) throws InterruptedException {
        try {
            if (!p.waitFor(CHILD_TIMEOUT_MINUTES, TimeUnit.MINUTES)) {
                return "the " + type + " run did not finish within " + CHILD_TIMEOUT_MINUTES + " minutes: killed";
            }
            out.join(10_000); // the pipes close with the process: the last lines are on their way
            err.join(10_000);
            return p.exitValue() == 0 ? null : "the " + type + " run (a JVM of its own) exited with status " + p.exitValue();
        } finally {
            p.destroyForcibly();
        }
    }

    /**
     * A daemon thread copying {@code in}'s lines to {@code to} until the stream ends, above {@code progress}'s bar; a
     * row on stdout is one workload done.
     */
    private static Thread pump(java.io.InputStream in, java.io.PrintStream to, TaskProgress progress, String name) {
        Thread t = new Thread(() -> {
            try (var r = new java.io.BufferedReader(new java.io.InputStreamReader(in, java.nio.charset.StandardCharsets.UTF_8))) {
                for (String line; (line = r.readLine()) != null; ) {
                    if (!line.startsWith("WARNING: Using incubator modules")) {
                        progress.println(to, line);
                        if (to == System.out) {
                            progress.stepBy(1);
                        }
                    }
                }
            } catch (IOException e) {
                to.println("engine-bench: lost the output of " + name + ": " + e.getMessage());
            }
        }, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** java, this JVM's options (heap, flags, modules), its class path, and this command's options for one type. */
    List<String> childCommand(String type, double bw, double peak) {
        List<String> cmd = ChildJvm.options(a -> false);
        if (System.getProperty("tnsr.home") != null) { // where the synthetic models are (set at run time by tests)
            cmd.add("-Dtnsr.home=" + System.getProperty("tnsr.home"));
        }
        cmd.addAll(ChildJvm.classPath());
        cmd.add(EngineBench.class.getName());
        cmd.addAll(List.of("--preset", preset, "--arch", arch, "--types", type,
                "--decode-tokens", String.valueOf(decodeSteps), "--prefill", String.valueOf(prefill),
                "--batches", batches.stream().map(String::valueOf).collect(Collectors.joining(",")),
                "--decode-at", String.valueOf(decodeAt), "--repeats", String.valueOf(repeats),
                "--warmup", String.valueOf(warmupSeconds), "--threads", String.valueOf(threads),
                "--kv-cache-type", kvCacheType.key(),
                "--probed", bw + "," + peak));
        if (llamaCppFiles != null) { // only this type's file: the child reads it again (the parent checked it)
            GgmlType t = ModelSpec.parseType(type);
            llamaCppFiles.forEach((k, file) -> {
                if (ModelSpec.parseType(k) == t) {
                    cmd.addAll(List.of("--llama-cpp", k + "=" + file.toAbsolutePath()));
                }
            });
        }
        return cmd;
    }

    /**
     * One row: {@code key} names the workload as {@link LlamaCppFigures} does ("decode1", "prefill128", "decode8",
     * "decodeAt960") in {@code llamaCpp}; the target ratio is the fixed one for that workload and type, if any.
     */
    private static String report(String workload, String key, GgmlType type, Map<String, LlamaCppFigures.Range> llamaCpp,
                               double[] rates, double[] ceiling, double allocPerToken) {
        double[] s = rates.clone();
        Arrays.sort(s);
        double median = s[s.length / 2];
        LlamaCppFigures.Range ref = llamaCpp.get(key);
        Double targetRatio = ref == null ? null : TARGETS.getOrDefault(type, Map.of()).get(key);
        String refText = ref == null ? "-" : ref.toString();
        String ratio = ref == null ? "-" : String.format(Locale.ROOT, "%.2fx", median / ref.middle());
        String target = targetRatio == null ? "-" : String.format(Locale.ROOT, "%.1fx%s", targetRatio,
                median >= targetRatio * ref.middle() ? "" : "!");
        return String.format(Locale.ROOT, "%-34s %9.1f %15s %9.1f %-4s %5.0f%% %11s %6s %6s %6.0f", workload, median,
                String.format(Locale.ROOT, "%.1f..%.1f", s[0], s[s.length - 1]), ceiling[0],
                ceiling[1] == 0 ? "mem" : "flop", 100 * median / ceiling[0], refText, ratio, target, allocPerToken);
    }

    private static String cpuName() {
        try {
            return java.nio.file.Files.readAllLines(java.nio.file.Paths.get("/proc/cpuinfo")).stream()
                    .filter(l -> l.startsWith("model name")).findFirst().map(l -> l.substring(l.indexOf(':') + 1).trim())
                    .orElse("unknown CPU");
        } catch (java.io.IOException | RuntimeException e) {
            return "unknown CPU";
        }
    }

    /**
     * What one step of the model costs: the weight bytes it streams (every matrix but the embedding, which is
     * read one row per token; each in its file type's own bytes, e.g. 144 per 256 weights for Q4_K, 210 for
     * Q6_K), the KV cache bytes per cached position (keys and values, F32, every layer), and the FLOPs per token
     * (2 per weight of the layers' matrices, 2 per classifier weight for each token that wants logits, and
     * attention's 4 x position x dim per layer).
     */
    record Work(long weightBytes, long kvBytesPerPosition, long layerFlops, long classifierFlops,
                long attentionFlopsPerPosition) {
        static Work of(GgufFile file, LlamaConfig c, KvCacheType kv) {
            long bytes = 0;
            long layer = 0;
            for (var t : file.tensors().values()) {
                boolean matrix = t.dims().length == 2 && !t.name().equals("token_embd.weight");
                if (matrix && t.name().startsWith("blk.")) {
                    layer += 2 * t.elementCount();
                }
                if (matrix) {
                    bytes += t.byteSize();
                }
            }
            long classifier = 2L * c.vocabSize() * c.dim();
            if (!file.hasTensor("output.weight")) {
                bytes += file.tensor("token_embd.weight").byteSize();
            }
            return new Work(bytes, 2L * c.layers() * c.kvDim() * kv.bytes(), layer, classifier,
                    4L * c.layers() * c.heads() * c.headDim());
        }

        /**
         * {tokens/s, 0 when bound by memory or 1 by arithmetic} of a step carrying {@code tokens} tokens, of which
         * {@code logitRows} want logits, at average position {@code avgPos}; the memory side also reads the cached
         * keys and values of {@code sequences} sequences at that position.
         */
        double[] ceiling(int tokens, int logitRows, int sequences, int avgPos, double bandwidth, double peak) {
            double memory = (weightBytes + (double) sequences * avgPos * kvBytesPerPosition) / bandwidth;
            double flops = ((double) tokens * (layerFlops + attentionFlopsPerPosition * avgPos)
                    + (double) logitRows * classifierFlops) / peak;
            return new double[] {tokens / Math.max(memory, flops), flops > memory ? 1 : 0};
        }
    }

    /** Drives a whole-model range with fixed token ids; no sampling, no I/O. */
    static final class Runner {
        private final LayerRange range;
        private final Batch batch;
        private final int[] tokens;
        private final float[] x;
        private final float[] logits;
        private int nextSeq;
        /** Bytes this thread allocated per token in the last timed repeat (0 once the kernels are compiled). */
        double allocatedPerToken;
        /** Each workload runs untimed for this long first, so that C2 has compiled its kernels. */
        long warmupNanos;

        private static long allocated() {
            return ((com.sun.management.ThreadMXBean) java.lang.management.ManagementFactory.getThreadMXBean())
                    .getCurrentThreadAllocatedBytes();
        }

        /** What one {@link #allocated()} call allocates itself (its JMX plumbing), to leave out of the figure. */
        private static final long PROBE_ALLOCATION = probeAllocation();

        private static long probeAllocation() {
            long min = Long.MAX_VALUE;
            for (int i = 0; i < 5; i++) {
                long a = allocated();
                min = Math.min(min, allocated() - a);
            }
            return min;
        }

        Runner(LayerRange range, int maxTokens, int maxSeqs) {
            this.range = range;
            this.batch = new Batch(maxSeqs, maxTokens);
            this.tokens = new int[maxTokens];
            this.x = new float[maxTokens * range.config().dim()];
            this.logits = new float[maxSeqs * range.config().vocabSize()];
            for (int i = 0; i < tokens.length; i++) {
                tokens[i] = 3 + (i * 7919) % (range.config().vocabSize() - 3);
            }
        }

        private void call() {
            range.prepare(batch, tokens, 0);
            range.embed(batch, tokens, 0, x);
            range.forward(batch, x);
            range.logits(batch, x, logits);
        }

        /**
         * Tokens/s of {@code steps} decode calls of {@code b} sequences (each after a 16-token prompt), per repeat,
         * after warming up for {@link #warmupNanos} on the same steps: with a warm-up that stopped short of the timed
         * positions (their first KV pages and page crossings came in the timed run), 11-17 B per token showed in the
         * allocation column in one to three rows of a run; none in 12 rows of two runs since.
         */
        double[] decode(int b, int steps, int repeats) {
            return measured(repeats, () -> decodeOnce(b, steps));
        }

        /** {@code run} untimed for {@link #warmupNanos}, then the rates of {@code repeats} timed runs of it. */
        private double[] measured(int repeats, DoubleSupplier run) {
            long until = System.nanoTime() + warmupNanos;
            do {
                run.getAsDouble();
            } while (System.nanoTime() < until);
            double[] rates = new double[repeats];
            for (int rep = 0; rep < repeats; rep++) {
                rates[rep] = run.getAsDouble();
            }
            return rates;
        }

        private double decodeOnce(int b, int steps) {
            int[] ids = new int[b];
            batch.clear();
            for (int s = 0; s < b; s++) {
                ids[s] = nextSeq++;
                batch.add(ids[s], 0, 16, true);
            }
            call();
            long a0 = allocated();
            long t0 = System.nanoTime();
            for (int step = 0; step < steps; step++) {
                batch.clear();
                for (int s = 0; s < b; s++) {
                    batch.add(ids[s], 16 + step, 1, true);
                }
                call();
            }
            long t = System.nanoTime() - t0;
            allocatedPerToken = (double) (allocated() - a0 - PROBE_ALLOCATION) / (b * steps);
            for (int id : ids) {
                range.endSequence(id);
            }
            return (double) b * steps * 1e9 / t;
        }

        /**
         * Tokens/s of {@code steps} decode calls of one sequence from position {@code from} on (after a prefill to
         * it, in blocks of the runner's capacity), per repeat, after warming up like {@link #decode}.
         */
        double[] decodeAt(int from, int steps, int repeats) {
            return measured(repeats, () -> decodeAtOnce(from, steps));
        }

        private double decodeAtOnce(int from, int steps) {
            int id = nextSeq++;
            for (int pos = 0; pos < from; ) {
                int n = Math.min(tokens.length, from - pos);
                batch.clear().add(id, pos, n, true);
                call();
                pos += n;
            }
            long a0 = allocated();
            long t0 = System.nanoTime();
            for (int step = 0; step < steps; step++) {
                batch.clear().add(id, from + step, 1, true);
                call();
            }
            long t = System.nanoTime() - t0;
            allocatedPerToken = (double) (allocated() - a0 - PROBE_ALLOCATION) / steps;
            range.endSequence(id);
            return steps * 1e9 / t;
        }

        /** Tokens/s of prefilling a {@code len}-token prompt as one block, per repeat, after warming up. */
        double[] prefill(int len, int repeats) {
            return measured(repeats, () -> prefillOnce(len));
        }

        private double prefillOnce(int len) {
            int id = nextSeq++;
            batch.clear().add(id, 0, len, true);
            long a0 = allocated();
            long t0 = System.nanoTime();
            call();
            long t = System.nanoTime() - t0;
            allocatedPerToken = (double) (allocated() - a0 - PROBE_ALLOCATION) / len;
            range.endSequence(id);
            return len * 1e9 / t;
        }
    }

    public static void main(String[] args) {
        System.exit(io.tnsr.engine.cli.Cli.run(new EngineBench(), args)); // a bad type or preset: one line, status 2
    }
}
