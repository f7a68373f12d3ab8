package io.tnsr.wire;

import org.agrona.DirectBuffer;

import static io.tnsr.wire.FrameHeader.HEADER_LENGTH;
import static io.tnsr.wire.FrameHeader.ORDER;

/**
 * Reads payload elements of a validated frame without allocation: u32 elements (TOKENS ids, END_SEQUENCE seq ids,
 * HELLO fields) and f32 elements (ACTIVATIONS, LOGITS), by element index from the payload start.
 * <pre>{@code
 * // TOKENS
 * int n = (int) FrameHeader.dim(buf, frame, 0);
 * for (int i = 0; i < n; i++) { int token = FramePayload.u32(buf, frame, i); ... }
 * // ACTIVATIONS [rows, width]: element (r, c)
 * float x = FramePayload.f32(buf, frame, r * width + c);
 * }</pre>
 * Indices are not checked against the shape (Agrona's bounds checks, when enabled, only guard the buffer).
 */
public final class FramePayload
{
    private FramePayload()
    {
    }

    /** @return the buffer index of the payload of the frame at {@code frameOffset}. */
    public static int offset(final int frameOffset)
    {
        return frameOffset + HEADER_LENGTH;
    }

    /** @return u32 element {@code i} of the payload (raw bits): a token id, a seq id, a HELLO field. */
    public static int u32(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getInt(frameOffset + HEADER_LENGTH + 4 * i, ORDER);
    }

    /** @return f32 element {@code i} of the payload. */
    public static float f32(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getFloat(frameOffset + HEADER_LENGTH + 4 * i, ORDER);
    }
}
