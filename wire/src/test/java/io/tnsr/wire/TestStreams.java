package io.tnsr.wire;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/** Test helpers: read streams of frames ({@link FrameStreams})  through a {@link FrameChannel} split at given points, describe the outcome as text. */
final class TestStreams
{
    private TestStreams()
    {
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

    /** Told of each frame a decode delivers. */
    @FunctionalInterface
    interface FrameCheck
    {
        void onFrame(DirectBuffer buffer, int offset, FrameHeader header);
    }

    /**
     * A byte stream served in chunks: one read never crosses the next cut, so a reader sees the stream split exactly
     * there; {@code repeat} times over, then the end of the stream. Allocates nothing per read.
     */
    static final class Chunks implements ReadableByteChannel
    {
        private final byte[] stream;
        private final int[] cuts;
        private int repeat;
        private int pos;
        private int cut;

        Chunks(final byte[] stream, final int repeat, final int... cuts)
        {
            this.stream = stream;
            this.cuts = cuts;
            this.repeat = repeat;
        }

        @Override
        public int read(final ByteBuffer dst)
        {
            if (pos == stream.length)
            {
                if (--repeat <= 0)
                {
                    return -1;
                }
                pos = 0;
                cut = 0;
            }
            while (cut < cuts.length && cuts[cut] <= pos)
            {
                cut++;
            }
            final int end = cut < cuts.length ? cuts[cut] : stream.length;
            final int n = Math.min(dst.remaining(), end - pos);
            dst.put(stream, pos, n);
            pos += n;
            return n;
        }

        @Override
        public boolean isOpen()
        {
            return true;
        }

        @Override
        public void close()
        {
        }
    }

    /** Describes a delivered frame exactly: position, header fields, every byte. */
    static String describe(final long index, final long offset, final DirectBuffer buf, final int off, final FrameHeader header)
    {
        final int len = (int)header.frameLength();
        final byte[] bytes = new byte[len];
        buf.getBytes(off, bytes);
        return "#" + index + " @" + offset + " " + header + " " + hex(bytes);
    }

    /** Decodes {@code stream} read in chunks ending at each of {@code cuts} (ascending), then the rest, then EOS. */
    static Decoded decode(final byte[] stream, final int maxFrameSize, final int... cuts)
    {
        return decode(stream, maxFrameSize, (buf, off, header) -> { }, cuts);
    }

    /**
     * As {@link #decode(byte[], int, int...)}, also passing each frame to {@code check}. The frame buffer grows to the
     * frame (as tnsr-dump's does), and never beyond the maximum frame size.
     */
    static Decoded decode(final byte[] stream, final int maxFrameSize, final FrameCheck check, final int... cuts)
    {
        final FrameChannel channel = FrameChannel.reading(new Chunks(stream, 1, cuts), "the test stream", maxFrameSize);
        final Decoded result = new Decoded();
        final FrameHeader header = new FrameHeader();
        ByteBuffer frame = ByteBuffer.allocate(Math.min(64 * 1024, maxFrameSize)).order(FrameHeader.ORDER);
        try
        {
            int length;
            while ((length = channel.readHeader(frame)) != FrameChannel.END_OF_STREAM)
            {
                if (length > frame.capacity())
                {
                    if (length > maxFrameSize)
                    {
                        throw new AssertionError("frame of " + length + " bytes > max frame size " + maxFrameSize);
                    }
                    final ByteBuffer larger = ByteBuffer.allocate(length).order(FrameHeader.ORDER);
                    larger.put(0, frame, 0, FrameHeader.HEADER_LENGTH);
                    frame = larger;
                }
                channel.readRest(frame);
                final UnsafeBuffer view = new UnsafeBuffer(frame);
                header.wrap(view, 0);
                result.frames.add(describe(channel.frameIndex(), channel.frameStreamOffset(), view, 0, header));
                check.onFrame(view, 0, header);
            }
        }
        catch (final FrameFormatException ex)
        {
            result.error = ex;
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
        return result;
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

}
