package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;

import io.tnsr.engine.kernels.Float16;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * Register-level helpers shared by the quantized matrices. They read the packed quants of every quantized
 * type from a byte[] ({@link PackedBlocks}): measured faster than loading each vector from the
 * MappedByteBuffer, whose loads keep a bounds check each (a row copied to a byte[] first was 30% faster, the
 * packed arrays 1.5x more).
 */
final class Blocks {
    /**
     * As many byte lanes as a float vector has lanes (128 bits with AVX-512, 64 with AVX2), but at least 64 bits, the
     * smallest vector shape: with 128-bit float vectors (NEON, SSE; L = 4) a byte vector holds 8 lanes, of which
     * {@link #ints} loads and converts the first 4.
     */
    static final VectorSpecies<Byte> B =
            VectorSpecies.of(byte.class, VectorShape.forBitSize(Math.max(64, F.length() * Byte.SIZE)));
    static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());
    /** True when {@link #B} is wider than L lanes (L = 4): loads are then masked to the L bytes they own. */
    private static final boolean PARTIAL = B.length() > F.length();
    private static final VectorMask<Byte> FIRST_L = B.indexInRange(0, F.length());

    private Blocks() {
    }

    /** L bytes from {@code off}, sign-extended into int lanes (mask / shift for unsigned fields). */
    static IntVector ints(byte[] row, int off) {
        // PARTIAL is a constant, so C2 compiles one branch. The masked load reads only the L bytes asked for (the last
        // chunk of a matrix ends its array); where all 8 bytes are in bounds, JDK 17 does a plain load and a blend.
        ByteVector bytes = PARTIAL ? ByteVector.fromArray(B, row, off, FIRST_L) : ByteVector.fromArray(B, row, off);
        return (IntVector) bytes.convertShape(VectorOperators.B2I, I, 0);
    }

    /**
     * L signed bytes from {@code off} as floats. Through {@link #ints} and I2F rather than one B2F conversion (the
     * same instructions): every quantized type then converts bytes along one chain of Vector API call sites. With
     * B2F here and B2I for the nibble types, a JVM that had run the Q8_0 kernels sometimes deoptimized the Q4_0
     * one-token kernel over and over until its vectors were boxed (171 MB allocated per token, half the speed).
     */
    static FloatVector signedBytes(byte[] row, int off) {
        return (FloatVector) ints(row, off).convert(VectorOperators.I2F, 0);
    }

    /** Every half-precision value as a float (256 KiB): a block scale costs one L1/L2 load instead of ~10 ops. */
    private static final float[] HALF = new float[1 << 16];

    static {
        for (int h = 0; h < HALF.length; h++) {
            HALF[h] = Float16.toFloat(h);
        }
    }

    /** The little-endian half-precision value at {@code off}. */
    static float half(byte[] row, int off) {
        return HALF[(row[off] & 0xFF) | (row[off + 1] & 0xFF) << 8];
    }

    /** The half-precision value {@code bits} as a float (exact). */
    static float half(short bits) {
        return HALF[bits & 0xFFFF];
    }
}
