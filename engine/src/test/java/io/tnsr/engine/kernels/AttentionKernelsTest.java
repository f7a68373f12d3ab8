package io.tnsr.engine.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.tnsr.engine.memory.Region;
import java.util.SplittableRandom;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorSpecies;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The page kernels give the bits of one dot product and one axpy per position ({@link #dot}, {@link #axpy}: the
 * attention loop before the page kernels), in position order, for head sizes below, at and past the vector width
 * (with and without a scalar tail), full and partly filled pages, and page sizes the vector path cannot take (the
 * scalar path then runs); pages of floats, and pages of halves ({@link HalfAttentionKernels}), whose results are those
 * bits for the values the halves hold.
 */
class AttentionKernelsTest {
    private static final VectorSpecies<Float> F = VectorOps.F;

    /** Sum of a[ao..ao+n) * the n floats of {@code buf} from byte offset {@code bo}: chunks, lanes from 0, tail. */
    static float dot(float[] a, int ao, Region buf, int bo, int n) {
        int i = 0;
        float sum = 0f;
        if (n >= F.length()) {
            FloatVector acc = FloatVector.zero(F);
            for (int bound = F.loopBound(n); i < bound; i += F.length()) {
                acc = FloatVector.fromArray(F, a, ao + i).fma(buf.floats(F, bo + i * 4), acc);
            }
            sum = VectorOps.sumLanes(acc);
        }
        for (; i < n; i++) {
            sum += a[ao + i] * buf.getFloat(bo + i * 4);
        }
        return sum;
    }

    /** y[yo..yo+n) += a * (the n floats of {@code buf} from byte offset {@code bo}). */
    static void axpy(float[] y, int yo, float a, Region buf, int bo, int n) {
        int i = 0;
        if (n >= F.length()) {
            FloatVector va = FloatVector.broadcast(F, a);
            for (int bound = F.loopBound(n); i < bound; i += F.length()) {
                buf.floats(F, bo + i * 4).fma(va, FloatVector.fromArray(F, y, yo + i))
                        .intoArray(y, yo + i);
            }
        }
        for (; i < n; i++) {
            y[yo + i] += a * buf.getFloat(bo + i * 4);
        }
    }

    @ParameterizedTest(name = "head {0}, page {1}, {2} positions")
    @CsvSource({"64, 16, 16", "64, 16, 7", "48, 16, 16", "8, 16, 13", "80, 16, 16", "72, 16, 1", "128, 32, 30",
            "64, 5, 5", "64, 5, 3"})
    void scoresAndOutputsAreTheBitsOfOneDotAndOneAxpyPerPosition(int headDim, int pageTokens, int count) {
        pageOf(headDim, pageTokens, count, false);
        pageOf(headDim, pageTokens, count, true);
    }

    private static void pageOf(int headDim, int pageTokens, int count, boolean halves) {
        SplittableRandom rnd = new SplittableRandom(headDim * 131L + pageTokens * 17L + count);
        int eb = halves ? 2 : Float.BYTES;
        int kvDim = 2 * headDim; // two KV heads; the test reads the second
        int keyBlock = 64;       // bytes before the key block, as for a later layer
        Region page = Region.allocate(keyBlock + 2 * pageTokens * kvDim * eb);
        float[][] keys = new float[pageTokens][kvDim];   // the values the page holds
        float[][] values = new float[pageTokens][kvDim];
        int valueBlock = keyBlock + pageTokens * kvDim * eb;
        for (int i = 0; i < pageTokens; i++) {
            for (int j = 0; j < kvDim; j++) {
                int row = j - j % headDim + AttentionKernels.keyRow(j % headDim, headDim); // transposed, read order
                float k = (float) rnd.nextGaussian() * (j == 0 ? 3e-5f : 4f); // a subnormal half or two among them
                float v = (float) rnd.nextGaussian() * 4f;
                if (halves) {
                    short hk = Float16.fromFloat(k);
                    short hv = Float16.fromFloat(v);
                    page.putShort(keyBlock + (row * pageTokens + i) * 2, hk);
                    page.putShort(valueBlock + (i * kvDim + j) * 2, hv);
                    keys[i][j] = Float16.toFloat(hk);
                    values[i][j] = Float16.toFloat(hv);
                } else {
                    page.putFloat(keyBlock + (row * pageTokens + i) * Float.BYTES, k);
                    page.putFloat(valueBlock + (i * kvDim + j) * Float.BYTES, v);
                    keys[i][j] = k;
                    values[i][j] = v;
                }
            }
        }
        float[] q = new float[3 + headDim];
        for (int j = 0; j < q.length; j++) {
            q[j] = (float) rnd.nextGaussian();
        }
        float scale = 0.125f;
        int head = 1;

        float[] scores = new float[2 + pageTokens];
        if (halves) {
            HalfAttentionKernels.scores(q, 3, page, keyBlock + head * headDim * pageTokens * eb, pageTokens, count,
                    headDim, scale, scores, 2);
        } else {
            AttentionKernels.scores(q, 3, page, keyBlock + head * headDim * pageTokens * eb, pageTokens, count,
                    headDim, scale, scores, 2);
        }
        float[] out = new float[5 + headDim];
        float[] expectedOut = new float[5 + headDim];
        for (int d = 0; d < headDim; d++) {
            out[5 + d] = expectedOut[5 + d] = (float) rnd.nextGaussian(); // accumulate adds to what is there
        }
        if (halves) {
            HalfAttentionKernels.accumulate(out, 5, scores, 2, page, valueBlock + head * headDim * eb, kvDim * eb, count,
                    headDim);
        } else {
            AttentionKernels.accumulate(out, 5, scores, 2, page, valueBlock + head * headDim * eb, kvDim * eb, count,
                    headDim);
        }

        Region row = Region.allocate(headDim * Float.BYTES);
        for (int i = 0; i < count; i++) {
            for (int j = 0; j < headDim; j++) {
                row.putFloat(j * Float.BYTES, keys[i][head * headDim + j]);
            }
            float expected = dot(q, 3, row, 0, headDim) * scale;
            assertEquals(Float.floatToIntBits(expected), Float.floatToIntBits(scores[2 + i]),
                    (halves ? "halves, " : "") + "score of position " + i + ": " + expected + " vs " + scores[2 + i]);
            for (int j = 0; j < headDim; j++) {
                row.putFloat(j * Float.BYTES, values[i][head * headDim + j]);
            }
            axpy(expectedOut, 5, scores[2 + i], row, 0, headDim);
        }
        for (int d = 0; d < headDim; d++) {
            assertEquals(Float.floatToIntBits(expectedOut[5 + d]), Float.floatToIntBits(out[5 + d]),
                    (halves ? "halves, " : "") + "output " + d + ": " + expectedOut[5 + d] + " vs " + out[5 + d]);
        }
    }
}
