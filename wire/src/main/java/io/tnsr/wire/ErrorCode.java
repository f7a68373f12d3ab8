package io.tnsr.wire;

/**
 * The {@code error_code} of an {@link MessageType#ERROR} frame. The numeric codes are part of the protocol:
 * never renumber a constant, only add new ones (a receiver maps an unknown code to {@code null} and treats it as
 * {@link #INTERNAL}).
 */
public enum ErrorCode
{
    /** The peer sent bytes that are not a valid frame (any {@link FrameFormatException.Reason} but too-large). */
    MALFORMED_FRAME(1),
    /** A frame's payload_len or total length exceeds the receiver's maximum frame size. */
    FRAME_TOO_LARGE(2),
    /** HELLO carried a protocol_version the receiver does not speak. */
    UNSUPPORTED_PROTOCOL_VERSION(3),
    /** A valid frame arrived that the receiver cannot accept in its current state (e.g. data before HELLO). */
    UNEXPECTED_MESSAGE(4),
    /** The stage has no KV-cache room left for the sequence. */
    OUT_OF_KV_CACHE(5),
    /** A sequence position reached the model's context length. */
    CONTEXT_OVERFLOW(6),
    /** More tokens in one frame than max_tokens_per_frame announced in HELLO. */
    BATCH_TOO_LARGE(7),
    /** A sequence id the stage does not know (never started, or already ended). */
    UNKNOWN_SEQUENCE(8),
    /** The last stage's logits for the sequence hold a NaN or an infinite maximum: no token can be sampled. */
    NON_FINITE_LOGITS(9),
    /** Anything else that went wrong inside the sender. */
    INTERNAL(255);

    /** The seq_id of an ERROR that concerns the whole frame or connection rather than one sequence. */
    public static final int SEQ_ID_NONE = 0xFFFF_FFFF;

    private static final ErrorCode[] BY_CODE = new ErrorCode[256];

    static
    {
        for (final ErrorCode code : values())
        {
            BY_CODE[code.code] = code;
        }
    }

    private final int code;

    ErrorCode(final int code)
    {
        this.code = code;
    }

    /** @return the numeric code sent on the wire (u32). */
    public int code()
    {
        return code;
    }

    /**
     * @param code a wire error code (u32 bits).
     * @return the constant, or {@code null} when the code is unknown; never allocates.
     */
    public static ErrorCode fromCode(final int code)
    {
        return (code & ~0xFF) == 0 ? BY_CODE[code] : null;
    }
}
