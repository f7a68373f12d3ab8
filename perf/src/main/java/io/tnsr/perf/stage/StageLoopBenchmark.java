package io.tnsr.perf.stage;

import io.tnsr.engine.coordinator.PipelineLinks;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.stage.StageOptions;
import io.tnsr.engine.stage.StageRuntime;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.perf.JitWarmup;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.List;
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
 * A real stage ({@link StageRuntime}: inbound thread, Disruptor ring, compute and outbound handlers, metrics
 * log) running all 4 layers of the synthetic {@code tiny} model, between sockets the benchmark owns: it sends a
 * TOKENS frame (one decode token of one sequence) as the coordinator and reads the LOGITS frame back as the
 * downstream. One operation = one frame through the stage's whole loop, including its (small) compute. Every
 * 200 positions the sequence is ended (END_SEQUENCE, passed through) and a new one starts.
 *
 * <p>Its purpose is the allocation check: run with {@code -prof gc}, whose {@code gc.alloc.rate.norm} counts
 * every thread of the JVM (JMH 1.37 reads the total of all threads' allocation counters), so the stage's
 * threads are included; it must be ~0 B/op. Setup runs frames until the stage's threads are past their JIT warm-up
 * ({@link JitWarmup#untilAllThreadsQuiet}).
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc StageLoopBenchmark
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class StageLoopBenchmark {
    private static final int POSITIONS = 200;
    /**
     * Warm-up, before JMH's: frames until the JVM, every thread counted, allocates at most this per frame for
     * {@link #WARMUP_QUIET_BATCHES} batches of {@link #WARMUP_BATCH_NANOS} in a row. The stage's threads run C1 code
     * (which boxes vectors) until C2 has compiled the compute path; with every thread of the fork pinned to one CPU,
     * as the perf gate runs it, that took longer than JMH's time-based warm-up and its first measured iterations.
     */
    private static final double ALLOWED_BYTES_PER_FRAME = 8;
    private static final long WARMUP_BATCH_NANOS = 100_000_000L;
    private static final int WARMUP_QUIET_BATCHES = 5;
    /** The benchmark sends no heartbeats: a liveness bound longer than any pause between JMH iterations. */
    private static final LinkOptions LINKS = new LinkOptions(LinkKey.NONE, 600_000, 10_000, 10_000, null);

    @Param({"block"})
    public String wait;

    private StageRuntime stage;
    private FrameChannel downstream;
    private FrameChannel upstream;
    private final ByteBuffer in = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer inBuf = new UnsafeBuffer(in);
    private final ByteBuffer out = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer outBuf = new UnsafeBuffer(out);
    private final int[] token = new int[1];
    private final int[] ended = new int[1];
    private long step;
    private int seq;
    private int pos;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        ModelSpec spec = ModelSpec.tiny();
        Path model = ModelCache.get(spec);
        stage = new StageRuntime(StageOptions.builder(model, 0, spec.layers()).ringSize(16).maxFrameBytes(1 << 20)
                .frameLimits(32, 8).wait(WaitMode.parse(wait), -1).kvCacheTokens(4096).stage(0, 1).once(false).link(LINKS).build());
        int port = stage.listen();
        stage.start();
        PipelineConfig pc = new PipelineConfig("127.0.0.1", List.of(new StageSpec(0, spec.layers(), 0, List.of(), null)), 16,
                1 << 20, 32, 8, WaitMode.BLOCK, 4096, 0);
        PipelineLinks.Links links = PipelineLinks.open(List.of("127.0.0.1:" + port), pc, stage.range().config(),
                stage.fingerprint().bytes(), LINKS, 10_000);
        upstream = links.toFirst();
        downstream = links.fromLast();
        JitWarmup.untilAllThreadsQuiet("the stage loop", this::frameUnchecked, ALLOWED_BYTES_PER_FRAME,
                WARMUP_BATCH_NANOS, WARMUP_QUIET_BATCHES, JitWarmup.BOUND_NANOS * 2);
    }

    private void frameUnchecked() {
        try {
            frame();
        } catch (IOException | FrameFormatException e) {
            throw new IllegalStateException("the stage failed during warm-up: " + e.getMessage(), e);
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws IOException {
        upstream.close();
        stage.close();
        downstream.close();
    }

    @Benchmark
    public long frame() throws IOException, FrameFormatException {
        if (pos == POSITIONS) {
            ended[0] = seq;
            upstream.write(out, FrameEncoder.encodeEndSequence(outBuf, 0, ++step, 0, ended, 0, 1));
            expect(MessageType.END_SEQUENCE);
            seq++;
            pos = 0;
        }
        token[0] = 3 + (pos * 31 + seq) % 500;
        int len = FrameEncoder.encodeTokens(outBuf, 0, ++step, 0, token, 0, 1, 1, 0);
        FrameEncoder.putSequenceEntry(outBuf, 0, 0, seq, pos, 1, SequenceTable.WANT_LOGITS);
        upstream.write(out, len);
        pos++;
        return expect(MessageType.LOGITS);
    }

    private long expect(MessageType type) throws IOException, FrameFormatException {
        if (downstream.read(in) == FrameChannel.END_OF_STREAM) {
            throw new IOException("the stage closed its downstream connection: " + stage.failure());
        }
        if (FrameHeader.messageTypeCode(inBuf, 0) != type.code()) {
            throw new IOException("expected " + type + " from the stage, got message type " + FrameHeader.messageTypeCode(inBuf, 0));
        }
        return FrameHeader.stepId(inBuf, 0);
    }
}
