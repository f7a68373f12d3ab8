package io.tnsr.engine.stage;

import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import java.nio.file.Path;

/**
 * Everything one stage process is configured with, read once at start-up.
 *
 * @param model                GGUF file
 * @param stageIndex           0-based position in the pipeline
 * @param stageCount           stages in the pipeline
 * @param layerFrom            first layer held (inclusive)
 * @param layerTo              last layer held (exclusive)
 * @param host                 address to listen on
 * @param port                 port to listen on for the upstream (0 = any free port)
 * @param ringSize             Disruptor ring slots (power of two)
 * @param maxFrameBytes        largest frame accepted from upstream (protocol limit)
 * @param maxTokensPerFrame    most token rows per frame; sizes the slots
 * @param maxSequencesPerFrame most sequences per frame; sizes a last stage's logits
 * @param waitMode             how the compute thread waits for frames
 * @param cpu                  CPU to pin the compute thread to when spinning (-1 = none)
 * @param kvCacheTokens        KV cache capacity in positions (0 = auto)
 * @param metricsDir           where latency histograms are logged (null = not logged)
 * @param socketBufferBytes    SO_RCVBUF of the upstream socket and SO_SNDBUF of the downstream one (0 = the OS's
 *                             default, which grows on demand); bounds the bytes in flight between stages
 * @param stallThresholdMicros a frame that reaches the idle compute thread but is picked up later than this counts
 *                             as a stall ({@code stage<i>-stalls})
 * @param link                 the links' key, liveness bound and time limits
 * @param threads              threads sharing the rows of every matmul (the compute thread and {@code threads - 1}
 *                             workers; 1 = the compute thread alone)
 * @param once                 stop after the session that passes SHUTDOWN (a stage that {@code run-pipeline} starts: a
 *                             broken session is followed by the coordinator's next one); otherwise serve one session
 *                             after another until stopped ({@code tools/stage})
 * @param warmupMillis         bound on the JIT warm-up run before the stage listens (0 = none;
 *                             {@link io.tnsr.engine.forward.RangeWarmup})
 * @param kvCacheType          how the KV cache stores keys and values (f32 exact; f16 half the memory per position)
 */
public record StageOptions(Path model, int stageIndex, int stageCount, int layerFrom, int layerTo, String host, int port,
                           int ringSize, int maxFrameBytes, int maxTokensPerFrame, int maxSequencesPerFrame,
                           WaitMode waitMode, int cpu, long kvCacheTokens, Path metricsDir,
                           int socketBufferBytes, long stallThresholdMicros, LinkOptions link, int threads, boolean once,
                           long warmupMillis, KvCacheType kvCacheType) {

    public StageOptions {
        if (ringSize < 2 || Integer.bitCount(ringSize) != 1) {
            throw new IllegalArgumentException("ring size must be a power of two >= 2, got " + ringSize);
        }
        if (stageIndex != -1 && (stageIndex < 0 || stageIndex >= stageCount)) {
            throw new IllegalArgumentException("stage index " + stageIndex + " is outside 0.." + (stageCount - 1));
        }
        if (layerFrom < 0 || layerTo <= layerFrom) {
            throw new IllegalArgumentException("layers [" + layerFrom + ", " + layerTo + ") are empty or negative");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        java.util.Objects.requireNonNull(link, "link options");
        java.util.Objects.requireNonNull(kvCacheType, "KV cache type");
        if (threads < 1 || threads > 256) {
            throw new IllegalArgumentException("threads must be 1..256, got " + threads);
        }
        if (warmupMillis < 0) {
            throw new IllegalArgumentException("the warm-up bound must be >= 0 ms, got " + warmupMillis);
        }
        if (stallThresholdMicros < 1) {
            throw new IllegalArgumentException("the stall threshold must be >= 1 us, got " + stallThresholdMicros);
        }
    }

    /** Options for layers [layerFrom, layerTo) of {@code model}, every other one at its default; set them by name. */
    public static Builder builder(Path model, int layerFrom, int layerTo) {
        return new Builder(model, layerFrom, layerTo);
    }

    /**
     * Named options, defaults as in {@link PipelineConfig}: the place each session gives it, any free port on
     * 127.0.0.1, blocking waits, one session.
     */
    public static final class Builder {
        private final Path model;
        private final int layerFrom;
        private final int layerTo;
        private int stageIndex = -1;
        private int stageCount = 1;
        private String host = "127.0.0.1";
        private int port;
        private int ringSize = PipelineConfig.DEFAULT_RING_SIZE;
        private int maxFrameBytes = PipelineConfig.DEFAULT_MAX_FRAME_BYTES;
        private int maxTokensPerFrame = PipelineConfig.DEFAULT_MAX_TOKENS_PER_FRAME;
        private int maxSequencesPerFrame = PipelineConfig.DEFAULT_MAX_SEQUENCES_PER_FRAME;
        private WaitMode waitMode = WaitMode.BLOCK;
        private int threads = 1;
        private int cpu = -1;
        private long kvCacheTokens;
        private Path metricsDir;
        private int socketBufferBytes;
        private long stallThresholdMicros = PipelineConfig.DEFAULT_STALL_THRESHOLD_MICROS;
        private LinkOptions link = LinkOptions.defaults();
        private boolean once = true;
        private long warmupMillis;
        private KvCacheType kvCacheType = KvCacheType.F32;

        private Builder(Path model, int layerFrom, int layerTo) {
            this.model = model;
            this.layerFrom = layerFrom;
            this.layerTo = layerTo;
        }

        /** The stage's place: the {@code index}-th (0-based) of {@code count}; index -1: whatever each session says. */
        public Builder stage(int index, int count) {
            this.stageIndex = index;
            this.stageCount = count;
            return this;
        }

        /** Where it listens for its upstream (port 0: any free port). */
        public Builder listen(String host, int port) {
            this.host = host;
            this.port = port;
            return this;
        }

        public Builder ringSize(int slots) {
            this.ringSize = slots;
            return this;
        }

        public Builder maxFrameBytes(int bytes) {
            this.maxFrameBytes = bytes;
            return this;
        }

        /** Most token rows and most sequences per frame. */
        public Builder frameLimits(int maxTokensPerFrame, int maxSequencesPerFrame) {
            this.maxTokensPerFrame = maxTokensPerFrame;
            this.maxSequencesPerFrame = maxSequencesPerFrame;
            return this;
        }

        /** How the compute thread waits, and the CPU it is pinned to when spinning (-1: none). */
        public Builder wait(WaitMode mode, int cpu) {
            this.waitMode = mode;
            this.cpu = cpu;
            return this;
        }

        public Builder kvCacheTokens(long positions) {
            this.kvCacheTokens = positions;
            return this;
        }

        public Builder metricsDir(Path dir) {
            this.metricsDir = dir;
            return this;
        }

        public Builder socketBufferBytes(int bytes) {
            this.socketBufferBytes = bytes;
            return this;
        }

        public Builder stallThresholdMicros(long micros) {
            this.stallThresholdMicros = micros;
            return this;
        }

        public Builder link(LinkOptions options) {
            this.link = options;
            return this;
        }

        /** Threads sharing the rows of every matmul (default 1: the compute thread alone). */
        public Builder threads(int threads) {
            this.threads = threads;
            return this;
        }

        /** Stop after a session that passed SHUTDOWN (true, the default), or serve sessions until stopped. */
        public Builder once(boolean once) {
            this.once = once;
            return this;
        }

        /** Warm the kernels up for at most {@code millis} before listening (default 0: no warm-up). */
        public Builder warmupMillis(long millis) {
            this.warmupMillis = millis;
            return this;
        }

        /** How the KV cache stores keys and values (default F32). */
        public Builder kvCacheType(KvCacheType type) {
            this.kvCacheType = type;
            return this;
        }

        public StageOptions build() {
            return new StageOptions(model, stageIndex, stageCount, layerFrom, layerTo, host, port, ringSize, maxFrameBytes,
                    maxTokensPerFrame, maxSequencesPerFrame, waitMode, cpu, kvCacheTokens, metricsDir, socketBufferBytes,
                    stallThresholdMicros, link, threads, once, warmupMillis, kvCacheType);
        }
    }

    /** This stage's name in logs and metric file names: "stage0", or "stage-layers-4-8" when its place is not fixed. */
    public String name() {
        return stageIndex >= 0 ? "stage" + stageIndex : "stage-layers-" + layerFrom + "-" + layerTo;
    }
}
