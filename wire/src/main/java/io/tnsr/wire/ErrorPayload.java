package io.tnsr.wire;

import org.agrona.DirectBuffer;

import static io.tnsr.wire.FrameHeader.HEADER_LENGTH;
import static io.tnsr.wire.FrameHeader.ORDER;

/**
 * The payload of an {@link MessageType#ERROR} frame: {@code u32 error_code, u32 seq_id, UTF-8 message} (the message
 * fills the rest of payload_len; no terminator). seq_id {@link ErrorCode#SEQ_ID_NONE} (0xFFFFFFFF) means the error
 * concerns the whole frame or connection. {@link #message} allocates a String: it is meant for the error path.
 */
public final class ErrorPayload
{
    /** Payload offset of {@code error_code}. */
    public static final int ERROR_CODE_OFFSET = 0;
    /** Payload offset of {@code seq_id}. */
    public static final int SEQ_ID_OFFSET = 4;
    /** Payload offset of the UTF-8 message: the fixed part's length. */
    public static final int MESSAGE_OFFSET = 8;

    private ErrorPayload()
    {
    }

    /** @return the raw {@code error_code} (u32 bits). */
    public static int errorCodeValue(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getInt(frameOffset + HEADER_LENGTH + ERROR_CODE_OFFSET, ORDER);
    }

    /** @return the error code, or {@code null} if the peer sent a code this version does not know. */
    public static ErrorCode errorCode(final DirectBuffer buffer, final int frameOffset)
    {
        return ErrorCode.fromCode(errorCodeValue(buffer, frameOffset));
    }

    /** @return {@code seq_id} (u32 bits); {@link ErrorCode#SEQ_ID_NONE} for the whole frame/connection. */
    public static int seqId(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getInt(frameOffset + HEADER_LENGTH + SEQ_ID_OFFSET, ORDER);
    }

    /** @return the message length in bytes: payload_len - 8. */
    public static int messageLength(final DirectBuffer buffer, final int frameOffset)
    {
        return (int)FrameHeader.payloadLength(buffer, frameOffset) - MESSAGE_OFFSET;
    }

    /** @return the message decoded from UTF-8 (malformed sequences become U+FFFD). Allocates. */
    public static String message(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getStringWithoutLengthUtf8(frameOffset + HEADER_LENGTH + MESSAGE_OFFSET, messageLength(buffer, frameOffset));
    }
}
