package io.tnsr.engine.pipeline;

import io.tnsr.wire.FrameHeader;

/**
 * The sizes of the frames a pipeline passes, in one place: a stage sizes its ring slots and outbound buffer with
 * them, the coordinator its receive buffer, and {@link PipelineConfig#checkFrames} compares them with
 * {@code max_frame_bytes} before any stage starts. Every data frame carries a trace stamp
 * ({@link FrameHeader#FLAG_TRACE}); sizes are longs, so a configuration too large for a buffer is reported, not wrapped.
 */
public final class FrameSizes {
    private FrameSizes() {
    }

    /** A TOKENS frame (coordinator to the first stage): {@code tokens} token ids of {@code sequences} sequences. */
    public static long tokensFrameBytes(int tokens, int sequences) {
        return FrameHeader.frameLength((long) tokens * Integer.BYTES, sequences, FrameHeader.FLAG_TRACE);
    }

    /** An ACTIVATIONS frame (stage to stage): {@code tokens} rows of {@code dim} floats of {@code sequences} sequences. */
    public static long activationFrameBytes(int tokens, int dim, int sequences) {
        return FrameHeader.frameLength((long) tokens * dim * Float.BYTES, sequences, FrameHeader.FLAG_TRACE);
    }

    /**
     * A stage's ring slot: room for any frame the stage accepts, of its most rows of activations and a full sequence
     * table (a frame of more sequences than the stage takes is refused after it is read, so it must fit too).
     */
    public static long ringSlotBytes(int maxTokens, int dim) {
        return activationFrameBytes(maxTokens, dim, FrameHeader.MAX_SEQUENCE_COUNT);
    }

    /** A LOGITS frame (last stage to the coordinator): one row of {@code vocab} floats for each of {@code sequences}. */
    public static long logitsFrameBytes(int sequences, int vocab) {
        return FrameHeader.frameLength((long) sequences * vocab * Float.BYTES, sequences, FrameHeader.FLAG_TRACE);
    }
}
