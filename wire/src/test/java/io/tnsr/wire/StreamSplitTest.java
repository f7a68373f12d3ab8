package io.tnsr.wire;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.lang.management.ManagementFactory;
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
        final byte[] stream = TestStreams.everyType();
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
        final byte[] stream = TestStreams.everyType();
        final int[] cuts = new int[stream.length - 1];
        Arrays.setAll(cuts, i -> i + 1);
        assertEquals(TestStreams.decode(stream, MAX).toString(), TestStreams.decode(stream, MAX, cuts).toString());
    }

    @Test
    void randomMultiWaySplitsDecodeIdentically()
    {
        final byte[] stream = TestStreams.everyType();
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
        final byte[] good = TestStreams.everyType();
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
    void frameSpanningChunksIsBufferedAndLongFramesGrowTheBufferUpToTheFrameOnly() throws Exception
    {
        final int rows = 64;
        final int width = 1024; // 256 KiB payload: beyond the initial 64 KiB buffer
        final byte[] stream = new TestStreams.Builder().activations(1, 0, rows, width, 0).shutdown(2).bytes();
        final StreamFrameDecoder decoder = new StreamFrameDecoder(1 << 20);
        assertEquals(StreamFrameDecoder.INITIAL_CAPACITY, decoder.bufferCapacity());
        final int[] count = {0};
        TestStreams.feedCopy(decoder, stream, 0, 1000, (b, o, h) -> count[0]++);
        assertEquals(1000, decoder.bufferedBytes());
        assertEquals(56 + rows * width * 4, decoder.bufferCapacity(), "grown to the frame, not to the max");
        TestStreams.feedCopy(decoder, stream, 1000, stream.length, (b, o, h) ->
        {
            if (count[0]++ == 0)
            {
                assertEquals(MessageType.ACTIVATIONS, h.messageType());
                assertEquals(0.5f * (1000 + rows * width - 1), FramePayload.f32(b, o, rows * width - 1));
            }
        });
        decoder.endOfStream();
        assertEquals(2, count[0]);
        assertEquals(2, decoder.frameIndex());
        assertEquals(stream.length, decoder.frameStreamOffset());

        final StreamFrameDecoder small = new StreamFrameDecoder(100);
        assertEquals(100, small.bufferCapacity(), "initial buffer capped at the max frame size");
    }

    @Test
    void steadyStateFeedAllocatesNothing() throws Exception
    {
        final com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean)ManagementFactory.getThreadMXBean();
        assumeAllocationCounting(threads);
        final byte[] stream = TestStreams.everyType();
        // Fixed chunks: some frames arrive whole (zero copy), some span chunks (buffered).
        final int chunk = 37;
        final UnsafeBuffer[] chunks = new UnsafeBuffer[(stream.length + chunk - 1) / chunk];
        for (int i = 0; i < chunks.length; i++)
        {
            chunks[i] = new UnsafeBuffer(Arrays.copyOfRange(stream, i * chunk, Math.min(stream.length, (i + 1) * chunk)));
        }
        final UnsafeBuffer whole = new UnsafeBuffer(stream);
        final StreamFrameDecoder decoder = new StreamFrameDecoder();
        final long[] sum = {0};
        final FrameHandler handler = (buf, off, h) -> sum[0] += h.stepId() + h.payloadLength() + h.dim(0) + h.sequenceCount();

        for (int round = 0; round < 2000; round++)
        {
            runRound(decoder, chunks, whole, handler);
        }
        final long tid = Thread.currentThread().getId();
        final long baselineStart = threads.getThreadAllocatedBytes(tid);
        final long baseline = threads.getThreadAllocatedBytes(tid) - baselineStart;
        final long start = threads.getThreadAllocatedBytes(tid);
        for (int round = 0; round < 2000; round++)
        {
            runRound(decoder, chunks, whole, handler);
        }
        final long allocated = threads.getThreadAllocatedBytes(tid) - start;
        // A per-frame allocation would be >= 16 B x 48,000 frames; allow a few stray bytes (JIT/runtime, not per frame).
        assertTrue(allocated - baseline < 4096, "2000 rounds of 24 frames allocated " + allocated + " bytes");
        assertTrue(sum[0] != 0);
    }

    private static void runRound(
        final StreamFrameDecoder decoder, final UnsafeBuffer[] chunks, final UnsafeBuffer whole, final FrameHandler handler)
        throws FrameFormatException
    {
        for (final UnsafeBuffer c : chunks)
        {
            decoder.feed(c, 0, c.capacity(), handler);
        }
        decoder.feed(whole, 0, whole.capacity(), handler);
        decoder.endOfStream();
    }

    private static void assumeAllocationCounting(final com.sun.management.ThreadMXBean threads)
    {
        org.junit.jupiter.api.Assumptions.assumeTrue(threads.isThreadAllocatedMemorySupported());
        threads.setThreadAllocatedMemoryEnabled(true);
    }
}
