package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import java.nio.ByteBuffer;

/**
 * A weight matrix of {@code rows x cols}, row-major, a ggml tensor of dims {@code [cols, rows]}. F16 is read in
 * place from the memory-mapped GGUF file ({@link F16Matrix}, 4-row tiles); every other type is repacked at load into
 * row panels on the heap (lanes are rows): F32 ({@link PanelKernels}), BF16 at 16 bits ({@link BF16Matrix}), the types
 * of one small integer per element and a float scale per 16 or 32 elements, Q8_0, Q6_K, IQ4_NL and IQ4_XS, as
 * int8 ({@link Int8PanelMatrix}, via {@link Q6KBlocks} and {@link Int8Blocks}; IQ4_NL and IQ4_XS as their 4-bit
 * indices where a table lookup is cheap, {@link Iq4PanelMatrix}), the 4-bit Q4_0, Q4_1 and Q4_K
 * ({@link Q4_0Matrix}, {@link Q4KMatrix}), Q5_0 as 4 bits and a bit plane ({@link Q5_0Matrix}), Q5_K
 * ({@link Q5KMatrix}), Q2_K ({@link Q2KMatrix}), Q3_K ({@link Q3KMatrix}). One final subclass
 * per layout; each widens its own weights in registers,
 * never into a dequantized copy of the matrix.
 *
 * <p>The one operation the forward pass needs is {@link #matmul}: {@code n} input vectors in, {@code n}
 * output vectors out. With n = 1 it is decode's matrix-vector product; with n > 1 (a prefill block, or a
 * micro-batch of sequences) each weight loaded serves several tokens. For every token the products are summed
 * in the same order whatever n is, so results do not depend on how tokens were grouped: the order is the
 * type's (F32 and BF16: one FMA chain over the columns in order, lanes being rows; the int8 types: the same per unit
 * of 16 or 32 elements, then the unit's scale; Q4_0, Q5_0, Q4_1, Q4_K, Q5_K, Q2_K and Q3_K: an exact integer sum per
 * block against 8-bit activations, then the scales and, but for Q4_0, Q5_0 and Q3_K, a min term; F16: FMA chains over L-lane column
 * chunks, then a lane reduction in lane order, see {@link TileKernels}), and every kernel of the type follows it.
 *
 * <p>Performance caveat (JDK 17): a kernel inlined into a large caller (a whole layer's forward) can push C2 past
 * its node budget ({@code NodeCountInliningCutoff}); the Vector API calls it then leaves out of line return boxed
 * vectors, megabytes per token. The launchers and tests run with
 * {@code -XX:CompileCommand=dontinline,io.tnsr.engine.model.*::matvec} (and {@code ::matmulTokens}, and
 * {@code ::subSums}, the integer pass of the batched kernels of Q5_0, Q5_K, Q2_K, Q3_K and, four tokens at a time, Q4_0
 * and Q4_K, and {@code ::wholePanels}, the loop of the one-token kernels, which a matmul's chunks reach through
 * {@link RowParts#runChunk}) so that each type's kernels compile as units of their own (without it, Q8_0 decode ran a
 * third slower and allocated 42 MB per token; Q4_0's, its loop inlined up into a chunk's caller, 57 MB). engine-bench's
 * B/tok column and the perf gate's allocation metrics show when a kernel boxes.
 */
public abstract class WeightMatrix {
    protected final String name;
    protected final int rows;
    protected final int cols;
    protected WeightMatrix(String name, int rows, int cols) {
        this.name = name;
        this.rows = rows;
        this.cols = cols;
    }

    public final String name() {
        return name;
    }

    public final int rows() {
        return rows;
    }

    public final int cols() {
        return cols;
    }

    public abstract GgmlType type();

    /**
     * out[t * rows + r] (from {@code outOff}) = sum over c of W[r][c] * x[t * cols + c] (from {@code xOff}),
     * for t in [0, n). {@code x} and {@code out} must not overlap.
     *
     * <p>One token: {@link #matvec}, the type's own kernel, which widens weights in registers. More tokens:
     * {@link #matmulTokens}, which reads each weight once per call and reuses it for several tokens (register
     * blocking). Both sum each (row, token) in the type's order: they agree bit for bit.
     */
    public final void matmul(float[] x, int xOff, int n, float[] out, int outOff) {
        if (n == 1) {
            matvec(x, xOff, out, outOff);
        } else {
            matmulTokens(x, xOff, n, out, outOff);
        }
    }

    /**
     * {@link #matmul} of n > 1 tokens: each weight read once per call and reused for several tokens, in the order of
     * the type's {@link #matvec} (row panels: {@link PanelMatrix}; F16: 4-row tiles, {@link F16Matrix}).
     */
    protected abstract void matmulTokens(float[] x, int xOff, int n, float[] out, int outOff);

    /**
     * out[outOff + r] = W[r] . x[xOff..xOff+cols), every row: decode of one token. Each type widens its weights
     * in registers, one row at a time (one sequential stream), in the type's summation order.
     */
    protected abstract void matvec(float[] x, int xOff, float[] out, int outOff);

    /**
     * Writes row {@code row} as floats into dst[off..off+cols), computing each value exactly as the type's
     * {@link #matvec} does in registers (so a tile and a register hold the same bits).
     */
    protected abstract void decodeRow(int row, float[] dst, int off);

    /** Writes row {@code row} as floats into out[off..off+cols): an embedding lookup. */
    public final void readRow(int row, float[] out, int off) {
        decodeRow(row, out, off);
    }

    /**
     * Loads tensor {@code name} of {@code file} as a {@code rows x cols} matrix, checking its shape and type.
     * Only this tensor's bytes are mapped.
     */
    public static WeightMatrix load(GgufFile file, String name, int rows, int cols) {
        GgufTensorInfo t = file.tensor(name);
        long[] dims = t.dims();
        boolean shapeOk = dims.length >= 1 && dims[0] == cols && t.dim(1) == rows && t.dim(2) == 1 && t.dim(3) == 1;
        if (!shapeOk) {
            throw new GgufException(file.path(), "tensor '" + name + "' has shape " + t.shapeString()
                    + " but the metadata implies [" + cols + ", " + rows + "]");
        }
        if (t.type() == GgmlType.F16) { // read in place, of any size on JDK 22+
            return new F16Matrix(name, rows, cols, file.region(name));
        }
        ByteBuffer data = file.map(name); // read once, to repack onto the heap
        return switch (t.type()) {
            case F32 -> repacked(file, t, F32Matrix.heapBytes(rows, cols), () -> new F32Matrix(name, rows, cols, data));
            case Q8_0 -> repacked(file, t, Int8PanelMatrix.heapBytes(rows, cols, 32),
                    () -> Int8PanelMatrix.q8_0(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q4_0 -> repacked(file, t, Q4_0Matrix.heapBytes(rows, cols),
                    () -> new Q4_0Matrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q4_K -> repacked(file, t, Q4KMatrix.heapBytes(rows, cols),
                    () -> new Q4KMatrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q6_K -> repacked(file, t, Int8PanelMatrix.heapBytes(rows, cols, 16),
                    () -> Int8PanelMatrix.q6_K(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q5_0 -> repacked(file, t, Q5_0Matrix.heapBytes(rows, cols),
                    () -> new Q5_0Matrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case IQ4_NL, IQ4_XS -> Iq4PanelMatrix.AVAILABLE // 4-bit indices where the lookup is cheap, else int8
                    ? repacked(file, t, Iq4PanelMatrix.heapBytes(rows, cols), () -> new Iq4PanelMatrix(name, rows,
                            checkBlocks(file, t, cols), t.type(), PackedBlocks.unpack(file, t, data)))
                    : t.type() == GgmlType.IQ4_NL
                    ? repacked(file, t, Int8PanelMatrix.heapBytes(rows, cols, 32),
                            () -> Int8PanelMatrix.iq4_nl(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)))
                    : repacked(file, t, Int8PanelMatrix.heapBytes(rows, cols, 32),
                            () -> Int8PanelMatrix.iq4_xs(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q3_K -> repacked(file, t, Q3KMatrix.heapBytes(rows, cols),
                    () -> new Q3KMatrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case BF16 -> repacked(file, t, BF16Matrix.heapBytes(rows, cols), () -> new BF16Matrix(name, rows, cols, data));
            case Q4_1 -> repacked(file, t, Q4KMatrix.heapBytesQ4_1(rows, cols),
                    () -> Q4KMatrix.q4_1(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q5_K -> repacked(file, t, Q5KMatrix.heapBytes(rows, cols),
                    () -> new Q5KMatrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            case Q2_K -> repacked(file, t, Q2KMatrix.heapBytes(rows, cols),
                    () -> new Q2KMatrix(name, rows, checkBlocks(file, t, cols), PackedBlocks.unpack(file, t, data)));
            default -> throw new GgufException(file.path(), "tensor '" + name + "' has type " + t.type()
                    + ", which this engine does not support (supported: " + SUPPORTED + ")");
        };
    }

    /**
     * {@code make} (a repack onto the heap: PackedBlocks, then panels), or, when the heap is too small for it, the
     * clear error of {@link #heapTooSmall} with the panels' size, {@code heapBytes}; blocks the panels cannot hold
     * (a Q4_1 scale that is not finite) are refused naming the file.
     */
    private static WeightMatrix repacked(GgufFile file, GgufTensorInfo t, long heapBytes,
                                         java.util.function.Supplier<WeightMatrix> make) {
        try {
            return make.get();
        } catch (OutOfMemoryError e) {
            throw heapTooSmall(file, t, heapBytes, e);
        } catch (IllegalArgumentException e) { // blocks the panels cannot hold, named by tensor, row and block
            throw new GgufException(file.path(), e.getMessage(), e);
        }
    }

    /**
     * Heap bytes a quantized tensor takes once repacked ({@link PackedBlocks}) per byte of it in the file, at
     * most: IQ4_XS's 288 / 136 = 2.12 (IQ4_NL 2.0, Q2_K 2.0, Q5_K 1.59, Q6_K 1.52, Q3_K 1.35,
     * Q4_0 1.11, Q5_0 1.09, Q4_K 1.06, Q8_0 1.06, Q4_1, F32 and BF16 1 plus the padding of a last partial row panel; F16 stays mapped, 0),
     * with room to spare.
     */
    public static final double HEAP_PER_FILE_BYTE = 2.5;

    /**
     * Heap bytes a tensor of {@code type} takes once loaded, per byte of it in the file, at most (the ratios above,
     * rounded up; F16 stays mapped: 0; a 1-D F32 norm is copied: 1).
     */
    public static double heapPerFileByte(GgmlType type) {
        return switch (type) {
            case F16 -> 0;
            case F32, BF16 -> 1.02;
            case Q8_0 -> 1.07;
            case Q4_0 -> 1.12;
            case Q4_1 -> 1.02;
            case Q4_K -> 1.07;
            case Q6_K -> 1.53;
            case Q5_0 -> 1.10;
            case Q5_K -> 1.60;
            case IQ4_NL -> 2.01;
            case IQ4_XS -> 2.13;
            case Q3_K -> 1.36;
            case Q2_K -> 2.01;
            default -> HEAP_PER_FILE_BYTE;
        };
    }

    /**
     * Heap bytes loading {@code file}'s tensors takes at most: each tensor at its type's {@link #heapPerFileByte},
     * plus the repack of the largest one in flight ({@link PackedBlocks}, as large again).
     */
    public static long heapBytes(GgufFile file) {
        double sum = 0;
        double largest = 0;
        for (GgufTensorInfo t : file.tensors().values()) {
            double b = t.byteSize() * heapPerFileByte(t.type());
            sum += b;
            largest = Math.max(largest, b);
        }
        return (long) (sum + largest);
    }

    /**
     * The error for a tensor that does not fit in the heap once repacked ({@code need} bytes): its name, type,
     * size and the heap limit, and how to raise it; not an OutOfMemoryError later.
     */
    static GgufException heapTooSmall(GgufFile file, GgufTensorInfo t, long need, OutOfMemoryError e) {
        String size = String.format(java.util.Locale.ROOT, "%.1f MiB", need / 1048576.0);
        return new GgufException(file.path(), "tensor '" + t.name() + "' (" + t.type() + ", " + size
                + " once repacked) does not fit in the Java heap (max " + (Runtime.getRuntime().maxMemory() >> 20)
                + " MiB): raise the heap limit to at least the size of the model's F32 and quantized tensors"
                + " (java -Xmx<size>; for the tools/ commands, TNSR_JAVA_OPTS=-Xmx<size>)", e);
    }

    /** The weight types {@link #load} accepts. */
    public static final String SUPPORTED = "F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q4_K, Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K, Q2_K";

    /** A quantized row must be whole blocks: {@code cols} when it is, else a clear error. */
    private static int checkBlocks(GgufFile file, GgufTensorInfo t, int cols) {
        if (cols % t.type().blockSize() != 0) {
            throw new GgufException(file.path(), "tensor '" + t.name() + "' of type " + t.type() + " has rows of "
                    + cols + " elements, not a multiple of its block size " + t.type().blockSize());
        }
        return cols;
    }

    /** Loads a 1-D F32/F16 tensor of length {@code n} (a norm weight) into a float array. */
    public static float[] loadVector(GgufFile file, String name, int n) {
        GgufTensorInfo t = file.tensor(name);
        if (t.elementCount() != n || t.dims().length != 1) {
            throw new GgufException(file.path(), "tensor '" + name + "' has shape " + t.shapeString()
                    + " but the metadata implies [" + n + "]");
        }
        ByteBuffer b = file.map(name);
        float[] v = new float[n];
        switch (t.type()) {
            case F32 -> {
                for (int i = 0; i < n; i++) {
                    v[i] = b.getFloat(i * 4);
                }
            }
            case F16 -> {
                for (int i = 0; i < n; i++) {
                    v[i] = io.tnsr.engine.kernels.Float16.toFloat(b.getShort(i * 2));
                }
            }
            default -> throw new GgufException(file.path(), "tensor '" + name + "' has type " + t.type()
                    + "; a 1-D weight must be F32 or F16");
        }
        return v;
    }

    @Override
    public String toString() {
        return name + " " + type() + " [" + rows + " x " + cols + "]";
    }
}
