package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import io.tnsr.engine.memory.Region;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * F16 weights: halves widened to floats in registers, then FMA. A tensor without Inf or NaN (every tensor of a real
 * model; checked once at load) widens with three operations per vector ({@link #loadFinite}); one with them, with
 * {@link Float16#toFloat(IntVector)}'s eight and a branch. Both give the same floats for every finite half.
 */
final class F16Matrix extends WeightMatrix {
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_PREFERRED;
    /**
     * Half as many bits as a float vector: the same number of lanes, as shorts; but at least 64 bits, the smallest
     * shape (64-bit float vectors, L = 2, get 4 short lanes and convert the first 2).
     */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(Math.max(64, F.vectorBitSize() / 2)));
    /** True when {@link #S} is wider than L lanes: loads are then masked to the L halves they own (see Blocks). */
    private static final boolean PARTIAL = S.length() > F.length();
    private static final VectorMask<Short> FIRST_L = S.indexInRange(0, F.length());

    /** The tensor's bytes in the mapped file, read in place: row r at r * cols * 2 (may pass 2 GiB on JDK 22+). */
    private final Region data;
    /** No half of the tensor is Inf or NaN (exponent bits all ones), so {@link #loadFinite} widens every one exactly. */
    private final boolean finite;
    /** [TILE_ROWS][cols] scratch of {@link #matmulTokens}, allocated on its first use; one compute thread uses a matrix. */
    private float[] tile;
    /** Accumulator lanes of the kernels ({@link TileKernels#LANES_SCRATCH}); the same single thread. */
    private final float[] lanes = new float[TileKernels.LANES_SCRATCH];

    F16Matrix(String name, int rows, int cols, Region data) {
        super(name, rows, cols);
        this.data = data;
        this.finite = allFinite(data, (long) rows * cols);
    }

    /** True when none of the first {@code n} halves of {@code data} has all exponent bits set (Inf or NaN). */
    private static boolean allFinite(Region data, long n) {
        long i = 0;
        for (long bound = n - n % S.length(); i < bound; i += S.length()) {
            if (data.shorts(S, 2 * i).and((short) 0x7c00).compare(VectorOperators.EQ, (short) 0x7c00).anyTrue()) {
                return false;
            }
        }
        for (; i < n; i++) {
            if ((data.getShort(2 * i) & 0x7c00) == 0x7c00) {
                return false;
            }
        }
        return true;
    }

    @Override
    public GgmlType type() {
        return GgmlType.F16;
    }

    /** The L halves at {@code byteOffset}, as floats. */
    private static FloatVector load(Region data, long byteOffset) {
        return Float16.toFloat(ints(halves(data, byteOffset)));
    }

    /**
     * The L halves at {@code byteOffset}. These helpers are each at most 35 bytecodes (MaxInlineSize), so C2 inlines
     * them at every call site whatever its profile says: a vector returned by a call left out of line is boxed.
     */
    private static ShortVector halves(Region data, long byteOffset) {
        return PARTIAL ? data.shorts(S, byteOffset, FIRST_L) : data.shorts(S, byteOffset);
    }

    /** The halves sign-extended to ints, lane for lane. */
    private static IntVector ints(ShortVector h) {
        return (IntVector) h.convertShape(VectorOperators.S2I, I, 0);
    }

    /**
     * The L halves at {@code byteOffset}, as floats, when none is Inf or NaN: sign-extended to ints, shifted so that
     * the sign lands in bit 31 and exponent and mantissa in a float's low exponent and high mantissa bits, the three
     * sign copies in between cleared, and scaled by 2^112 (exact, subnormal halves included): half e, m becomes
     * 2^(e - 15) * (1 + m / 1024).
     */
    private static FloatVector loadFinite(Region data, long byteOffset) {
        return finiteFloats(ints(halves(data, byteOffset)));
    }

    private static FloatVector finiteFloats(IntVector i) {
        return i.lanewise(VectorOperators.LSHL, 13).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        Region data = this.data; // a local: C2 then keeps the region's fields in registers
        float[] lanes = this.lanes;
        int bound = F.loopBound(cols);
        for (int r = 0; r < rows; r++) {
            FloatVector a = FloatVector.zero(F); // one chain, one row at a time: the F32 order
            long rb = (long) r * cols * 2;
            int c = 0;
            if (finite) {
                for (; c < bound; c += L) {
                    a = loadFinite(data, rb + c * 2).fma(FloatVector.fromArray(F, x, xo + c), a);
                }
            } else {
                for (; c < bound; c += L) {
                    a = load(data, rb + c * 2).fma(FloatVector.fromArray(F, x, xo + c), a);
                }
            }
            FloatVector.broadcast(F, -0f).add(a).intoArray(lanes, 0);
            float s = TileKernels.sumLanes(lanes, 0);
            for (; c < cols; c++) {
                s += scalar(r, c) * x[xo + c];
            }
            out[oo + r] = s;
        }
    }

    private float scalar(int row, int c) {
        return Float16.toFloat(data.getShort(((long) row * cols + c) * 2));
    }

    /**
     * Several tokens: {@link TileKernels#TILE_ROWS} rows at a time are decoded into a small tile ({@link #decodeRow},
     * the same register arithmetic, stored) and multiplied with all n tokens from L1 (4 rows x 4 tokens per kernel
     * call), in the order {@link TileKernels} documents.
     */
    @Override
    protected void matmulTokens(float[] x, int xOff, int n, float[] out, int outOff) {
        float[] tile = this.tile;
        if (tile == null) {
            tile = this.tile = new float[TileKernels.TILE_ROWS * cols];
        }
        int groups = (n + TileKernels.GROUP - 1) / TileKernels.GROUP;
        for (int r0 = 0; r0 < rows; r0 += TileKernels.TILE_ROWS) {
            int nr = Math.min(TileKernels.TILE_ROWS, rows - r0);
            for (int i = 0; i < nr; i++) { // one sequential stream; spreading these between the kernel calls
                decodeRow(r0 + i, tile, i * cols); // (to overlap memory and arithmetic) was measured slower
            }
            for (int g = 0; g < groups; g++) {
                TileKernels.group(tile, nr, cols, x, xOff, n, g, out, outOff + r0, rows, lanes);
            }
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        Region data = this.data;
        int c = 0;
        long rb = (long) row * cols * 2;
        int bound = F.loopBound(cols);
        if (finite) {
            for (; c < bound; c += L) {
                loadFinite(data, rb + c * 2).intoArray(dst, off + c);
            }
        } else {
            for (; c < bound; c += L) {
                load(data, rb + c * 2).intoArray(dst, off + c);
            }
        }
        for (; c < cols; c++) {
            dst[off + c] = scalar(row, c);
        }
    }
}
