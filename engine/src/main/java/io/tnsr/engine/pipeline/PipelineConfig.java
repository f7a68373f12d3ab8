package io.tnsr.engine.pipeline;

import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

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
 */
public record PipelineConfig(String host, List<StageSpec> stages, int ringSize, int maxFrameBytes, int maxTokensPerFrame,
                             int maxSequencesPerFrame, WaitMode waitMode, long kvCacheTokens,
                             int socketBufferBytes, long stallThresholdMicros) {

    public static final int DEFAULT_RING_SIZE = 16;
    public static final int DEFAULT_MAX_FRAME_BYTES = 64 << 20;
    public static final int DEFAULT_MAX_TOKENS_PER_FRAME = 256;
    public static final int DEFAULT_MAX_SEQUENCES_PER_FRAME = 32;
    public static final long DEFAULT_STALL_THRESHOLD_MICROS = 1000;

    public PipelineConfig {
        stages = List.copyOf(stages);
        if (stages.isEmpty()) {
            throw new IllegalArgumentException("a pipeline needs at least one stage");
        }
        if (ringSize < 2 || Integer.bitCount(ringSize) != 1) {
            throw new IllegalArgumentException("ring_size must be a power of two >= 2, got " + ringSize);
        }
        if (maxTokensPerFrame < 1 || maxSequencesPerFrame < 1 || maxSequencesPerFrame > 255) {
            throw new IllegalArgumentException("max_tokens_per_frame must be >= 1 and max_sequences_per_frame in 1..255");
        }
        if (stallThresholdMicros < 1) {
            throw new IllegalArgumentException("stall_threshold_us must be >= 1, got " + stallThresholdMicros);
        }
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

    /** With the default stall threshold (1000 us). */
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
            return defaults(layers, stages == null ? 1 : stages, WaitMode.BLOCK);
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
                socketBufferBytes, stallThresholdMicros);
    }

    public PipelineConfig withStages(List<StageSpec> s) {
        return new PipelineConfig(host, s, ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, waitMode, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros);
    }

    /** A configuration file as written; absent keys take the defaults. */
    record ConfigFile(String host, JsonNode stages, @JsonProperty("ring_size") Integer ringSize,
                      @JsonProperty("max_frame_bytes") Integer maxFrameBytes,
                      @JsonProperty("max_tokens_per_frame") Integer maxTokensPerFrame,
                      @JsonProperty("max_sequences_per_frame") Integer maxSequencesPerFrame,
                      @JsonProperty("wait_strategy") String waitStrategy, @JsonProperty("kv_cache_tokens") Long kvCacheTokens,
                      @JsonProperty("socket_buffer_bytes") Integer socketBufferBytes,
                      @JsonProperty("stall_threshold_us") Long stallThresholdMicros, String comment) {
    }

    /** One entry of a configuration file's {@code stages} list. */
    record StageFile(List<Integer> layers, Integer port, List<Integer> cpus, String external, String comment) {
    }

    /**
     * Reads a JSON configuration. {@code stages} may be a list of stage objects, or a number (an even split
     * of {@code modelLayers}). Unknown keys are errors (a typo must not be silently ignored); every error names the
     * file.
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
            stages = evenSplit(modelLayers, f.stages().intValue());
        } else if (f.stages().isArray()) {
            stages = new ArrayList<>();
            for (int i = 0; i < f.stages().size(); i++) {
                StageFile s;
                try {
                    s = Jackson.MAPPER.treeToValue(f.stages().get(i), StageFile.class);
                } catch (JsonProcessingException e) {
                    throw new IllegalArgumentException("stage " + i + ": " + Jackson.describe(e), e);
                }
                if (s.layers() == null || s.layers().size() != 2) {
                    throw new IllegalArgumentException("stage " + i + ": \"layers\" must be [from, to]");
                }
                stages.add(new StageSpec(s.layers().get(0), s.layers().get(1), s.port() == null ? 0 : s.port(),
                        s.cpus() == null ? List.of() : s.cpus(), s.external()));
            }
        } else {
            throw new IllegalArgumentException("\"stages\" must be a number of stages or a list of stage objects");
        }
        PipelineConfig c = new PipelineConfig(
                f.host() == null ? "127.0.0.1" : f.host(),
                stages,
                f.ringSize() == null ? DEFAULT_RING_SIZE : f.ringSize(),
                f.maxFrameBytes() == null ? DEFAULT_MAX_FRAME_BYTES : f.maxFrameBytes(),
                f.maxTokensPerFrame() == null ? DEFAULT_MAX_TOKENS_PER_FRAME : f.maxTokensPerFrame(),
                f.maxSequencesPerFrame() == null ? DEFAULT_MAX_SEQUENCES_PER_FRAME : f.maxSequencesPerFrame(),
                f.waitStrategy() == null ? WaitMode.BLOCK : WaitMode.parse(f.waitStrategy()),
                f.kvCacheTokens() == null ? 0 : f.kvCacheTokens(),
                f.socketBufferBytes() == null ? 0 : f.socketBufferBytes(),
                f.stallThresholdMicros() == null ? DEFAULT_STALL_THRESHOLD_MICROS : f.stallThresholdMicros());
        c.checkCovers(modelLayers);
        return c;
    }
}
