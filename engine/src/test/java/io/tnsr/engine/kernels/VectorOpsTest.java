package io.tnsr.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * SwiGLU and softmax, whose exponentials come from {@link VectorOps#exp} (the same bits in a vector lane and for
 * one float, compiled or not): within a few ulp of a double-precision reference, at lengths below, at and
 * past the vector width (with and without a tail), for inputs where e^x overflows or underflows; and a row's bits
 * do not depend on where it sits in the array or what surrounds it (what makes batched runs equal one-token runs).
 */
class VectorOpsTest {
    private static final int LANES = VectorOps.F.length();

    /** Within {@code ulps} float ulps of {@code expected} (an exact zero only matches a value within 1e-30). */
    private static void assertClose(double expected, float actual, int ulps, String what) {
        double tol = ulps * Math.ulp((float) expected) + 1e-30;
        assertTrue(Math.abs(actual - expected) <= tol, what + ": expected " + expected + ", got " + actual
                + " (" + (Math.abs(actual - expected) / Math.ulp((float) expected)) + " ulp)");
    }

    private static float[] gaussian(int n, double sd, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] a = new float[n];
        for (int i = 0; i < n; i++) {
            a[i] = (float) (r.nextGaussian() * sd);
        }
        return a;
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 3, 16, 17, 64, 100, 2048})
    void swigluIsSiluTimesUpWithinFewUlp(int n) {
        float[] gate = gaussian(n, 4, n);
        float[] up = gaussian(n, 1, n + 1);
        float[] out = gate.clone();
        VectorOps.swiglu(out, 0, up, 0, n);
        for (int i = 0; i < n; i++) {
            double g = gate[i];
            double expected = g / (1 + Math.exp(-g)) * up[i];
            assertClose(expected, out[i], 6, "element " + i + " of " + n + " (lanes " + LANES + ")");
        }
    }

    @Test
    void swigluSaturatesWithoutNaN() {
        float[] gate = new float[LANES * 2 + 3];
        float[] up = new float[gate.length];
        for (int i = 0; i < gate.length; i++) {
            gate[i] = (i % 3 == 0 ? -1 : 1) * (80f + 10 * i); // e^-g overflows for the negative ones past -88.7
            up[i] = 2f;
        }
        float[] out = gate.clone();
        VectorOps.swiglu(out, 0, up, 0, out.length);
        for (int i = 0; i < out.length; i++) {
            double g = gate[i];
            assertTrue(!Float.isNaN(out[i]), "element " + i + " (gate " + gate[i] + ") is NaN");
            assertClose(g / (1 + Math.exp(-g)) * up[i], out[i], 6, "element " + i + " (gate " + gate[i] + ")");
        }
    }

    @Test
    void swigluGivesTheScalarFormulasBitsInEveryLane() {
        int n = 64 * LANES + 3; // vector lanes and a scalar tail
        float[] gate = gaussian(n, 6, 21);
        float[] up = gaussian(n, 1, 22);
        gate[0] = 0f;
        gate[1] = -0f;
        gate[2] = -120f; // e^-g overflows
        gate[3] = 120f;
        float[] out = gate.clone();
        VectorOps.swiglu(out, 0, up, 0, n);
        for (int i = 0; i < n; i++) {
            float g = gate[i];
            float one = g / (1f + VectorOps.exp(-g)) * up[i];
            assertEquals(Float.floatToRawIntBits(one), Float.floatToRawIntBits(out[i]),
                    "element " + i + " (gate " + g + "): " + out[i] + ", one float " + one);
        }
    }

    @Test
    void aRowsSwigluBitsDoNotDependOnItsNeighbours() {
        int ffn = 3 * LANES + 5; // a tail in every row
        int rows = 4;
        float[] gate = gaussian(rows * ffn, 3, 7);
        float[] up = gaussian(rows * ffn, 1, 8);
        float[] together = gate.clone();
        for (int t = 0; t < rows; t++) {
            VectorOps.swiglu(together, t * ffn, up, t * ffn, ffn);
        }
        for (int t = 0; t < rows; t++) {
            float[] alone = java.util.Arrays.copyOfRange(gate, t * ffn, (t + 1) * ffn);
            float[] upAlone = java.util.Arrays.copyOfRange(up, t * ffn, (t + 1) * ffn);
            VectorOps.swiglu(alone, 0, upAlone, 0, ffn);
            for (int i = 0; i < ffn; i++) {
                assertEquals(Float.floatToIntBits(alone[i]), Float.floatToIntBits(together[t * ffn + i]),
                        "row " + t + ", element " + i);
            }
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2, 15, 16, 17, 33, 961})
    void softmaxMatchesADoubleReference(int n) {
        float[] x = gaussian(n + 2, 3, 100 + n);
        float[] y = x.clone();
        VectorOps.softmax(y, 1, n); // an offset, and neighbours left alone
        assertEquals(x[0], y[0]);
        assertEquals(x[n + 1], y[n + 1]);
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 1; i <= n; i++) {
            max = Math.max(max, x[i]);
        }
        double sum = 0;
        for (int i = 1; i <= n; i++) {
            sum += Math.exp(x[i] - max); // x - max rounded to float, as the kernel does: its error is not exp's
        }
        double total = 0;
        for (int i = 1; i <= n; i++) {
            assertClose(Math.exp(x[i] - max) / sum, y[i], 6, "element " + i + " of " + n + " (lanes " + LANES + ")");
            total += y[i];
        }
        assertEquals(1.0, total, 1e-5);
    }

    @Test
    void softmaxOfLargeScoresDoesNotOverflow() {
        float[] x = new float[LANES + 1];
        java.util.Arrays.fill(x, 1000f);
        x[LANES] = 1001f; // the tail holds the maximum
        VectorOps.softmax(x, 0, x.length);
        double e = Math.exp(-1);
        double sum = LANES * e + 1;
        for (int i = 0; i < LANES; i++) {
            assertClose(e / sum, x[i], 8, "element " + i);
        }
        assertClose(1 / sum, x[LANES], 8, "the maximum");
    }

    @Test
    void expIsTheSameInEveryLaneAndAsOneFloatAndWithinTwoUlpOfMathExp() {
        SplittableRandom r = new SplittableRandom(11);
        float[] x = new float[LANES * 8192];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) (r.nextDouble() * 180 - 90);
        }
        float[] special = {0f, -0f, 1f, -1f, 88.37f, 88.38f, 88.7f, 89f, -87.33f, -87.34f, -87.4f, -103f, -200f, 1e-8f,
            -1e-8f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE, 0.3465736f, -0.3465736f};
        System.arraycopy(special, 0, x, 0, special.length);
        float[] v = x.clone();
        VectorOps.exps(v, 0, v.length, 0f, null, 0); // e^(x - 0): x - 0 is x
        for (int i = 0; i < x.length; i++) {
            float one = VectorOps.exp(x[i]);
            assertEquals(Float.floatToRawIntBits(one), Float.floatToRawIntBits(v[i]), "e^" + x[i] + ": lane " + v[i] + ", one float " + one);
            double e = Math.exp(x[i]);
            if (e >= Float.MIN_NORMAL && e <= Float.MAX_VALUE) {
                assertClose(e, one, 2, "e^" + x[i]);
            } else if (e > Float.MAX_VALUE) {
                assertEquals(Float.POSITIVE_INFINITY, one, "e^" + x[i]);
            } else {
                assertTrue(one == 0f || Math.abs(one - e) <= Float.MIN_NORMAL, "e^" + x[i] + " = " + one);
            }
        }
        assertTrue(Float.isNaN(VectorOps.exp(Float.NaN)));
    }
}
