package io.tnsr.perf.wire;

import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHandler;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.StreamFrameDecoder;
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
 * <li>{@code decodeHeaderOnly}, {@code decodeActivation16k}: {@link StreamFrameDecoder#feed} over a prebuilt frame
 * (validate header and trailer, deliver in place) with a handler that reads every header field.</li>
 * <li>{@code decodeActivation16kSplit}: the same frame fed in two halves, so the decoder copies it into its buffer
 * (the path of a frame spanning socket reads).</li>
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
    private StreamFrameDecoder decoder;
    private FieldReader reader;
    private long step;

    /** Reads every header field of each frame, as a consumer would, into a sum JMH can consume. */
    static final class FieldReader implements FrameHandler
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
        decoder = new StreamFrameDecoder();
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
        decoder.feed(headerOnlyFrame, 0, FrameHeader.HEADER_LENGTH, reader);
        return reader.sum;
    }

    @Benchmark
    public long decodeActivation16k() throws Exception
    {
        decoder.feed(activationFrame, 0, activationFrameLength, reader);
        return reader.sum;
    }

    /**
     * Feeds the 16 KiB ACTIVATIONS frame to this state's decoder with another handler: for benchmarks that take
     * this class as their state (the perf gate's injected regressions).
     */
    public void decodeActivation16k(final FrameHandler handler) throws Exception
    {
        decoder.feed(activationFrame, 0, activationFrameLength, handler);
    }

    @Benchmark
    public long decodeActivation16kSplit() throws Exception
    {
        final int half = activationFrameLength / 2;
        decoder.feed(activationFrame, 0, half, reader);
        decoder.feed(activationFrame, half, activationFrameLength - half, reader);
        return reader.sum;
    }
}
