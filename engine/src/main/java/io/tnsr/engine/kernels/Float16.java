package io.tnsr.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;

/** IEEE 754 half-precision conversion, scalar and in vector registers (Java 17 has no Float16 type). */
public final class Float16 {
    /** 2^112: rescales a half's exponent (bias 15) to a float's (bias 127). */
    private static final float MAGIC = 0x1p112f;

    private Float16() {
    }

    /**
     * The float value of half-precision bits {@code h} (low 16 bits); exact for every half, NaN and inf included.
     * The sign is OR-ed in, not branched on: block scales of ggml quantized weights (Q4_0's d = max / -8) have
     * random signs, and a branch on them mispredicts half the time (measured 2x slower Q4_0 decode).
     */
    public static float toFloat(int h) {
        int em = (h & 0x7fff) << 13;
        float f = Float.intBitsToFloat(em) * MAGIC;
        if ((h & 0x7c00) == 0x7c00) { // inf or NaN: never taken for real weights, so well predicted
            f = Float.intBitsToFloat(em | 0x7f800000);
        }
        return Float.intBitsToFloat(Float.floatToRawIntBits(f) | (h & 0x8000) << 16);
    }

    /** Half-precision bits of {@code f}, rounded to nearest even (as numpy and ggml do). */
    public static short fromFloat(float f) {
        int bits = Float.floatToRawIntBits(f);
        int sign = (bits >>> 16) & 0x8000;
        int abs = bits & 0x7fffffff;
        if (abs >= 0x7f800000) {
            return (short) (sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0));
        }
        if (abs >= 0x477ff000) {
            return (short) (sign | 0x7c00); // overflows to infinity after rounding
        }
        if (abs < 0x38800000) { // subnormal half or zero
            float v = Float.intBitsToFloat(abs) * 0x1p24f; // in units of the smallest subnormal
            return (short) (sign | Math.round(Math.rint(v)));
        }
        int mant = abs + 0xfff + ((abs >>> 13) & 1); // round to nearest even
        return (short) (sign | ((mant - 0x38000000) >>> 13));
    }

    /** Converts half bits held in the low 16 bits of each int lane into floats. */
    public static FloatVector toFloat(IntVector h) {
        IntVector em = h.and(0x7fff).lanewise(VectorOperators.LSHL, 13);
        FloatVector f = em.reinterpretAsFloats().mul(MAGIC);
        VectorMask<Integer> special = h.and(0x7c00).compare(VectorOperators.EQ, 0x7c00);
        if (special.anyTrue()) {
            f = f.blend(em.or(0x7f800000).reinterpretAsFloats(), special.cast(f.species()));
        }
        IntVector sign = h.and(0x8000).lanewise(VectorOperators.LSHL, 16);
        return f.reinterpretAsInts().or(sign).reinterpretAsFloats();
    }
}
