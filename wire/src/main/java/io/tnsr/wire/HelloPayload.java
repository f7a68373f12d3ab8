package io.tnsr.wire;

import org.agrona.DirectBuffer;

/**
 * The payload of a {@link MessageType#HELLO} frame: eight u32 fields, shape {@code [8]}. Each peer sends HELLO first
 * on a new connection; a receiver that does not speak {@link #PROTOCOL_VERSION} answers with ERROR
 * {@link ErrorCode#UNSUPPORTED_PROTOCOL_VERSION} and closes.
 * <pre>{@code
 * if (HelloPayload.protocolVersion(buf, frame) != HelloPayload.PROTOCOL_VERSION) { ... }
 * int hidden = HelloPayload.hiddenDim(buf, frame);
 * }</pre>
 */
public final class HelloPayload
{
    /** The protocol version this codec implements. */
    public static final int PROTOCOL_VERSION = 1;
    /** role: the coordinator. */
    public static final int ROLE_COORDINATOR = 0;
    /** role: a pipeline stage. */
    public static final int ROLE_STAGE = 1;

    /** Field index (u32 element) of {@code protocol_version}. */
    public static final int PROTOCOL_VERSION_INDEX = 0;
    /** Field index of {@code role}. */
    public static final int ROLE_INDEX = 1;
    /** Field index of {@code stage_index}. */
    public static final int STAGE_INDEX_INDEX = 2;
    /** Field index of {@code stage_count}. */
    public static final int STAGE_COUNT_INDEX = 3;
    /** Field index of {@code layer_from}. */
    public static final int LAYER_FROM_INDEX = 4;
    /** Field index of {@code layer_to}. */
    public static final int LAYER_TO_INDEX = 5;
    /** Field index of {@code hidden_dim}. */
    public static final int HIDDEN_DIM_INDEX = 6;
    /** Field index of {@code max_tokens_per_frame}. */
    public static final int MAX_TOKENS_PER_FRAME_INDEX = 7;
    /** Number of u32 fields: HELLO's shape is exactly {@code [FIELD_COUNT]}. */
    public static final int FIELD_COUNT = 8;

    private HelloPayload()
    {
    }

    /** @return {@code protocol_version}. */
    public static int protocolVersion(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, PROTOCOL_VERSION_INDEX);
    }

    /** @return {@code role}: {@link #ROLE_COORDINATOR} or {@link #ROLE_STAGE}. */
    public static int role(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, ROLE_INDEX);
    }

    /** @return {@code stage_index}. */
    public static int stageIndex(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, STAGE_INDEX_INDEX);
    }

    /** @return {@code stage_count}. */
    public static int stageCount(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, STAGE_COUNT_INDEX);
    }

    /** @return {@code layer_from} (first layer the stage runs). */
    public static int layerFrom(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, LAYER_FROM_INDEX);
    }

    /** @return {@code layer_to} (the stage's layer range end, as the sender defines it). */
    public static int layerTo(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, LAYER_TO_INDEX);
    }

    /** @return {@code hidden_dim}. */
    public static int hiddenDim(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, HIDDEN_DIM_INDEX);
    }

    /** @return {@code max_tokens_per_frame}. */
    public static int maxTokensPerFrame(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, MAX_TOKENS_PER_FRAME_INDEX);
    }
}
