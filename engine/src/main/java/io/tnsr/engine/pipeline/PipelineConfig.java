package io.tnsr.engine.pipeline;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.util.Jackson;
import io.tnsr.wire.FrameHeader;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * How a model is split into stages and how each stage is sized, read once at start-up (from a JSON file given
 * to {@code --config}, or from defaults and the command line). See {@code config/README.md} for the file format.
 *
 * @param host                 address every stage listens on and connects to
 * @param stages               the stages in pipeline order, their layer ranges contiguous and covering the model
 * @param ringSize             slots of each stage's Disruptor ring (a power of two)
 * @param maxFrameBytes        largest frame a stage accepts (protocol limit)
 * @param maxTokensPerFrame    most token rows one frame (micro-batch step) carries; sizes the ring slots
 * @param maxSequencesPerFrame most sequences one frame carries; sizes the logits a last stage returns
 * @param waitMode             how compute threads wait for frames
 * @param kvCacheTokens        KV cache capacity of each stage, in positions over all its live sequences (0 = auto)
 * @param socketBufferBytes    socket buffer size between stages (0 = the OS's default)
 * @param stallThresholdMicros a frame that reaches an idle compute thread but is picked up later than this is
 *                             counted as a stall ({@code stage<i>-stalls}); key {@code stall_threshold_us}
 * @param threadsPerStage      threads sharing the rows of each stage's matmuls (key {@code threads_per_stage}; 1 = the
 *                             compute thread alone; 0 = auto, the default of a config file and of the command line:
 *                             this machine's CPUs shared among the stages it starts, {@link #threadsPerStage(int)});
 *                             stages times threads should not exceed the cores
 * @param warmupMillis         bound on each stage's JIT warm-up before it serves (key {@code warmup_ms}; 0 = none): it
 *                             runs its layers on scratch sequences until the kernels are compiled
 *                             ({@link io.tnsr.engine.forward.RangeWarmup}), so that the first requests run at full speed
 * @param kvCacheType          how each stage's KV cache stores keys and values (key {@code kv_cache_type}: f32, exact,
 *                             the default; f16, half the memory per position, rounded once when stored)
 */
public record PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                             int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens,
                             int socketBufferBytes, long stallThresholdMicros, int threadsPerStage, long warmupMillis,
                             KvCacheType kvCacheType) {

    public static final int DEFAULT_RING_SIZE = 16;
    public static final int DEFAULT_MAX_FRAME_BYTES = 64 << 20;
    public static final int DEFAULT_MAX_TOKENS_PER_FRAME = 256;
    public static final int DEFAULT_MAX_SEQUENCES_PER_FRAME = 32;
    public static final long DEFAULT_STALL_THRESHOLD_MICROS = 1000;

    /** The values each numeric key may take; every error about one names the key, the allowed range and the value. */
    static final Bound RING_SIZE = new Bound("ring_size", 2, 1 << 16, true, null);
    static final Bound MAX_FRAME_BYTES = new Bound("max_frame_bytes", FrameHeader.MIN_FRAME_SIZE,
            FrameHeader.MAX_FRAME_SIZE_LIMIT, false, null);
    static final Bound MAX_TOKENS_PER_FRAME = new Bound("max_tokens_per_frame", 1, 1 << 20, false, null);
    static final Bound MAX_SEQUENCES_PER_FRAME = new Bound("max_sequences_per_frame", 1, FrameHeader.MAX_SEQUENCE_COUNT,
            false, null);
    static final Bound KV_CACHE_TOKENS = new Bound("kv_cache_tokens", 0, 1L << 40, false, "auto");
    static final Bound SOCKET_BUFFER_BYTES = new Bound("socket_buffer_bytes", 0, Integer.MAX_VALUE, false, "the OS default");
    static final Bound STALL_THRESHOLD_US = new Bound("stall_threshold_us", 1, 3_600_000_000L, false, null);
    static final Bound THREADS_PER_STAGE = new Bound("threads_per_stage", 0, 256, false, "auto");
    static final Bound WARMUP_MS = new Bound("warmup_ms", 0, 600_000, false, "no warm-up");

    public PipelineConfig {
        stages = List.copyOf(stages);
        if (stages.isEmpty()) {
            throw new IllegalArgumentException("a pipeline needs at least one stage");
        }
        RING_SIZE.check(ringSize);
        MAX_FRAME_BYTES.check(maxFrameBytes);
        MAX_TOKENS_PER_FRAME.check(maxTokensPerFrame);
        MAX_SEQUENCES_PER_FRAME.check(maxSequencesPerFrame);
        KV_CACHE_TOKENS.check(kvCacheTokens);
        SOCKET_BUFFER_BYTES.check(socketBufferBytes);
        STALL_THRESHOLD_US.check(stallThresholdMicros);
        THREADS_PER_STAGE.check(threadsPerStage);
        WARMUP_MS.check(warmupMillis);
        Objects.requireNonNull(kvCacheType, "kvCacheType");
        for (int i = 1; i < stages.size(); i++) {
            if (stages.get(i).layerFrom() != stages.get(i - 1).layerTo()) {
                throw new IllegalArgumentException("stage " + i + " starts at layer " + stages.get(i).layerFrom()
                        + " but stage " + (i - 1) + " ends at layer " + stages.get(i - 1).layerTo()
                        + ": stages must hold contiguous layer ranges");
            }
        }
        if (stages.get(0).layerFrom() != 0) {
            throw new IllegalArgumentException("the first stage must start at layer 0, not " + stages.get(0).layerFrom());
        }
    }

    /**
     * Checks one stage's sizes as {@code tools/stage} takes them on its command line, with the same ranges as the
     * config keys; each error names the option, {@code --} and the key with dashes ({@code --ring-size}).
     */
    public static void checkStageSizes(int ringSize, int maxFrameBytes, int maxTokensPerFrame, int maxSequencesPerFrame,
                                       long kvCacheTokens, int socketBufferBytes, long stallThresholdMicros) {
        long[] values = {ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, kvCacheTokens, socketBufferBytes,
                stallThresholdMicros};
        Bound[] bounds = {RING_SIZE, MAX_FRAME_BYTES, MAX_TOKENS_PER_FRAME, MAX_SEQUENCES_PER_FRAME, KV_CACHE_TOKENS,
                SOCKET_BUFFER_BYTES, STALL_THRESHOLD_US};
        for (int i = 0; i < bounds.length; i++) {
            Bound b = bounds[i];
            new Bound("--" + b.key().replace('_', '-'), b.min(), b.max(), b.powerOfTwo(), b.zeroMeans()).check(values[i]);
        }
    }

    /** With a KV cache of floats. */
    public PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                          int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens, int socketBufferBytes,
                          long stallThresholdMicros, int threadsPerStage, long warmupMillis) {
        this(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros, threadsPerStage, warmupMillis, KvCacheType.F32);
    }

    /** Without a warm-up. */
    public PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                          int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens, int socketBufferBytes,
                          long stallThresholdMicros, int threadsPerStage) {
        this(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros, threadsPerStage, 0);
    }

    /** With one thread per stage and no warm-up. */
    public PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                          int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens, int socketBufferBytes,
                          long stallThresholdMicros) {
        this(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros, 1);
    }

    /** With the default stall threshold (1000 us) and one thread per stage. */
    public PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                          int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens, int socketBufferBytes) {
        this(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, DEFAULT_STALL_THRESHOLD_MICROS);
    }

    /** Checks the split against the model's layer count. */
    public void checkCovers(int modelLayers) {
        int end = stages.get(stages.size() - 1).layerTo();
        if (end != modelLayers) {
            throw new IllegalArgumentException("the stages cover layers [0, " + end + ") but the model has "
                    + modelLayers + " layers");
        }
    }

    /**
     * Checks that every frame this pipeline will pass for {@code model} fits {@code max_frame_bytes}, which each stage
     * and the coordinator enforce on what they read: the last stage's LOGITS frame (a row of the vocabulary's size
     * for each of {@code max_sequences_per_frame} sequences), and the ACTIVATIONS frames between stages (or, with one
     * stage, the TOKENS frame into it) of {@code max_tokens_per_frame} rows; and that a stage's ring slot fits a buffer.
     * Called once the model is known and before any stage starts, so that a limit too small is one clear error rather
     * than a stage failing on its first frame.
     */
    public void checkFrames(LlamaConfig model) {
        checkFrame("the last stage's logits frame", FrameSizes.logitsFrameBytes(maxSequencesPerFrame, model.vocabSize()),
                "max_sequences_per_frame " + maxSequencesPerFrame + " x vocabulary " + model.vocabSize(), "max_sequences_per_frame");
        if (stages.size() > 1) {
            checkFrame("an activation frame between stages",
                    FrameSizes.activationFrameBytes(maxTokensPerFrame, model.dim(), maxSequencesPerFrame),
                    "max_tokens_per_frame " + maxTokensPerFrame + " x hidden size " + model.dim(), "max_tokens_per_frame");
        }
        checkFrame("a tokens frame into the first stage", FrameSizes.tokensFrameBytes(maxTokensPerFrame, maxSequencesPerFrame),
                "max_tokens_per_frame " + maxTokensPerFrame, "max_tokens_per_frame");
        long slot = FrameSizes.ringSlotBytes(maxTokensPerFrame, model.dim());
        if (slot > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a stage's ring slot would take " + slot + " bytes (max_tokens_per_frame "
                    + maxTokensPerFrame + " x hidden size " + model.dim() + " x 4 bytes and more), over the 2 GiB a buffer"
                    + " holds: lower max_tokens_per_frame");
        }
    }

    private void checkFrame(String frame, long bytes, String payload, String lower) {
        if (bytes > maxFrameBytes) {
            throw new IllegalArgumentException("max_frame_bytes is " + maxFrameBytes + " but " + frame + " needs " + bytes
                    + " bytes (" + payload + " x 4 bytes, plus header, sequence table and trace): raise max_frame_bytes or lower "
                    + lower);
        }
    }

    /** Layers split as evenly as possible, the first stages taking one more (5 over 4: 2, 1, 1, 1). */
    public static List<StageSpec> evenSplit(int layers, int stageCount) {
        if (stageCount < 1 || stageCount > layers) {
            throw new IllegalArgumentException("cannot split " + layers + " layers over " + stageCount
                    + " stages (1.." + layers + " stages)");
        }
        List<StageSpec> s = new ArrayList<>();
        int from = 0;
        for (int i = 0; i < stageCount; i++) {
            int n = layers / stageCount + (i < layers % stageCount ? 1 : 0);
            s.add(new StageSpec(from, from + n, 0, List.of(), null));
            from += n;
        }
        return s;
    }

    /**
     * Layers split so that the busiest stage has as little work as possible, counting the classifier the
     * last stage also runs as {@code lastStageExtra} layers' worth (its weights over one layer's). With 2 stages
     * of the stories110M shape (classifier about 3.5 layers): 8 + 4 instead of 6 + 6.
     */
    public static List<StageSpec> balancedSplit(int layers, int stageCount, double lastStageExtra) {
        evenSplit(layers, stageCount); // same argument checks
        // best[i][k]: the smallest possible maximum stage cost when the first i layers form k stages
        double[][] best = new double[layers + 1][stageCount + 1];
        int[][] cut = new int[layers + 1][stageCount + 1];
        for (double[] row : best) {
            java.util.Arrays.fill(row, Double.MAX_VALUE);
        }
        best[0][0] = 0;
        for (int k = 1; k <= stageCount; k++) {
            for (int i = k; i <= layers; i++) {
                for (int j = i - 1; j >= k - 1; j--) {
                    double cost = (i - j) + (k == stageCount && i == layers ? lastStageExtra : 0);
                    double worst = Math.max(best[j][k - 1], cost);
                    // ties: prefer the cut that gives earlier stages more layers, as evenSplit does
                    if (worst < best[i][k] - 1e-9) {
                        best[i][k] = worst;
                        cut[i][k] = j;
                    }
                }
            }
        }
        int[] ends = new int[stageCount];
        for (int k = stageCount, i = layers; k >= 1; k--) {
            ends[k - 1] = i;
            i = cut[i][k];
        }
        List<StageSpec> s = new ArrayList<>();
        int from = 0;
        for (int end : ends) {
            s.add(new StageSpec(from, end, 0, List.of(), null));
            from = end;
        }
        return s;
    }

    /** The classifier's weight bytes over one layer's: the last stage's extra work, for {@link #balancedSplit}. */
    public static double classifierWeightInLayers(io.tnsr.engine.gguf.GgufFile f) {
        String name = f.hasTensor("output.weight") ? "output.weight" : "token_embd.weight";
        long layer = f.tensors().values().stream().filter(t -> t.name().startsWith("blk.0."))
                .mapToLong(io.tnsr.engine.gguf.GgufTensorInfo::byteSize).sum();
        return layer == 0 ? 0 : (double) f.tensor(name).byteSize() / layer;
    }

    /**
     * The configuration a command's {@code --config FILE} and {@code --stages N} ask for: the file's (N must agree
     * with it, if given), else N stages split evenly (1 if N is null).
     */
    public static PipelineConfig resolve(Path config, Integer stages, int layers) throws IOException {
        if (config == null) {
            return defaults(layers, stages == null ? 1 : stages, WaitMode.BLOCK).withThreadsPerStage(0);
        }
        if (!Files.isRegularFile(config)) {
            throw new IllegalArgumentException("--config " + config + ": no such file");
        }
        PipelineConfig pc = load(config, layers);
        if (stages != null && stages != pc.stages().size()) {
            throw new IllegalArgumentException("--stages " + stages + " disagrees with " + config + ", which has "
                    + pc.stages().size() + " stages");
        }
        return pc;
    }

    public static PipelineConfig defaults(int layers, int stageCount, WaitMode wait) {
        return new PipelineConfig("127.0.0.1", evenSplit(layers, stageCount), DEFAULT_RING_SIZE, DEFAULT_MAX_FRAME_BYTES,
                DEFAULT_MAX_TOKENS_PER_FRAME, DEFAULT_MAX_SEQUENCES_PER_FRAME, wait, 0, 0);
    }

    public PipelineConfig withWaitMode(WaitMode w) {
        return new PipelineConfig(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, w, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros, threadsPerStage, warmupMillis, kvCacheType);
    }

    public PipelineConfig withStages(List<StageSpec> s) {
        return new PipelineConfig(host, s, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros, threadsPerStage, warmupMillis, kvCacheType);
    }

    /**
     * Threads sharing each matmul in the stages this machine starts, given its {@code cpus}: {@link #threadsPerStage}
     * when set, else (0, auto) the CPUs shared evenly among those stages, at least one each. On a 2-vCPU host 16
     * sequences ran 1.6x faster through one stage of two threads than of one, and one sequence 1.2-1.5x
     * (docs/pipelining.md); stages beyond the CPUs get one thread each and share the cores by pipelining.
     */
    public int threadsPerStage(int cpus) {
        if (threadsPerStage > 0) {
            return threadsPerStage;
        }
        return (int) Math.min(THREADS_PER_STAGE.max(), Math.max(1, cpus / Math.max(1, localStages())));
    }

    /** The stages this machine starts: all but the external ones. */
    public int localStages() {
        return (int) stages.stream().filter(s -> s.external() == null).count();
    }

    /**
     * {@link #threadsPerStage(int)} for stages that wait as {@code waits} says: stages that spin ({@link SpinPolicy})
     * each hold a core and leave one to the network threads and the coordinator, so auto shares one CPU fewer.
     */
    public int threadsPerStage(int cpus, List<WaitMode> waits) {
        return threadsPerStage(waits.contains(WaitMode.SPIN) ? Math.max(1, cpus - 1) : cpus);
    }

    /** The most stages of this machine computing at once with {@code microBatches} in flight: each holds one. */
    public int computingStages(int microBatches) {
        return Math.max(1, Math.min(localStages(), microBatches));
    }

    /** The same pipeline with {@code threads} threads sharing each stage's matmuls (0: auto, {@link #threadsPerStage(int)}). */
    public PipelineConfig withThreadsPerStage(int threads) {
        return new PipelineConfig(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode,
                kvCacheTokens, socketBufferBytes, stallThresholdMicros, threads, warmupMillis, kvCacheType);
    }

    /** The same pipeline with each stage warming its kernels up for at most {@code millis} before it serves (0: not). */
    public PipelineConfig withWarmupMillis(long millis) {
        return new PipelineConfig(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode,
                kvCacheTokens, socketBufferBytes, stallThresholdMicros, threadsPerStage, millis, kvCacheType);
    }

    /** The same pipeline with every stage's KV cache storing {@code type} elements. */
    public PipelineConfig withKvCacheType(KvCacheType type) {
        return new PipelineConfig(host, stages, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode,
                kvCacheTokens, socketBufferBytes, stallThresholdMicros, threadsPerStage, warmupMillis, type);
    }

    /**
     * A numeric key's allowed values: {@code min} to {@code max}, and a power of two if {@code powerOfTwo}; when
     * {@code zeroMeans} is not null, 0 is allowed and means that (e.g. "auto").
     */
    record Bound(String key, long min, long max, boolean powerOfTwo, String zeroMeans) {
        /** What the key must be, e.g. "ring_size must be a power of two from 2 to 65536". */
        String rule() {
            return key + " must be " + (powerOfTwo ? "a power of two " : "") + "from " + min
                    + (zeroMeans != null ? " (" + zeroMeans + ")" : "") + " to " + max;
        }

        long check(long v) {
            if (v < min || v > max || (powerOfTwo && Long.bitCount(v) != 1)) {
                throw new IllegalArgumentException(rule() + ", got " + v);
            }
            return v;
        }

        /**
         * The whole number a JSON value holds, checked: a fraction is an error, as is a value beyond this range,
         * however large (nothing is wrapped or rounded into range). Null (key absent) gives {@code absent}.
         */
        long read(Number v, long absent) {
            if (v == null) {
                return absent;
            }
            if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
                return check(v.longValue());
            }
            BigDecimal d;
            try {
                d = new BigDecimal(v.toString());
            } catch (NumberFormatException e) {
                throw new IllegalArgumentException(key + " must be a whole number, got " + v);
            }
            if (d.signum() != 0 && d.stripTrailingZeros().scale() > 0) {
                throw new IllegalArgumentException(key + " must be a whole number, got " + v);
            }
            BigInteger i = d.toBigIntegerExact();
            if (i.bitLength() > 63) {
                throw new IllegalArgumentException(rule() + ", got " + i);
            }
            return check(i.longValue());
        }

        int readInt(Number v, long absent) {
            return Math.toIntExact(read(v, absent)); // within an int: every int key's bound is
        }
    }

    /**
     * A configuration file as written; absent keys take the defaults. Numbers are bound as {@link Number} and
     * checked by {@link Bound#read}, so that a value too large for its field is an error rather than wrapped, and a
     * fraction is an error rather than truncated.
     */
    record ConfigFile(String host, JsonNode stages, @JsonProperty("ring_size") Number ringSize,
                      @JsonProperty("max_frame_bytes") Number maxFrameBytes,
                      @JsonProperty("max_tokens_per_frame") Number maxTokensPerFrame,
                      @JsonProperty("max_sequences_per_frame") Number maxSequencesPerFrame,
                      @JsonProperty("wait_strategy") String waitStrategy, @JsonProperty("kv_cache_tokens") Number kvCacheTokens,
                      @JsonProperty("socket_buffer_bytes") Number socketBufferBytes,
                      @JsonProperty("stall_threshold_us") Number stallThresholdMicros,
                      @JsonProperty("threads_per_stage") Number threadsPerStage,
                      @JsonProperty("warmup_ms") Number warmupMillis,
                      @JsonProperty("kv_cache_type") String kvCacheType, String comment) {
    }

    /** One entry of a configuration file's {@code stages} list. */
    record StageFile(List<Number> layers, Number port, List<Number> cpus, String external, List<String> alternatives, String comment) {
    }

    /**
     * Reads a JSON configuration. {@code stages} may be a list of stage objects, or a number (an even split
     * of {@code modelLayers}). Unknown keys are errors (a typo must not be silently ignored), as are numbers out of
     * their key's range; every error names the file and the key.
     */
    public static PipelineConfig load(Path file, int modelLayers) throws IOException {
        try {
            return fromFile(Jackson.MAPPER.readValue(file.toFile(), ConfigFile.class), modelLayers);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(file + ": " + Jackson.describe(e), e);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(file + ": " + e.getMessage(), e);
        }
    }

    private static PipelineConfig fromFile(ConfigFile f, int modelLayers) throws JsonProcessingException {
        List<StageSpec> stages;
        if (f.stages() == null || f.stages().isNull()) {
            stages = evenSplit(modelLayers, 1);
        } else if (f.stages().isNumber()) {
            Bound count = new Bound("stages", 1, modelLayers, false, null);
            stages = evenSplit(modelLayers, count.readInt(f.stages().numberValue(), 1));
        } else if (f.stages().isArray()) {
            stages = new ArrayList<>();
            for (int i = 0; i < f.stages().size(); i++) {
                StageFile s;
                try {
                    s = Jackson.MAPPER.treeToValue(f.stages().get(i), StageFile.class);
                } catch (JsonProcessingException e) {
                    throw new IllegalArgumentException("stage " + i + ": " + Jackson.describe(e), e);
                }
                if (s.layers() == null || s.layers().size() != 2 || s.layers().contains(null)) {
                    throw new IllegalArgumentException("stage " + i + ": \"layers\" must be [from, to]");
                }
                Bound layer = new Bound("stage " + i + ": layers", 0, modelLayers, false, null);
                Bound port = new Bound("stage " + i + ": port", 0, 65535, false, "any free port");
                Bound cpu = new Bound("stage " + i + ": cpus", 0, 65535, false, null);
                List<Integer> cpus = new ArrayList<>();
                if (s.cpus() != null) {
                    for (Number c : s.cpus()) {
                        if (c == null) {
                            throw new IllegalArgumentException("stage " + i + ": cpus must be a list of CPU numbers");
                        }
                        cpus.add(cpu.readInt(c, 0));
                    }
                }
                try {
                    stages.add(new StageSpec(layer.readInt(s.layers().get(0), 0), layer.readInt(s.layers().get(1), 0),
                            port.readInt(s.port(), 0), cpus, s.external(), s.alternatives() == null ? List.of() : s.alternatives()));
                } catch (IllegalArgumentException | NullPointerException e) {
                    throw new IllegalArgumentException("stage " + i + ": " + e.getMessage(), e);
                }
            }
        } else {
            throw new IllegalArgumentException("\"stages\" must be a number of stages or a list of stage objects");
        }
        PipelineConfig c = new PipelineConfig(
                f.host() == null ? "127.0.0.1" : f.host(),
                stages,
                RING_SIZE.readInt(f.ringSize(), DEFAULT_RING_SIZE),
                MAX_FRAME_BYTES.readInt(f.maxFrameBytes(), DEFAULT_MAX_FRAME_BYTES),
                MAX_TOKENS_PER_FRAME.readInt(f.maxTokensPerFrame(), DEFAULT_MAX_TOKENS_PER_FRAME),
                MAX_SEQUENCES_PER_FRAME.readInt(f.maxSequencesPerFrame(), DEFAULT_MAX_SEQUENCES_PER_FRAME),
                f.waitStrategy() == null ? WaitMode.BLOCK : WaitMode.parse(f.waitStrategy()),
                KV_CACHE_TOKENS.read(f.kvCacheTokens(), 0),
                SOCKET_BUFFER_BYTES.readInt(f.socketBufferBytes(), 0),
                STALL_THRESHOLD_US.read(f.stallThresholdMicros(), DEFAULT_STALL_THRESHOLD_MICROS),
                THREADS_PER_STAGE.readInt(f.threadsPerStage(), 0),
                WARMUP_MS.read(f.warmupMillis(), 0),
                f.kvCacheType() == null ? KvCacheType.F32 : KvCacheType.parse(f.kvCacheType(), "\"kv_cache_type\""));
        c.checkCovers(modelLayers);
        return c;
    }
}
