package io.tnsr.perf.gate.injected;

import io.tnsr.perf.stage.Hop;
import io.tnsr.perf.stage.HopBenchmark;
import io.tnsr.perf.stage.StageEndpoint;
import io.tnsr.wire.FrameEncoder;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Injected regression: {@link HopBenchmark}'s {@code stage} path, but each side stages every outgoing frame
 * through an extra copy (slot buffer to a heap array to a separate off-heap write buffer, as code that
 * "just copies into a byte[]" before writing would): one extra copy of the 16 KiB frame per one-way hop.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class InjectedCopyingHop {
    /** A stage endpoint whose send copies the frame out through the heap first. */
    static final class CopyingEndpoint extends StageEndpoint {
        private final byte[] heap;
        private final ByteBuffer staging;
        private final ByteBuffer[] gather;

        CopyingEndpoint(int rows, int width) {
            super(rows, width);
            heap = new byte[slotBytes.capacity()];
            staging = ByteBuffer.allocateDirect(slotBytes.capacity()).order(ByteOrder.LITTLE_ENDIAN);
            gather = new ByteBuffer[] {ByteBuffer.allocateDirect(16), staging};
        }

        @Override
        public void send(SocketChannel ch) throws IOException {
            FrameEncoder.stampTrace(slot, 0, System.nanoTime());
            slot.getBytes(0, heap, 0, length);
            staging.clear();
            staging.put(heap, 0, length);
            channel(ch).write(gather, 0, length);
        }
    }

    @Param({"any"})
    public String cpu;

    private Hop hop;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        hop = new Hop(new CopyingEndpoint(HopBenchmark.ROWS, HopBenchmark.WIDTH),
                new CopyingEndpoint(HopBenchmark.ROWS, HopBenchmark.WIDTH), Hop.cpu(cpu));
    }

    @TearDown(Level.Trial)
    public void tearDown() throws Exception {
        hop.close();
    }

    @Benchmark
    public void roundTrip() throws Exception {
        hop.roundTrip();
    }
}
