package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;

import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/** Register-level helpers shared by the quantized matrices: bytes widened to int or float lanes, half scales. */
final class Blocks {
    static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    /** As many byte lanes as a float vector has lanes (128 bits with AVX-512). */
    static final VectorSpecies<Byte> B = VectorSpecies.of(byte.class, VectorShape.forBitSize(F.length() * 8));
    static final VectorSpecies<Integer> I = VectorSpecies.of(int.class, F.vectorShape());

    private Blocks() {
    }

    /** L bytes from {@code off}, sign-extended into int lanes (mask with 0xFF / shift for unsigned fields). */
    static IntVector ints(ByteBuffer data, int off) {
        return (IntVector) ByteVector.fromByteBuffer(B, data, off, LE).convertShape(VectorOperators.B2I, I, 0);
    }

    /** L signed bytes from {@code off} as floats. */
    static FloatVector signedBytes(ByteBuffer data, int off) {
        return (FloatVector) ByteVector.fromByteBuffer(B, data, off, LE).convertShape(VectorOperators.B2F, F, 0);
    }

    /** Unsigned 4-bit fields: (byte >> shift) & 0xF of L bytes from {@code off}, minus {@code bias}, as floats. */
    static FloatVector nibbles(ByteBuffer data, int off, int shift, int bias) {
        return (FloatVector) ints(data, off).lanewise(VectorOperators.LSHR, shift).and(0xF).sub(bias)
                .convert(VectorOperators.I2F, 0);
    }

    /** The half-precision scale at byte {@code off}. */
    static float half(ByteBuffer data, int off) {
        return Float16.toFloat(data.getShort(off));
    }
}
