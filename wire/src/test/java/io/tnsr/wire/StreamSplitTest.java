package io.tnsr.wire;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/** A stream decodes to the same frames (or the same error) however its bytes are split into chunks. */
class StreamSplitTest
{
    private static final int MAX = FrameHeader.DEFAULT_MAX_FRAME_SIZE;

    @Test
    void everySplitPointDecodesIdentically()
    {
        final byte[] stream = FrameStreams.example();
        final TestStreams.Decoded whole = TestStreams.decode(stream, MAX);
        assertNull(whole.error, whole::toString);
        assertEquals(12, whole.frames.size());
        for (int cut = 0; cut <= stream.length; cut++)
        {
            assertEquals(whole.toString(), TestStreams.decode(stream, MAX, cut).toString(), "split at " + cut);
        }
    }

    @Test
    void oneByteAtATimeDecodesIdentically()
    {
        final byte[] stream = FrameStreams.example();
        final int[] cuts = new int[stream.length - 1];
        Arrays.setAll(cuts, i -> i + 1);
        assertEquals(TestStreams.decode(stream, MAX).toString(), TestStreams.decode(stream, MAX, cuts).toString());
    }

    @Test
    void randomMultiWaySplitsDecodeIdentically()
    {
        final byte[] stream = FrameStreams.example();
        final String expected = TestStreams.decode(stream, MAX).toString();
        final SplittableRandom random = new SplittableRandom(42);
        for (int i = 0; i < 300; i++)
        {
            final int[] cuts = random.ints(1 + random.nextInt(8), 0, stream.length + 1).sorted().toArray();
            assertEquals(expected, TestStreams.decode(stream, MAX, cuts).toString(), () -> Arrays.toString(cuts));
        }
    }

    @Test
    void malformedStreamFailsIdenticallyAtEverySplitPoint()
    {
        final byte[] good = FrameStreams.example();
        // Garbage after the valid frames: 60 bytes of a HELLO with a bad magic; 40 bytes of a HELLO (truncated header);
        // 80 of its 88 bytes (truncated payload).
        final String[] expected = {"BAD_MAGIC frame#12 @" + good.length, "TRUNCATED_HEADER frame#12 @" + (good.length + 40),
            "TRUNCATED_PAYLOAD frame#12 @" + (good.length + 80)};
        final int[] garbage = {60, 40, 80};
        for (int g = 0; g < garbage.length; g++)
        {
            final byte[] stream = Arrays.copyOf(good, good.length + garbage[g]);
            System.arraycopy(good, 0, stream, good.length, garbage[g]);
            if (g == 0)
            {
                stream[good.length] = 'X';
            }
            final TestStreams.Decoded whole = TestStreams.decode(stream, MAX);
            assertEquals(expected[g], whole.errorSummary());
            assertEquals(12, whole.frames.size());
            for (int cut = 0; cut <= stream.length; cut++)
            {
                assertEquals(whole.toString(), TestStreams.decode(stream, MAX, cut).toString(), "split at " + cut);
            }
        }
    }

    @Test
    void aFrameLargerThanTheBufferIsSkippedWholeAndTheNextOneIsRead() throws Exception
    {
        final int rows = 64;
        final int width = 1024; // 256 KiB payload: beyond the 64 KiB buffer
        final byte[] stream = new FrameStreams.Builder().activations(1, 0, rows, width, 0).shutdown(2).bytes();
        final FrameChannel channel = FrameChannel.reading(new TestStreams.Chunks(stream, 1, 1000), "the test stream", 1 << 20);
        final ByteBuffer slot = ByteBuffer.allocate(64 * 1024).order(FrameHeader.ORDER);
        final int first = channel.read(slot);
        assertEquals(56 + rows * width * 4, first, "the frame's length, larger than the buffer");
        assertEquals(MessageType.ACTIVATIONS, new FrameHeader().wrap(new UnsafeBuffer(slot), 0).messageType(), "its header is there");
        assertEquals(56, channel.read(slot), "the SHUTDOWN after it");
        assertEquals(MessageType.SHUTDOWN, new FrameHeader().wrap(new UnsafeBuffer(slot), 0).messageType());
        assertEquals(1, channel.frameIndex());
        assertEquals(first, channel.frameStreamOffset());
        assertEquals(FrameChannel.END_OF_STREAM, channel.read(slot));
    }

    @Test
    void aStreamEndingAfterAValidHeaderIsATruncatedPayloadNeverTheLastFramesBytes() throws Exception
    {
        final byte[] frames = new FrameStreams.Builder().tokens(1, 0, new int[] {1, 2, 3}, 0).tokens(2, 0, new int[] {4, 5, 6}, 0).bytes();
        final int firstLength = frames.length / 2;
        final byte[] stream = Arrays.copyOf(frames, firstLength + FrameHeader.HEADER_LENGTH); // the second frame's header only
        final FrameChannel channel = FrameChannel.reading(new TestStreams.Chunks(stream, 1), "stage 1", 1 << 20);
        final ByteBuffer slot = ByteBuffer.allocate(4096).order(FrameHeader.ORDER);
        assertEquals(firstLength, channel.read(slot));
        final FrameFormatException e = assertThrows(FrameFormatException.class, () -> channel.read(slot));
        assertEquals(FrameFormatException.Reason.TRUNCATED_PAYLOAD, e.reason());
        assertEquals(1, e.frameIndex());
        assertEquals(firstLength + FrameHeader.HEADER_LENGTH, e.streamOffset());
        assertTrue(e.getMessage().contains("stream from stage 1 ended after 56 of the " + firstLength + " frame bytes"), e::getMessage);
        assertEquals(0, channel.frameIndex(), "no second frame was returned");
    }

    @Test
    void steadyStateReadsAllocateNothing() throws Exception
    {
        final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        assumeAllocationCounting(threads);
        final byte[] stream = FrameStreams.example();
        // Reads of 37 bytes at most: most frames take several reads, some start mid-read.
        final int[] cuts = new int[stream.length / 37];
        Arrays.setAll(cuts, i -> (i + 1) * 37);
        final ByteBuffer slot = ByteBuffer.allocateDirect(4096).order(FrameHeader.ORDER);
        final FrameHeader header = new FrameHeader();
        final UnsafeBuffer view = new UnsafeBuffer(slot);
        final FrameChannel warm = FrameChannel.reading(new TestStreams.Chunks(stream, 2000, cuts), "warm-up", 1 << 20);
        final long[] sum = {0};
        readAll(warm, slot, header, view, sum);
        final FrameChannel measured = FrameChannel.reading(new TestStreams.Chunks(stream, 2000, cuts), "measured", 1 << 20);
        final long tid = Thread.currentThread().getId();
        final long start = threads.getThreadAllocatedBytes(tid);
        final long frames = readAll(measured, slot, header, view, sum);
        final long allocated = threads.getThreadAllocatedBytes(tid) - start;
        assertEquals(2000 * 12, frames);
        // A per-frame allocation would be >= 16 B x 24,000 frames; allow a few stray bytes (JIT/runtime, not per frame).
        assertTrue(allocated < 4096, "24,000 frames allocated " + allocated + " bytes");
        assertTrue(sum[0] != 0);
    }

    private static long readAll(
        final FrameChannel channel, final ByteBuffer slot, final FrameHeader header, final UnsafeBuffer view, final long[] sum)
        throws Exception
    {
        long frames = 0;
        while (channel.read(slot) != FrameChannel.END_OF_STREAM)
        {
            header.wrap(view, 0);
            sum[0] += header.stepId() + header.payloadLength() + header.dim(0) + header.sequenceCount();
            frames++;
        }
        return frames;
    }

    private static void assumeAllocationCounting(final com.sun.management.ThreadMXBean threads)
    {
        org.junit.jupiter.api.Assumptions.assumeTrue(threads.isThreadAllocatedMemorySupported());
        threads.setThreadAllocatedMemoryEnabled(true);
    }
}
