package io.tnsr.engine.cli;

import io.tnsr.engine.coordinator.RecoveryOptions;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.SpinPolicy;
import io.tnsr.engine.pipeline.ThreadBudget;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.util.ConsoleLog;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/**
 * The options of a command that starts its own pipeline of stage processes ({@code run-pipeline}, {@code serve}):
 * the model, the stage layout, spinning, and the bounds on starting and waiting.
 */
final class PipelineOptions {
    @Option(names = "--stages", paramLabel = "N", description = "Stage processes (default: 1, or the --config file's).")
    Integer stages;

    @Option(names = "--config", paramLabel = "FILE", description = "Pipeline configuration (JSON; see config/README.md).")
    Path config;

    @Option(names = "--model", paramLabel = "FILE.gguf", description = "The model (default: a synthetic stories15M-shape model, generated once).")
    Path model;

    @Option(names = "--threads-per-stage", paramLabel = "N|auto", description = {"Threads sharing the rows of each stage's"
            + " matmuls, 1 to 256, or auto: this machine's CPUs shared among the stages it starts, at least one each"
            + " (default: auto, or the --config file's threads_per_stage). Stages that take turns (--micro-batches 1)"
            + " may each take every CPU: F32 weights gain from it, quantized ones of a small model lose"
            + " (docs/pipelining.md).",
            "Stages computing at once x N should not exceed the cores: e.g. 16 sequences on 2 cores run best as"
                    + " --stages 1 (2 threads, auto)."})
    String threadsPerStage;

    @Option(names = "--kv-cache-type", paramLabel = "TYPE", description = {"How each stage's KV cache stores keys and"
            + " values: f32 (exact; default, or the --config file's kv_cache_type) or f16 (half the memory per position,"
            + " so twice the positions in the same capacity, and half the bytes attention reads; rounded once when"
            + " stored, as llama.cpp's default cache is)."})
    String kvCacheType;

    @Option(names = "--spin", description = {"Busy-spin the compute threads, each pinned to its own CPU. When the machine"
            + " cannot give every stage a core (plus one for the rest), stages back off (spin, yield, park) instead."})
    boolean spin;

    @Option(names = {"-v", "--verbose"}, description = {"Show every stage's start-up and session lines on stderr"
            + " (run-pipeline: and, at the end, the full summary: compute share per stage and the latency table)."})
    boolean verbose;

    @Option(names = "--startup-timeout", paramLabel = "SECONDS", defaultValue = "90", description = "Bound on starting the stages (default: ${DEFAULT-VALUE}).")
    int startupTimeout;

    @Option(names = "--stall-timeout", paramLabel = "SECONDS", defaultValue = "120", description = "Bound on waiting for any answer from the pipeline (default: ${DEFAULT-VALUE}).")
    int stallTimeout;

    @Option(names = "--connect-timeout", paramLabel = "SECONDS", defaultValue = "20", description = "Bound on reaching a stage (default: ${DEFAULT-VALUE}).")
    int connectTimeout;

    @Option(names = "--key-file", paramLabel = "FILE", description = {"The pipeline's shared key: every link's handshake proves"
            + " it (HMAC). Needed when stages use a non-loopback address; external stages need the same file."})
    Path keyFile;

    @Option(names = "--liveness", paramLabel = "SECONDS", defaultValue = "3", description = {"Report a stage or link that sent nothing,"
            + " not even a heartbeat, for this long (default: ${DEFAULT-VALUE})."})
    double liveness;

    @Option(names = "--insecure", description = {"Run without a key where one is needed: stages on a non-loopback address without"
            + " --key-file (and, for serve, a non-loopback --host without --api-key-file). Said loudly."})
    boolean insecure;

    @Option(names = "--sample-in", paramLabel = "WHERE", defaultValue = "last-stage", description = {"Where tokens are chosen:"
            + " last-stage (it sends back token ids) or coordinator (it sends back each sequence's logits, 4 bytes per"
            + " vocabulary entry per token). The same tokens either way (default: ${DEFAULT-VALUE})."})
    String sampleIn;

    /** --sample-in: whether the last stage chooses the tokens. */
    boolean sampleInLastStage() {
        return switch (sampleIn) {
            case "last-stage" -> true;
            case "coordinator" -> false;
            default -> throw new IllegalArgumentException("--sample-in must be last-stage or coordinator, got '" + sampleIn + "'");
        };
    }

    @Option(names = "--recovery-timeout", paramLabel = "SECONDS", defaultValue = "60", description = {"When a stage is lost, replace it"
            + " (restart one this tool started, or wait for an external one) and replay the running sequences,"
            + " giving up after this long; 0: a lost stage ends the run (default: ${DEFAULT-VALUE})."})
    double recoveryTimeout;

    /** How a lost stage is replaced (--recovery-timeout). */
    RecoveryOptions recovery() {
        if (!(recoveryTimeout >= 0 && recoveryTimeout <= 3600)) {
            throw new IllegalArgumentException("--recovery-timeout must be 0..3600 seconds, got " + recoveryTimeout);
        }
        return recoveryTimeout == 0 ? RecoveryOptions.off() : new RecoveryOptions(Math.round(recoveryTimeout * 1000),
                RecoveryOptions.DEFAULT_RESTART_ATTEMPTS, RecoveryOptions.DEFAULT_PROBE_MILLIS);
    }

    /**
     * The coordinator's link options; refuses, without a key and unless --insecure, to start stages on a non-loopback
     * address or to connect to external stages at one (their alternatives included).
     */
    LinkOptions link(PipelineConfig pc, String tool) {
        if (!(liveness >= 0.2 && liveness <= 3600)) {
            throw new IllegalArgumentException("--liveness must be 0.2..3600 seconds, got " + liveness);
        }
        LinkKey key = LinkKey.load(keyFile);
        boolean spawned = pc.stages().stream().anyMatch(s -> s.external() == null);
        if (spawned) {
            key.requireFor(pc.host(), insecure, tool + "'s stages", "--key-file");
        }
        List<String> remote = new ArrayList<>();
        for (int i = 0; i < pc.stages().size(); i++) {
            for (String address : pc.stages().get(i).addresses()) {
                if (!LinkKey.isLoopbackAddress(address)) {
                    remote.add("stage" + i + " at " + address);
                }
            }
        }
        key.requireForLinks(remote, insecure, tool, "--key-file");
        return new LinkOptions(key, Math.round(liveness * 1000), LinkOptions.DEFAULT_HANDSHAKE_MILLIS, connectMillis(), null);
    }

    /** --model, or the synthetic stories15M-shape model (generated once), which {@code tool} then names on stderr. */
    Path modelPath(String tool) throws IOException {
        if (model != null) {
            return model;
        }
        ModelSpec spec = ModelSpec.stories15M();
        Path p = ModelCache.get(spec);
        System.err.println(tool + ": no --model given: a synthetic model with random weights (" + spec.describe()
                + "), so the text is gibberish; give --model FILE.gguf (llama, qwen2 or qwen3) for real text");
        return p;
    }

    /** Applies --verbose to this process's stderr lines and to the stages it starts ({@link ConsoleLog}). */
    void applyVerbosity() {
        ConsoleLog.setVerbose(verbose);
    }

    /** The stages: the --config file's, or --stages N splitting the model's layers evenly. */
    PipelineConfig pipeline(LlamaConfig model) throws IOException {
        PipelineConfig pc = PipelineConfig.resolve(config, stages, model.layers());
        if (threadsPerStage != null) {
            pc = pc.withThreadsPerStage(ThreadCount.parse("--threads-per-stage", threadsPerStage));
        }
        if (kvCacheType != null) {
            pc = pc.withKvCacheType(KvCacheType.parse(kvCacheType, "--kv-cache-type"));
        }
        return pc;
    }

    /**
     * How the stages wait (--spin on this machine's CPUs); a warning goes to stderr under {@code tool}'s name, and so
     * does advice when the stages' threads do not fit the cores ({@link ThreadBudget}).
     */
    SpinPolicy spinPolicy(PipelineConfig pc, String tool) {
        return spinPolicy(pc, tool, pc.localStages());
    }

    /** {@link #spinPolicy(PipelineConfig, String)} for a coordinator that keeps {@code microBatches} in flight. */
    SpinPolicy spinPolicy(PipelineConfig pc, String tool, int microBatches) {
        int cores = Runtime.getRuntime().availableProcessors();
        SpinPolicy policy = SpinPolicy.decide(pc, spin, cores);
        if (policy.warning() != null) {
            System.err.println(tool + ": --" + policy.warning());
        }
        // spinning stages hold their cores between micro-batches too
        String advice = ThreadBudget.advice(pc, cores, policy.waits().contains(WaitMode.SPIN) ? pc.localStages() : microBatches);
        if (advice != null) {
            System.err.println(tool + ": " + advice);
        }
        return policy;
    }

    long startupMillis() {
        return startupTimeout * 1000L;
    }

    long stallMillis() {
        return stallTimeout * 1000L;
    }

    long connectMillis() {
        return connectTimeout * 1000L;
    }
}
