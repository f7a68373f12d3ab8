package io.tnsr.wire;

import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Test helpers: build streams of frames, decode them with given split points, describe the outcome as text. */
final class TestStreams
{
    private TestStreams()
    {
    }

    /** Appends frames to a growing buffer. */
    static final class Builder
    {
        final ExpandableArrayBuffer buf = new ExpandableArrayBuffer(1024);
        int length;

        /** Starts a frame at the end: returns its offset; the caller encodes there and calls {@link #end}. */
        int start()
        {
            buf.checkLimit(length + 64 * 1024);
            return length;
        }

        Builder end(final int frameLength)
        {
            length += frameLength;
            return this;
        }

        Builder tokens(final long step, final int mb, final int[] ids, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeTokens(buf, off, step, mb, ids, 0, ids.length, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        Builder activations(final long step, final int mb, final int rows, final int width, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeActivations(buf, off, step, mb, floats(rows * width, step), 0, rows, width, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        Builder logits(final long step, final int mb, final int rows, final int vocab, final int flags, final int[]... entries)
        {
            final int off = start();
            final int len = FrameEncoder.encodeLogits(buf, off, step, mb, floats(rows * vocab, step + 1), 0, rows, vocab, entries.length, flags);
            return entries(off, entries, flags, len);
        }

        Builder hello(final int stageIndex)
        {
            final int off = start();
            return end(FrameEncoder.encodeHello(buf, off, 0, HelloPayload.ROLE_STAGE, stageIndex, 2, 0, 3, 64, 512));
        }

        Builder error(final long step, final ErrorCode code, final int seqId, final String message)
        {
            final int off = start();
            return end(FrameEncoder.encodeError(buf, off, step, 0, code, seqId, message));
        }

        Builder endSequence(final long step, final int... seqIds)
        {
            final int off = start();
            return end(FrameEncoder.encodeEndSequence(buf, off, step, 0, seqIds, 0, seqIds.length));
        }

        Builder shutdown(final long step)
        {
            final int off = start();
            return end(FrameEncoder.encodeShutdown(buf, off, step, 0));
        }

        /** Appends raw bytes. */
        Builder raw(final byte[] bytes)
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

        byte[] bytes()
        {
            return Arrays.copyOf(buf.byteArray(), length);
        }
    }

    /** {@code count} distinct little-endian floats in a buffer. */
    static UnsafeBuffer floats(final int count, final long seed)
    {
        final UnsafeBuffer b = new UnsafeBuffer(new byte[Math.max(4 * count, 1)]);
        for (int i = 0; i < count; i++)
        {
            b.putFloat(4 * i, (float)(seed * 1000 + i) * 0.5f, FrameHeader.ORDER);
        }
        return b;
    }

    /** The outcome of decoding a stream: the frames, then the error if any. */
    static final class Decoded
    {
        final List<String> frames = new ArrayList<>();
        FrameFormatException error;

        String errorSummary()
        {
            return error == null ? "ok" : error.reason() + " frame#" + error.frameIndex() + " @" + error.streamOffset();
        }

        @Override
        public String toString()
        {
            return String.join("\n", frames) + "\n=> " + errorSummary();
        }
    }

    /** Describes a delivered frame exactly: position, header fields, every byte. */
    static String describe(final StreamFrameDecoder decoder, final DirectBuffer buf, final int off, final FrameHeader header)
    {
        final int len = (int)header.frameLength();
        final byte[] bytes = new byte[len];
        buf.getBytes(off, bytes);
        return "#" + decoder.frameIndex() + " @" + decoder.frameStreamOffset() + " " + header + " " + hex(bytes);
    }

    /** Decodes {@code stream} fed in chunks ending at each of {@code cuts} (ascending), then the rest, then EOS. */
    static Decoded decode(final byte[] stream, final int maxFrameSize, final int... cuts)
    {
        return decode(stream, maxFrameSize, (buf, off, header) -> { }, cuts);
    }

    /**
     * As {@link #decode(byte[], int, int...)}, also passing each frame to {@code check}, and asserting after every
     * chunk that the decoder's buffer never exceeds the maximum frame size.
     */
    static Decoded decode(final byte[] stream, final int maxFrameSize, final FrameHandler check, final int... cuts)
    {
        final StreamFrameDecoder decoder = new StreamFrameDecoder(maxFrameSize);
        final Decoded result = new Decoded();
        final FrameHandler handler = (buf, off, header) ->
        {
            result.frames.add(describe(decoder, buf, off, header));
            check.onFrame(buf, off, header);
        };
        int from = 0;
        try
        {
            for (int i = 0; i <= cuts.length; i++)
            {
                final int to = i < cuts.length ? cuts[i] : stream.length;
                feedCopy(decoder, stream, from, to, handler);
                if (decoder.bufferCapacity() > maxFrameSize)
                {
                    throw new AssertionError("decoder buffer " + decoder.bufferCapacity() + " > max frame size " + maxFrameSize);
                }
                from = to;
            }
            decoder.endOfStream();
        }
        catch (final FrameFormatException ex)
        {
            result.error = ex;
        }
        return result;
    }

    /** Feeds {@code stream[from, to)} as its own exactly-sized buffer, so the decoder cannot peek past the chunk. */
    static void feedCopy(
        final StreamFrameDecoder decoder, final byte[] stream, final int from, final int to, final FrameHandler handler)
        throws FrameFormatException
    {
        decoder.feed(new UnsafeBuffer(Arrays.copyOfRange(stream, from, to)), 0, to - from, handler);
    }

    static String hex(final byte[] bytes)
    {
        final StringBuilder sb = new StringBuilder(bytes.length * 2);
        for (final byte b : bytes)
        {
            sb.append(Character.forDigit((b >> 4) & 0xF, 16)).append(Character.forDigit(b & 0xF, 16));
        }
        return sb.toString();
    }

    /** Parses "54 4e 53 52 ..." (whitespace and // comments ignored). */
    static byte[] unhex(final String text)
    {
        final String clean = text.replaceAll("//[^\n]*", "").replaceAll("\\s+", "");
        final byte[] out = new byte[clean.length() / 2];
        for (int i = 0; i < out.length; i++)
        {
            out[i] = (byte)Integer.parseInt(clean.substring(2 * i, 2 * i + 2), 16);
        }
        return out;
    }

    /** A stream with every message type, with and without sequence table and trace. */
    static byte[] everyType()
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
