package io.tnsr.perf.kernels;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

/**
 * The perf gate's reference for memory-bound figures: reads a 64 MiB F32 matrix mapped from a GGUF file (the
 * 4096x4096 file of {@link MatrixFiles}, in the page cache) with vector loads, summing it: the memory stream of
 * a matrix-vector product without its arithmetic, from the same kind of memory the weights live in.
 * GB/s = 64 MiB / time.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class StreamProbe {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    public static final int ROWS = 4096;
    public static final int COLS = 4096;

    private GgufFile file;
    private ByteBuffer data;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        file = GgufFile.open(MatrixFiles.get(GgmlType.F32, ROWS, COLS));
        data = file.map(MatrixFiles.TENSOR);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        file.close();
    }

    @Benchmark
    public float read() {
        FloatVector acc = FloatVector.zero(F);
        int bytes = ROWS * COLS * 4;
        int step = F.length() * 4;
        for (int off = 0; off < bytes; off += step) {
            acc = acc.add(FloatVector.fromByteBuffer(F, data, off, LE));
        }
        return acc.reduceLanes(VectorOperators.ADD);
    }
}
