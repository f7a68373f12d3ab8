package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * The activations' 8-bit quantization, in vectors, gives the bits of its one-value-at-a-time definition (column j of
 * a block paired with column j + 16, as the 4-bit panels pair them): every
 * column pair, block scale and offset, for magnitudes from 1e-30 to 1e30, all-zero blocks, negative zeros, a lone
 * non-zero in a block, and values on the half-way points where rint rounds to even. Run at each vector width.
 */
class Int8ActivationsTest {
    private static final int COLS = 768;

    @Test
    void vectorQuantizationGivesTheBitsOfTheScalarDefinition() {
        SplittableRandom r = new SplittableRandom(11);
        int n = 7;
        float[] x = new float[3 + n * COLS]; // from an odd offset, as a batch's rows can start anywhere
        int xo = 3;
        for (int t = 0; t < n; t++) {
            double scale = Math.pow(10, -30 + 10 * t); // 1e-30 .. 1e30
            for (int c = 0; c < COLS; c++) {
                x[xo + t * COLS + c] = (float) (r.nextGaussian() * scale);
            }
        }
        Arrays.fill(x, xo + 64, xo + 96, 0f);                       // token 0, block 2: all zero
        Arrays.fill(x, xo + 96, xo + 128, -0f);                     // block 3: negative zeros
        Arrays.fill(x, xo + COLS + 32, xo + COLS + 64, 0f);         // token 1, block 1: one value
        x[xo + COLS + 40] = -3.25f;
        for (int c = 0; c < 32; c++) {                                  // token 2, block 0: amax 127, so xq = rint(x)
            x[xo + 2 * COLS + c] = c == 0 ? 127f : (c % 4 - 2) + 0.5f; // -1.5, -0.5, 0.5, 1.5: ties to even
        }

        Int8Activations vector = new Int8Activations(Int8Activations.Pairing.HALVES);
        Int8Activations scalar = new Int8Activations(Int8Activations.Pairing.HALVES);
        vector.quantize(x, xo, n, COLS);
        scalar.quantizeScalar(x, xo, n, COLS);

        assertArrayEquals(scalar.pairs(), vector.pairs(), "column pairs");
        assertArrayEquals(toBits(scalar.scales()), toBits(vector.scales()), "block scales");
        assertArrayEquals(scalar.offsets(), vector.offsets(), "offsets");
        assertEquals(0, vector.pairs()[2 * 16], "an all-zero block quantizes to zeros");
        int t2 = 2 * COLS / 2; // token 2's pairs: pair j of block 0 is columns j and j + 16
        assertPair(127, -2, vector.pairs()[t2], "columns 0 and 16: 127 and -1.5");
        assertPair(0, 0, vector.pairs()[t2 + 1], "columns 1 and 17: -0.5 twice, to even");
        assertPair(0, 0, vector.pairs()[t2 + 2], "columns 2 and 18: 0.5 twice, to even");
        assertPair(2, 2, vector.pairs()[t2 + 3], "columns 3 and 19: 1.5 twice, to even");
    }

    @Test
    void aSmallerCallAfterALargerOneReusesTheArraysAndQuantizesOnlyItsTokens() {
        SplittableRandom r = new SplittableRandom(5);
        float[] x = new float[4 * COLS];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) r.nextGaussian();
        }
        Int8Activations a = new Int8Activations(Int8Activations.Pairing.HALVES);
        a.quantize(x, 0, 4, COLS);
        int[] pairs = a.pairs();
        a.quantize(x, COLS, 1, COLS); // token 1 alone, now in slot 0
        Int8Activations b = new Int8Activations(Int8Activations.Pairing.HALVES);
        b.quantizeScalar(x, COLS, 1, COLS);
        assertEquals(pairs, a.pairs(), "no new array for a smaller call");
        assertArrayEquals(Arrays.copyOf(b.pairs(), COLS / 2), Arrays.copyOf(a.pairs(), COLS / 2));
    }

    private static void assertPair(int even, int odd, int pair, String what) {
        assertEquals(even, (short) pair, what + ": the even half");
        assertEquals(odd, pair >> 16, what + ": the odd half");
    }

    private static int[] toBits(float[] f) {
        int[] b = new int[f.length];
        for (int i = 0; i < f.length; i++) {
            b[i] = Float.floatToRawIntBits(f[i]);
        }
        return b;
    }
}
