package io.tnsr.perf.stage;

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
 * Loopback TCP hops of a 16 KiB activation frame (ACTIVATIONS [4, 1024], one sequence entry, trace stamp:
 * 16,464 bytes), as a ping-pong between the benchmark thread and an echo thread; one operation = one round
 * trip = two one-way hops, so one hop is half the reported time.
 * <ul>
 * <li>{@code path = raw}: the floor, the same number of bytes with plain channel read/write loops;</li>
 * <li>{@code path = stage}: both ends move frames with the stage's own code ({@link StageEndpoint}: FrameChannel,
 * FrameValidator, an off-heap slot, trace stamp and hop histogram).</li>
 * </ul>
 * The difference is the stage's own overhead per hop. Sample mode: the perf gate uses the median (p0.50).
 * {@code cpu}: "any" leaves both threads to the scheduler (as separate stage processes are); "last" pins both to
 * the last CPU (what the gate uses: far less spread on a shared machine, see {@link Hop}).
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 -prof gc HopBenchmark
 *   tools/jmh -f 1 -wi 3 -i 5 -p cpu=last HopBenchmark
 * </pre>
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.SampleTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class HopBenchmark {
    public static final int ROWS = 4;
    public static final int WIDTH = 1024;

    @Param({"raw", "stage"})
    public String path;

    @Param({"any"})
    public String cpu;

    private Hop hop;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        hop = switch (path) {
            case "raw" -> {
                int len = new StageEndpoint(ROWS, WIDTH).frameLength();
                yield new Hop(new RawEndpoint(len), new RawEndpoint(len), Hop.cpu(cpu));
            }
            case "stage" -> new Hop(new StageEndpoint(ROWS, WIDTH), new StageEndpoint(ROWS, WIDTH), Hop.cpu(cpu));
            default -> throw new IllegalArgumentException("path must be raw or stage, not " + path);
        };
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
