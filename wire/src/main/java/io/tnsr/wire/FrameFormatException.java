package io.tnsr.wire;

/**
 * A byte stream is not a valid sequence of TNSR frames. Checked on purpose: a malformed frame is an expected event on
 * a connection to another process, and every reader must decide what to do (typically: send an
 * {@link MessageType#ERROR} frame with {@link Reason#errorCode()} and close the connection, because framing is lost).
 *
 * <p>Carries the {@link Reason}, the index of the frame in the stream (0-based), the stream offset of the frame's
 * first byte, and the offset of the bad field inside the frame; {@link #streamOffset()} is their sum: the byte
 * offset in the stream of the bad field (for truncation: the offset where the stream ended). The message reads like
 * {@code frame #3 at stream offset 4200: bad magic 41 41 41 41, expected 54 4E 53 52 ("TNSR") [BAD_MAGIC at byte 4200]}.
 *
 * <p>Only thrown on failure, so building the message allocates; the valid-frame paths never do.
 */
public final class FrameFormatException extends Exception
{
    private static final long serialVersionUID = 1L;

    /** What was wrong. Validation order is the declaration order of the header checks; see docs/PROTOCOL.md. */
    public enum Reason
    {
        /** Bytes 0..3 are not 'T','N','S','R'. */
        BAD_MAGIC,
        /** msg_type is not a known {@link MessageType}. */
        UNKNOWN_MESSAGE_TYPE,
        /** shape_rank &gt; 4. */
        RANK_TOO_LARGE,
        /** A reserved bit (1..7) of the flags byte is set. */
        RESERVED_FLAGS_SET,
        /** seq_count &gt; 0 on a type that cannot carry a sequence table. */
        SEQUENCE_TABLE_NOT_ALLOWED,
        /** A dim at index &gt;= rank is not zero. */
        UNUSED_DIM_NONZERO,
        /** A used dim exceeds 2^31-1. */
        DIM_TOO_LARGE,
        /** The rank or dims do not fit the message type (e.g. HELLO not [8], SHUTDOWN not rank 0, LOGITS not rank 2). */
        WRONG_SHAPE_FOR_TYPE,
        /** payload_len or the total frame length exceeds the maximum frame size. */
        FRAME_TOO_LARGE,
        /** Rank 0 with payload_len != 0. */
        PAYLOAD_ON_RANK_ZERO,
        /** Product of dims times element size != payload_len. */
        SHAPE_PAYLOAD_MISMATCH,
        /** A sequence-table entry has reserved entry-flag bits set. */
        RESERVED_ENTRY_FLAGS_SET,
        /** TOKENS/ACTIVATIONS: sum of entry n_tokens != dims[0]; LOGITS: WANT_LOGITS entries != dims[0]. */
        SEQUENCE_TABLE_MISMATCH,
        /** The stream ended inside a header. */
        TRUNCATED_HEADER,
        /** The stream ended after a valid header but before the end of the frame (payload or trailer). */
        TRUNCATED_PAYLOAD;

        /** @return the {@link ErrorCode} a receiver should send back for this reason. */
        public ErrorCode errorCode()
        {
            return this == FRAME_TOO_LARGE ? ErrorCode.FRAME_TOO_LARGE : ErrorCode.MALFORMED_FRAME;
        }
    }

    private final Reason reason;
    private final long frameIndex;
    private final long frameStreamOffset;
    private final int fieldOffset;
    private final String detail;

    /**
     * @param reason            what was wrong.
     * @param frameIndex        0-based index of the frame in the stream.
     * @param frameStreamOffset stream offset of the frame's first byte.
     * @param fieldOffset       offset of the bad field from the frame's first byte.
     * @param detail            what was wrong with which values, without the position (added here).
     */
    public FrameFormatException(
        final Reason reason, final long frameIndex, final long frameStreamOffset, final int fieldOffset, final String detail)
    {
        super("frame #" + frameIndex + " at stream offset " + frameStreamOffset + ": " + detail +
            " [" + reason + " at byte " + (frameStreamOffset + fieldOffset) + "]");
        this.reason = reason;
        this.frameIndex = frameIndex;
        this.frameStreamOffset = frameStreamOffset;
        this.fieldOffset = fieldOffset;
        this.detail = detail;
    }

    /** @return what was wrong. */
    public Reason reason()
    {
        return reason;
    }

    /** @return the 0-based index of the bad frame in the stream. */
    public long frameIndex()
    {
        return frameIndex;
    }

    /** @return the stream offset of the bad frame's first byte. */
    public long frameStreamOffset()
    {
        return frameStreamOffset;
    }

    /** @return the offset of the bad field from the frame's first byte (e.g. 20 for payload_len). */
    public int fieldOffset()
    {
        return fieldOffset;
    }

    /** @return the byte offset in the stream of the bad field: {@code frameStreamOffset() + fieldOffset()}. */
    public long streamOffset()
    {
        return frameStreamOffset + fieldOffset;
    }

    /** @return the human description of the values, without the position. */
    public String detail()
    {
        return detail;
    }
}
