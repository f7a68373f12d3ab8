package io.tnsr.wire;

import org.agrona.DirectBuffer;

/**
 * Receives each complete, validated frame from {@link StreamFrameDecoder#feed}.
 *
 * <p>The buffer is either the caller's source buffer (a frame that arrived whole in one chunk) or the decoder's
 * internal buffer (a frame that spanned chunks). Either way it is only valid during the call: copy out what must
 * outlive it. The header flyweight is the decoder's own, re-wrapped for every frame: do not keep it.
 * The handler must not call {@code feed} on the same decoder; if it throws, the exception propagates out of
 * {@code feed} and the decoder must be {@link StreamFrameDecoder#reset() reset} before reuse.
 */
@FunctionalInterface
public interface FrameHandler
{
    /**
     * @param buffer holding the whole frame (header, payload, sequence table, trace stamp).
     * @param offset index of the frame's first byte in {@code buffer}.
     * @param header flyweight already wrapped at {@code (buffer, offset)}.
     */
    void onFrame(DirectBuffer buffer, int offset, FrameHeader header);
}
