package io.tnsr.wire;

import io.tnsr.wire.FrameFormatException.Reason;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import static io.tnsr.wire.FrameHeader.HEADER_LENGTH;

/**
 * PUSH-mode decoder for an arbitrary byte stream of TNSR frames: feed it chunks as they arrive, split anywhere (one
 * byte at a time, or many frames in one chunk); it calls a {@link FrameHandler} for every complete frame after
 * {@link FrameValidator#validateHeader} and {@link FrameValidator#validateTrailer} accepted it.
 *
 * <pre>{@code
 * StreamFrameDecoder decoder = new StreamFrameDecoder(maxFrameSize);   // one per connection, allocated once
 * FrameHandler handler = (buf, off, header) -> {                       // allocated once, not per frame
 *     switch (header.messageType()) { ... }                            // buf is valid only during this call
 * };
 * UnsafeBuffer chunk = new UnsafeBuffer(new byte[64 * 1024]);
 * try {
 *     int n;
 *     while ((n = in.read(chunk.byteArray())) > 0) {
 *         decoder.feed(chunk, 0, n, handler);
 *     }
 *     decoder.endOfStream();                 // throws TRUNCATED_HEADER / TRUNCATED_PAYLOAD if bytes were left over
 * } catch (FrameFormatException e) {
 *     // e.frameIndex(), e.streamOffset(), e.reason(): framing is lost, close the connection
 * }
 * }</pre>
 *
 * <p>Memory: frames that arrive whole inside one chunk are delivered in place from the caller's buffer (zero copy).
 * Only a frame that spans chunks is copied into ONE internal buffer, allocated with the decoder
 * ({@code min(64 KiB, maxFrameSize)} bytes) and grown by doubling when a longer frame starts, never beyond
 * {@code maxFrameSize} (the validated frame length is known from the header before any payload byte is buffered).
 * After growth to the largest frame the stream carries, {@code feed} allocates nothing.
 *
 * <p>Errors: the first {@link FrameFormatException} puts the decoder in a failed state (framing is lost); later
 * {@code feed}/{@code endOfStream} calls throw {@link IllegalStateException} until {@link #reset()}.
 * Not thread-safe: one thread feeds one decoder.
 */
public final class StreamFrameDecoder
{
    /** Capacity of the internal buffer when the decoder is created (capped at the maximum frame size). */
    public static final int INITIAL_CAPACITY = 64 * 1024;

    private static final int READY = 0;
    private static final int IN_HANDLER = 1;
    private static final int FAILED = 2;

    private final int maxFrameSize;
    private final FrameHeader header = new FrameHeader();
    private final UnsafeBuffer partial;
    private int partialLength;
    private int expectedLength;
    private long frameStreamOffset;
    private long frameIndex;
    private int state = READY;

    /** A decoder with the default maximum frame size, {@link FrameHeader#DEFAULT_MAX_FRAME_SIZE} (64 MiB). */
    public StreamFrameDecoder()
    {
        this(FrameHeader.DEFAULT_MAX_FRAME_SIZE);
    }

    /**
     * @param maxFrameSize largest total frame length accepted, in
     *                     [{@link FrameHeader#MIN_FRAME_SIZE}, {@link FrameHeader#MAX_FRAME_SIZE_LIMIT}].
     */
    public StreamFrameDecoder(final int maxFrameSize)
    {
        if (maxFrameSize < FrameHeader.MIN_FRAME_SIZE || maxFrameSize > FrameHeader.MAX_FRAME_SIZE_LIMIT)
        {
            throw new IllegalArgumentException("maxFrameSize " + maxFrameSize + " not in [" + FrameHeader.MIN_FRAME_SIZE +
                ", " + FrameHeader.MAX_FRAME_SIZE_LIMIT + "]");
        }
        this.maxFrameSize = maxFrameSize;
        this.partial = new UnsafeBuffer(new byte[Math.min(INITIAL_CAPACITY, maxFrameSize)]);
    }

    /**
     * Consumes {@code length} bytes of the stream, calling {@code handler} for each frame they complete.
     *
     * @param src     the bytes.
     * @param offset  index of the first byte in {@code src}.
     * @param length  number of bytes, may be 0.
     * @param handler called synchronously for each complete valid frame, in stream order.
     * @throws FrameFormatException on the first invalid frame; frames before it were delivered.
     * @throws IllegalStateException if the decoder failed earlier, or if called from its own handler.
     */
    public void feed(final DirectBuffer src, final int offset, final int length, final FrameHandler handler)
        throws FrameFormatException
    {
        if (state != READY)
        {
            throw notReady();
        }
        try
        {
            int pos = offset;
            final int end = offset + length;
            while (pos < end)
            {
                if (partialLength == 0)
                {
                    final int available = end - pos;
                    if (available < HEADER_LENGTH)
                    {
                        partial.putBytes(0, src, pos, available);
                        partialLength = available;
                        break;
                    }
                    final int frameLength = FrameValidator.validateHeader(src, pos, frameStreamOffset, frameIndex, maxFrameSize);
                    if (available < frameLength)
                    {
                        ensureCapacity(frameLength);
                        partial.putBytes(0, src, pos, available);
                        partialLength = available;
                        expectedLength = frameLength;
                        break;
                    }
                    FrameValidator.validateTrailer(src, pos, frameStreamOffset, frameIndex);
                    deliver(src, pos, frameLength, handler);
                    pos += frameLength;
                }
                else
                {
                    if (expectedLength == 0)
                    {
                        final int n = Math.min(HEADER_LENGTH - partialLength, end - pos);
                        partial.putBytes(partialLength, src, pos, n);
                        partialLength += n;
                        pos += n;
                        if (partialLength < HEADER_LENGTH)
                        {
                            break;
                        }
                        expectedLength = FrameValidator.validateHeader(partial, 0, frameStreamOffset, frameIndex, maxFrameSize);
                        ensureCapacity(expectedLength);
                    }
                    final int n = Math.min(expectedLength - partialLength, end - pos);
                    partial.putBytes(partialLength, src, pos, n);
                    partialLength += n;
                    pos += n;
                    if (partialLength == expectedLength)
                    {
                        FrameValidator.validateTrailer(partial, 0, frameStreamOffset, frameIndex);
                        final int frameLength = expectedLength;
                        partialLength = 0;
                        expectedLength = 0;
                        deliver(partial, 0, frameLength, handler);
                    }
                }
            }
        }
        catch (final FrameFormatException ex)
        {
            state = FAILED;
            throw ex;
        }
    }

    /**
     * Declares the end of the stream.
     *
     * @throws FrameFormatException {@link Reason#TRUNCATED_HEADER} or {@link Reason#TRUNCATED_PAYLOAD} when the
     *                              stream ended inside a frame; its stream offset is where the bytes ran out.
     * @throws IllegalStateException if the decoder failed earlier.
     */
    public void endOfStream() throws FrameFormatException
    {
        if (state != READY)
        {
            throw notReady();
        }
        if (partialLength == 0)
        {
            return;
        }
        state = FAILED;
        if (expectedLength == 0)
        {
            throw new FrameFormatException(Reason.TRUNCATED_HEADER, frameIndex, frameStreamOffset, partialLength,
                "stream ended after " + partialLength + " of the " + HEADER_LENGTH + " header bytes");
        }
        final MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(partial, 0));
        throw new FrameFormatException(Reason.TRUNCATED_PAYLOAD, frameIndex, frameStreamOffset, partialLength,
            "stream ended after " + partialLength + " of the " + expectedLength + " frame bytes (" + type.printName() +
            ", payload_len " + FrameHeader.payloadLength(partial, 0) + ", " + FrameHeader.sequenceCount(partial, 0) +
            " sequence entries" + (FrameHeader.flags(partial, 0) != 0 ? ", trace" : "") + ")");
    }

    /** Forgets any partial frame, the failed state and the counters; keeps the internal buffer. */
    public void reset()
    {
        partialLength = 0;
        expectedLength = 0;
        frameStreamOffset = 0;
        frameIndex = 0;
        state = READY;
    }

    /** @return the maximum total frame length this decoder accepts. */
    public int maxFrameSize()
    {
        return maxFrameSize;
    }

    /**
     * @return the index of the next frame to complete; inside {@link FrameHandler#onFrame}, the index of the frame
     * being delivered.
     */
    public long frameIndex()
    {
        return frameIndex;
    }

    /**
     * @return the stream offset of the next frame's first byte; inside {@link FrameHandler#onFrame}, the stream offset
     * of the frame being delivered.
     */
    public long frameStreamOffset()
    {
        return frameStreamOffset;
    }

    /** @return the bytes of an incomplete frame currently buffered. */
    public int bufferedBytes()
    {
        return partialLength;
    }

    /** @return the current capacity of the internal buffer (never more than {@link #maxFrameSize()}). */
    public int bufferCapacity()
    {
        return partial.capacity();
    }

    private void deliver(final DirectBuffer buffer, final int offset, final int frameLength, final FrameHandler handler)
    {
        state = IN_HANDLER;
        handler.onFrame(buffer, offset, header.wrap(buffer, offset));
        state = READY;
        frameStreamOffset += frameLength;
        frameIndex++;
    }

    private void ensureCapacity(final int required)
    {
        final int capacity = partial.capacity();
        if (required > capacity)
        {
            final int newCapacity = (int)Math.max(required, Math.min(2L * capacity, maxFrameSize));
            final byte[] bytes = new byte[newCapacity];
            partial.getBytes(0, bytes, 0, partialLength);
            partial.wrap(bytes);
        }
    }

    private IllegalStateException notReady()
    {
        return new IllegalStateException(state == IN_HANDLER ?
            "feed/endOfStream called from a FrameHandler, or a handler threw: reset() the decoder" :
            "decoder failed on a malformed frame at stream offset " + frameStreamOffset + ": reset() it first");
    }
}
