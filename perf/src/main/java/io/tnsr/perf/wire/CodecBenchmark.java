package io.tnsr.perf.wire;

import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import org.agrona.BufferUtil;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

import java.nio.ByteBuffer;
import java.nio.channels.ReadableByteChannel;
import java.util.concurrent.TimeUnit;

/**
 * Encode and decode cost of the TNSR codec, and its allocation (run with {@code -prof gc}: gc.alloc.rate.norm must
 * be about 0 B/op):
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc CodecBenchmark
 * </pre>
 * <ul>
 * <li>{@code encodeHeaderOnly}: a 56-byte SHUTDOWN header written with {@link FrameEncoder#encodeHeader}.</li>
 * <li>{@code encodeActivation16k}: an ACTIVATIONS [4, 1024] frame: header + copy of the 16 KiB payload.</li>
 * <li>{@code decodeHeaderOnly}, {@code decodeActivation16k}: {@link FrameChannel#read} of a prebuilt frame from an
 * in-memory channel into a slot (read 56 bytes, validate the header, read the rest, validate the trailer: a stage's
 * inbound path with the socket's copy but without the kernel), then every header field read.</li>
 * <li>{@code decodeActivation16kSplit}: the same frame arriving in two reads of half each.</li>
 * </ul>
 * Not final: JMH generates subclasses of benchmark classes.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class CodecBenchmark
{
    private static final int ROWS = 4;
    private static final int HIDDEN = 1024; // 4 x 1024 x 4 bytes = 16 KiB

    private UnsafeBuffer out;
    private UnsafeBuffer activations;
    private UnsafeBuffer headerOnlyFrame;
    private UnsafeBuffer activationFrame;
    private int activationFrameLength;
    private Replay headerOnlyStream;
    private Replay activationStream;
    private Replay splitStream;
    private FrameChannel headerOnlyChannel;
    private FrameChannel activationChannel;
    private FrameChannel splitChannel;
    private ByteBuffer slot;
    private UnsafeBuffer slotView;
    private FieldReader reader;
    private long step;
    private final FrameHeader header = new FrameHeader();

    /** Reads every header field of each frame, as a consumer would, into a sum JMH can consume. */
    static final class FieldReader implements FrameVisitor
    {
        long sum;

        @Override
        public void onFrame(final DirectBuffer buffer, final int offset, final FrameHeader header)
        {
            final MessageType type = header.messageType();
            sum += type.code() + header.stepId() + header.microBatchId() + header.rank() + header.payloadLength() +
                header.dim(0) + header.dim(1) + header.dim(2) + header.dim(3) + header.sequenceCount() +
                (header.hasTrace() ? header.traceNanos() : 0) + header.payloadOffset();
        }
    }

    @Setup
    public void setup()
    {
        // One block for the source and the destination of the 16 KiB copy, at a fixed distance that is not a multiple
        // of 4 KiB: two separate allocations land at a random distance, and when it is a multiple of 4 KiB (4K
        // aliasing) the copy is markedly slower, so encodeActivation16k changed from one JVM to the next.
        final java.nio.ByteBuffer block = BufferUtil.allocateDirectAligned(ROWS * HIDDEN * 4 + 2048 + 64 * 1024, 4096);
        activations = new UnsafeBuffer(block, 0, ROWS * HIDDEN * 4);
        out = new UnsafeBuffer(block, ROWS * HIDDEN * 4 + 2048, 64 * 1024);
        for (int i = 0; i < ROWS * HIDDEN; i++)
        {
            activations.putFloat(4 * i, i * 0.001f, FrameHeader.ORDER);
        }
        headerOnlyFrame = new UnsafeBuffer(BufferUtil.allocateDirectAligned(64, 64));
        FrameEncoder.encodeShutdown(headerOnlyFrame, 0, 1, 0);
        activationFrame = new UnsafeBuffer(BufferUtil.allocateDirectAligned(64 * 1024, 64));
        activationFrameLength = FrameEncoder.encodeActivations(activationFrame, 0, 7, 1, activations, 0, ROWS, HIDDEN, 0, 0);
        headerOnlyStream = new Replay(headerOnlyFrame, FrameHeader.HEADER_LENGTH, FrameHeader.HEADER_LENGTH);
        activationStream = new Replay(activationFrame, activationFrameLength, activationFrameLength);
        splitStream = new Replay(activationFrame, activationFrameLength, activationFrameLength / 2);
        headerOnlyChannel = FrameChannel.reading(headerOnlyStream, "header-only frames", FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        activationChannel = FrameChannel.reading(activationStream, "16 KiB frames", FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        splitChannel = FrameChannel.reading(splitStream, "16 KiB frames in halves", FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        slot = BufferUtil.allocateDirectAligned(64 * 1024, 64);
        slotView = new UnsafeBuffer(slot);
        reader = new FieldReader();
    }

    @Benchmark
    public int encodeHeaderOnly()
    {
        FrameEncoder.encodeHeader(out, 0, MessageType.SHUTDOWN, step++, 3, 0, 0, 0, 0, 0, 0, 0, 0);
        return FrameHeader.HEADER_LENGTH;
    }

    @Benchmark
    public int encodeActivation16k()
    {
        return FrameEncoder.encodeActivations(out, 0, step++, 3, activations, 0, ROWS, HIDDEN, 0, 0);
    }

    @Benchmark
    public long decodeHeaderOnly() throws Exception
    {
        headerOnlyStream.rewind();
        return decode(headerOnlyChannel, reader);
    }

    @Benchmark
    public long decodeActivation16k() throws Exception
    {
        return decodeActivation16k(reader);
    }

    /**
     * Reads the 16 KiB ACTIVATIONS frame through this state's channel and passes it to {@code visitor}: for benchmarks
     * that take this class as their state (the perf gate's injected regressions).
     */
    public long decodeActivation16k(final FrameVisitor visitor) throws Exception
    {
        activationStream.rewind();
        return decode(activationChannel, visitor);
    }

    @Benchmark
    public long decodeActivation16kSplit() throws Exception
    {
        splitStream.rewind();
        return decode(splitChannel, reader);
    }

    private long decode(final FrameChannel channel, final FrameVisitor visitor) throws Exception
    {
        final int length = channel.read(slot);
        visitor.onFrame(slotView, 0, header.wrap(slotView, 0));
        return length + reader.sum;
    }

    /** Told of each frame read. */
    @FunctionalInterface
    public interface FrameVisitor
    {
        void onFrame(DirectBuffer buffer, int offset, FrameHeader header);
    }

    /** One prebuilt frame, served again after each {@link #rewind()}, at most {@code chunk} bytes per read. */
    static final class Replay implements ReadableByteChannel
    {
        private final ByteBuffer frame;
        private final int length;
        private final int chunk;
        private int position;

        Replay(final UnsafeBuffer frame, final int length, final int chunk)
        {
            this.frame = frame.byteBuffer().duplicate();
            this.length = length;
            this.chunk = chunk;
            this.position = length;
        }

        void rewind()
        {
            position = 0;
        }

        @Override
        public int read(final ByteBuffer dst)
        {
            if (position == length)
            {
                return -1;
            }
            final int n = Math.min(dst.remaining(), Math.min(chunk - position % chunk, length - position));
            dst.put(dst.position(), frame, position, n);
            dst.position(dst.position() + n);
            position += n;
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
}
