package io.tnsr.engine.stage;

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
 */
public record StageOptions(Path model, int stageIndex, int stageCount, int layerFrom, int layerTo, String host, int port,
                           int ringSize, int maxFrameBytes, int maxTokensPerFrame, int maxSequencesPerFrame,
                           WaitMode waitMode, int cpu, long kvCacheTokens, Path metricsDir,
                           int socketBufferBytes, long stallThresholdMicros) {

    public StageOptions {
        if (ringSize < 2 || Integer.bitCount(ringSize) != 1) {
            throw new IllegalArgumentException("ring size must be a power of two >= 2, got " + ringSize);
        }
        if (stageIndex < 0 || stageIndex >= stageCount) {
            throw new IllegalArgumentException("stage index " + stageIndex + " is outside 0.." + (stageCount - 1));
        }
        if (stallThresholdMicros < 1) {
            throw new IllegalArgumentException("the stall threshold must be >= 1 us, got " + stallThresholdMicros);
        }
    }

    /** With the default stall threshold ({@link PipelineConfig#DEFAULT_STALL_THRESHOLD_MICROS}). */
    public StageOptions(Path model, int stageIndex, int stageCount, int layerFrom, int layerTo, String host, int port,
                        int ringSize, int maxFrameBytes, int maxTokensPerFrame, int maxSequencesPerFrame,
                        WaitMode waitMode, int cpu, long kvCacheTokens, Path metricsDir, int socketBufferBytes) {
        this(model, stageIndex, stageCount, layerFrom, layerTo, host, port, ringSize, maxFrameBytes, maxTokensPerFrame,
                maxSequencesPerFrame, waitMode, cpu, kvCacheTokens, metricsDir, socketBufferBytes,
                PipelineConfig.DEFAULT_STALL_THRESHOLD_MICROS);
    }

    /** This stage's name in logs and metric file names: "stage0". */
    public String name() {
        return "stage" + stageIndex;
    }
}
