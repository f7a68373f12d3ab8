package io.tnsr.perf.stage;

import com.lmax.disruptor.BatchEventProcessor;
import com.lmax.disruptor.BatchEventProcessorBuilder;
import com.lmax.disruptor.BlockingWaitStrategy;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.EventHandler;
import com.lmax.disruptor.PhasedBackoffWaitStrategy;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.Sequence;
import com.lmax.disruptor.SequenceBarrier;
import com.lmax.disruptor.WaitStrategy;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;
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
 * The stage's hand-off between its inbound thread and its compute thread, as a ping-pong: the benchmark thread
 * plays the inbound thread (claim a slot of a single-producer Disruptor ring of 16 KiB off-heap slots, write the
 * frame's step id and length, publish), a {@link BatchEventProcessor} thread plays the compute thread (reads the
 * slot, publishes the step id on a reply ring), and the benchmark thread waits for the reply on the reply ring's
 * barrier. One operation is a round trip: two hand-offs. Ring size, slot size and the three wait strategies are
 * those of {@code StageRuntime} ({@code block} = {@link BlockingWaitStrategy}, {@code backoff} =
 * {@code PhasedBackoffWaitStrategy.withLock(20 us, 200 us)}, {@code spin} = {@link BusySpinWaitStrategy}).
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc RingBenchmark          # gc.alloc.rate.norm must be ~0 B/op
 * </pre>
 * (The real {@code FrameSlot} has a package-private constructor, so this ring holds an equivalent slot; the
 * real stage loop, ring included, is measured by {@link StageLoopBenchmark}.) With {@code spin} both threads
 * busy-spin: on a 2-core machine shared with other work that mostly measures the scheduler.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class RingBenchmark {
    /** A slot like the stage's FrameSlot: an off-heap frame buffer plus what the inbound thread notes. */
    static final class Slot {
        final ByteBuffer bytes;
        final UnsafeBuffer buffer;
        int length;
        long receivedNanos;

        Slot(int capacity) {
            bytes = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
            buffer = new UnsafeBuffer(bytes);
        }
    }

    /** The reply: which step the compute thread saw. */
    static final class Reply {
        long step;
    }

    @Param({"block", "backoff", "spin"})
    public String wait;

    private RingBuffer<Slot> ring;
    private RingBuffer<Reply> replies;
    private SequenceBarrier replyBarrier;
    private final Sequence replyConsumed = new Sequence();
    private BatchEventProcessor<Slot> processor;
    private Thread consumer;
    private long step;

    /** The wait strategy a stage uses for {@code mode} (StageRuntime.waitStrategy). */
    static WaitStrategy strategy(WaitMode mode) {
        return switch (mode) {
            case SPIN -> new BusySpinWaitStrategy();
            case BACKOFF -> PhasedBackoffWaitStrategy.withLock(20, 200, TimeUnit.MICROSECONDS);
            case BLOCK -> new BlockingWaitStrategy();
        };
    }

    @Setup(Level.Trial)
    public void setup() {
        WaitMode mode = WaitMode.parse(wait);
        int slotBytes = 56 + 16 * 1024 + 255 * 16 + 8; // header + 16 KiB payload + largest sequence table + trace
        ring = RingBuffer.createSingleProducer(() -> new Slot(slotBytes), PipelineConfig.DEFAULT_RING_SIZE, strategy(mode));
        replies = RingBuffer.createSingleProducer(Reply::new, PipelineConfig.DEFAULT_RING_SIZE, strategy(mode));
        replyBarrier = replies.newBarrier();
        replies.addGatingSequences(replyConsumed);
        EventHandler<Slot> compute = (slot, sequence, endOfBatch) -> {
            long s = replies.next();
            replies.get(s).step = slot.buffer.getLong(8) + slot.length;
            replies.publish(s);
        };
        processor = new BatchEventProcessorBuilder().build(ring, ring.newBarrier(), compute);
        ring.addGatingSequences(processor.getSequence());
        consumer = new Thread(processor, "ring-compute");
        consumer.setDaemon(true);
        consumer.start();
    }

    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        processor.halt();
        consumer.join(5000);
    }

    @Benchmark
    public long handOff() throws Exception {
        long s = ring.next();
        Slot slot = ring.get(s);
        slot.buffer.putLong(8, ++step);
        slot.length = 56;
        slot.receivedNanos = System.nanoTime();
        ring.publish(s);
        long r = replyConsumed.get() + 1;
        replyBarrier.waitFor(r);
        long seen = replies.get(r).step;
        replyConsumed.set(r);
        return seen;
    }
}
