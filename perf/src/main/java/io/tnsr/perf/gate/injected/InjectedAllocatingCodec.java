package io.tnsr.perf.gate.injected;

import io.tnsr.perf.wire.CodecBenchmark;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import java.util.concurrent.TimeUnit;
import org.agrona.DirectBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Injected regression: the 16 KiB frame decode of {@link CodecBenchmark#decodeActivation16k()}, but the frame
 * handler turns every frame into a freshly allocated record (a tempting "convenience" API), which escapes: a
 * few dozen bytes allocated per frame.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class InjectedAllocatingCodec {
    /** What the allocating handler builds for each frame. */
    public record DecodedFrame(MessageType type, long stepId, long microBatchId, long payloadOffset, long payloadLength) {
    }

    /** Keeps the last record, so the allocation cannot be optimized away. */
    @State(Scope.Thread)
    public static class Handler implements CodecBenchmark.FrameVisitor {
        DecodedFrame last;

        @Override
        public void onFrame(DirectBuffer buffer, int offset, FrameHeader header) {
            last = new DecodedFrame(header.messageType(), header.stepId(), header.microBatchId(), header.payloadOffset(),
                    header.payloadLength());
        }
    }

    @Benchmark
    public Object decodeActivation16k(CodecBenchmark codec, Handler handler) throws Exception {
        codec.decodeActivation16k(handler);
        return handler.last;
    }
}
