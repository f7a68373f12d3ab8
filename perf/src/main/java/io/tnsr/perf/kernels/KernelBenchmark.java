package io.tnsr.perf.kernels;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.perf.JitWarmup;
import java.util.Locale;
import java.util.SplittableRandom;
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
 * The engine's weight-matrix kernels ({@link WeightMatrix#matmul}) per tensor type and shape: {@code tokens = 1}
 * is decode's matrix-vector product, {@code tokens = 16} a matrix-matrix product (a prefill block or a batch).
 * The matrix is mapped from a synthetic GGUF file ({@link MatrixFiles}); a type the engine cannot load yet fails
 * its setup with "... is not supported by this engine yet, so its kernel benchmarks are skipped".
 * <pre>
 *   tools/jmh -f 1 -wi 3 -i 5 KernelBenchmark                       # every type, shape and token count
 *   tools/jmh -p type=F32,F16 -p shape=4096x4096 -p tokens=1 KernelBenchmark
 *   tools/kernel-bench                                              # the same, as a GFLOP/s and GB/s table
 * </pre>
 * Setup calls the kernel until C2 runs it ({@link JitWarmup}), so that the measured code is the steady state's
 * however slowly the JIT gets there. JMH reports time per call. GFLOP/s = 2 x rows x cols x tokens / time; GB/s =
 * the matrix's bytes in its own type (rows x cols / block size x block bytes) / time, i.e. the weight stream
 * (activations are ignored).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MICROSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(1)
public class KernelBenchmark {
    @Param({"F32", "F16", "Q8_0", "Q4_0", "Q4_K", "Q6_K"}) // the shapes' rows (768, 4096) hold whole 256-element K-quant blocks
    public String type;

    @Param({"768x768", "2048x768", "4096x4096"})
    public String shape;

    @Param({"1", "16"})
    public int tokens;

    protected WeightMatrix w;
    protected float[] x;
    protected float[] out;
    private MatrixFiles.Loaded loaded;

    @Setup(Level.Trial)
    public void setup() throws Exception {
        int[] rc = MatrixFiles.shape(shape);
        loaded = MatrixFiles.load(GgmlType.valueOf(type.toUpperCase(Locale.ROOT)), rc[0], rc[1]);
        w = loaded.matrix();
        x = new float[tokens * w.cols()];
        SplittableRandom r = new SplittableRandom(11);
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (r.nextDouble() * 2 - 1);
        }
        out = new float[tokens * w.rows()];
        JitWarmup.untilAllocationFree(type + " " + shape + " x " + tokens, this::matmul);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        if (loaded != null) {
            loaded.close();
        }
    }

    @Benchmark
    public float[] matmul() {
        w.matmul(x, 0, tokens, out, 0);
        return out;
    }

    /** Floating-point operations of one call: a multiply and an add per weight and token. */
    public static double flops(int rows, int cols, int tokens) {
        return 2.0 * rows * cols * tokens;
    }

    /** Bytes of the matrix in its own type: what one call streams from memory (or cache) at least once. */
    public static double weightBytes(GgmlType type, int rows, int cols) {
        return type.bytesFor((long) rows * cols);
    }
}
