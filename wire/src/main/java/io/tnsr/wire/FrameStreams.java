package io.tnsr.wire;

import org.agrona.ExpandableArrayBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.Arrays;

/**
 * Whole streams of frames built in memory: for tools that write a sample stream, and for tests. Not for the hot path
 * (everything here allocates).
 */
public final class FrameStreams
{
    private FrameStreams()
    {
    }

    /** Appends frames to a growing buffer; {@link #bytes()} is the stream so far. */
    public static final class Builder
    {
        private final ExpandableArrayBuffer buf = new ExpandableArrayBuffer(1024);
        private int length;

        /** The buffer the stream is built in (valid up to {@link #length()}). */
        public MutableDirectBuffer buffer()
        {
            return buf;
        }

        /** Bytes of the stream so far. */
        public int length()
        {
            return length;
        }

        /** Cuts the stream back to its first {@code length} bytes. */
        public Builder truncate(final int length)
        {
            this.length = length;
            return this;
        }

        /** Starts a frame at the end: returns its offset; the caller encodes there and calls {@link #end}. */
        public int start()
        {
            buf.checkLimit(length + 64 * 1024);
            return length;
        }

        public Builder end(final int frameLength)
        {
            length += frameLength;
            return this;
        }

        public Builder tokens(final long step, final int mb, final int[] ids, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeTokens(buf, off, step, mb, ids, 0, ids.length, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        public Builder activations(final long step, final int mb, final int rows, final int width, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeActivations(buf, off, step, mb, floats(rows * width, step), 0, rows, width, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        public Builder logits(final long step, final int mb, final int rows, final int vocab, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeLogits(buf, off, step, mb, floats(rows * vocab, step + 1), 0, rows, vocab, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        public Builder hello(final int stageIndex)
        {
            final int off = start();
            return end(FrameEncoder.encodeHello(buf, off, 0, new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_STAGE,
                stageIndex, 2, 0, 3, 64, 512, 512, 3, 32, 1 << 20, 0, 500, null, null, null)));
        }

        public Builder error(final long step, final ErrorCode code, final int seqId, final String message)
        {
            final int off = start();
            return end(FrameEncoder.encodeError(buf, off, step, 0, code, seqId, message));
        }

        public Builder endSequence(final long step, final int... seqIds)
        {
            final int off = start();
            return end(FrameEncoder.encodeEndSequence(buf, off, step, 0, seqIds, 0, seqIds.length));
        }

        public Builder shutdown(final long step)
        {
            final int off = start();
            return end(FrameEncoder.encodeShutdown(buf, off, step, 0));
        }

        /** Appends raw bytes. */
        public Builder raw(final byte[] bytes)
        {
            buf.putBytes(length, bytes);
            length += bytes.length;
            return this;
        }

        private Builder entries(final int off, final int[][] entries, final int flags, final int len)
        {
            for (int i = 0; i < entries.length; i++)
            {
                final int[] e = entries[i];
                FrameEncoder.putSequenceEntry(buf, off, i, e[0], e[1], e[2], e[3]);
            }
            if ((flags & FrameHeader.FLAG_TRACE) != 0)
            {
                FrameEncoder.stampTrace(buf, off, 1_000_000_000L + off);
            }
            return end(len);
        }

        public byte[] bytes()
        {
            return Arrays.copyOf(buf.byteArray(), length);
        }
    }

    /** {@code count} distinct little-endian floats in a buffer. */
    public static UnsafeBuffer floats(final int count, final long seed)
    {
        final UnsafeBuffer b = new UnsafeBuffer(new byte[Math.max(4 * count, 1)]);
        for (int i = 0; i < count; i++)
        {
            b.putFloat(4 * i, (float)(seed * 1000 + i) * 0.5f, FrameHeader.ORDER);
        }
        return b;
    }

    /**
     * A stream of 12 frames with HELLO and every message type of the data stream, with and without sequence table and trace stamp (what
     * {@code tnsr-dump --write-example} writes).
     */
    public static byte[] example()
    {
        return new Builder()
            .hello(1)
            .tokens(1, 0, new int[] {1, 2, 3}, 0)
            .tokens(2, 1, new int[] {5, 6, 7, 8}, FrameHeader.FLAG_TRACE, new int[] {7, 0, 3, 1}, new int[] {9, 40, 1, 1})
            .activations(3, 0, 3, 4, 0)
            .activations(4, 1, 4, 2, FrameHeader.FLAG_TRACE, new int[] {7, 3, 3, 1}, new int[] {9, 41, 1, 0})
            .logits(5, 0, 1, 6, FrameHeader.FLAG_TRACE, new int[] {7, 6, 3, 1}, new int[] {9, 42, 1, 0})
            .logits(6, 1, 2, 3, 0)
            .error(7, ErrorCode.OUT_OF_KV_CACHE, 9, "kv cache full: é")
            .error(8, ErrorCode.INTERNAL, ErrorCode.SEQ_ID_NONE, "")
            .endSequence(9, 7, 9)
            .endSequence(10)
            .shutdown(11)
            .bytes();
    }
}
