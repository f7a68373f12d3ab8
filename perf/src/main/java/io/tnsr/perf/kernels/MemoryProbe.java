package io.tnsr.perf.kernels;

import java.util.concurrent.TimeUnit;
import org.agrona.BufferUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * A plain memory copy between two off-heap buffers ({@code Unsafe.copyMemory} through Agrona). With
 * {@code size = 16k} (in L1/L2, about the cost of moving one 16 KiB activation frame) it is the reference the perf
 * gate divides codec times by. {@code size = 64m} (beyond the last-level cache) shows DRAM copy bandwidth; the gate
 * does not use it: its speed depends on where each JVM's fresh buffers land (from one fork to the next it varied
 * from 4 to 18 ms on the shared dev machine while the kernels varied by 10%), so the memory-bound figures are divided
 * by {@link StreamProbe}, which reads page-cache memory like the kernels do. GB/s = 2 x size / time (read + write).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class MemoryProbe {
    @Param({"16k", "64m"})
    public String size;

    /** Where the destination starts relative to a page boundary (the source starts on one). */
    static final int DST_SKEW = 2112;

    private UnsafeBuffer src;
    private UnsafeBuffer dst;
    private int bytes;

    /** "16k" = 16384, "64m" = 64 MiB. */
    public static int parseSize(String s) {
        String t = s.trim().toLowerCase(java.util.Locale.ROOT);
        int mult = t.endsWith("k") ? 1 << 10 : t.endsWith("m") ? 1 << 20 : 1;
        return Integer.parseInt(mult == 1 ? t : t.substring(0, t.length() - 1)) * mult;
    }

    @Setup
    public void setup() {
        bytes = parseSize(size);
        // One block, with the destination 2112 bytes past a page boundary relative to the source: two separate
        // allocations land at a random distance from each other, and a distance that is a multiple of 4 KiB
        // (4K aliasing) makes the copy much slower, so the figure would change from run to run.
        java.nio.ByteBuffer block = BufferUtil.allocateDirectAligned(2 * bytes + 4096, 4096);
        src = new UnsafeBuffer(block, 0, bytes);
        dst = new UnsafeBuffer(block, bytes + DST_SKEW, bytes);
        for (int i = 0; i < bytes; i += 8) {
            src.putLong(i, i * 0x9E3779B97F4A7C15L);
        }
        dst.setMemory(0, bytes, (byte) 1);
    }

    @Benchmark
    public UnsafeBuffer copy() {
        dst.putBytes(0, src, 0, bytes);
        return dst;
    }
}
