package io.tnsr.engine.sampling;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Comparator;
import java.util.Random;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

class TokenLogprobsTest {

    /** log-softmax in double precision, the reference. */
    private static double[] logSoftmax(float[] logits, int off, int vocab) {
        double max = Double.NEGATIVE_INFINITY;
        for (int i = 0; i < vocab; i++) {
            max = Math.max(max, logits[off + i]);
        }
        double sum = 0;
        for (int i = 0; i < vocab; i++) {
            sum += Math.exp(logits[off + i] - max);
        }
        double logZ = max + Math.log(sum);
        double[] out = new double[vocab];
        for (int i = 0; i < vocab; i++) {
            out[i] = logits[off + i] - logZ;
        }
        return out;
    }

    @Test
    void theChosenTokenAndTheMostLikelyOnesHaveTheirLogSoftmaxMostLikelyFirst() {
        Random r = new Random(5);
        int vocab = 32000;
        float[] logits = new float[3 + vocab];
        for (int i = 0; i < logits.length; i++) {
            logits[i] = (float) (r.nextGaussian() * 4);
        }
        TokenLogprobs lp = new TokenLogprobs(20);
        lp.compute(logits, 3, vocab, 1234);
        double[] ref = logSoftmax(logits, 3, vocab);
        assertEquals(1234, lp.token());
        // float logits, a float exp and a double sum: a few float ulps of the values (|logprob| < 40 here)
        assertEquals(ref[1234], lp.logprob(), 2e-5);
        int[] expected = IntStream.range(0, vocab).boxed()
                .sorted(Comparator.comparingDouble((Integer i) -> -ref[i]).thenComparingInt(i -> i))
                .limit(20).mapToInt(Integer::intValue).toArray();
        assertEquals(20, lp.count());
        int[] got = IntStream.range(0, 20).map(lp::topId).toArray();
        assertArrayEquals(expected, got);
        for (int k = 0; k < 20; k++) {
            assertEquals(ref[expected[k]], lp.topLogprob(k), 2e-5);
        }
    }

    @Test
    void theValuesAreThoseOfThePlainLoopBitForBit() {
        Random r = new Random(8);
        for (int vocab : new int[] {1, 7, 255, 256, 257, 4099, 32000}) {
            float[] logits = new float[vocab + 5];
            for (int i = 0; i < logits.length; i++) {
                logits[i] = (float) (r.nextGaussian() * 3);
            }
            float max = Float.NEGATIVE_INFINITY;
            for (int i = 0; i < vocab; i++) {
                max = Math.max(max, logits[5 + i]);
            }
            double sum = 0;
            for (int i = 0; i < vocab; i++) {
                sum += io.tnsr.engine.kernels.VectorOps.exp(logits[5 + i] - max);
            }
            float logZ = (float) StrictMath.log(sum);
            TokenLogprobs lp = new TokenLogprobs(3);
            lp.compute(logits, 5, vocab, vocab / 2);
            assertEquals(Float.floatToIntBits((logits[5 + vocab / 2] - max) - logZ), Float.floatToIntBits(lp.logprob()),
                    "vocabulary " + vocab);
        }
    }

    @Test
    void equalLogitsKeepTheLowerIdFirstAndASmallVocabularyGivesFewerTopTokens() {
        float[] logits = {1f, 3f, 3f, 0f, 3f};
        TokenLogprobs lp = new TokenLogprobs(2);
        lp.compute(logits, 0, 5, 4);
        assertEquals(1, lp.topId(0));
        assertEquals(2, lp.topId(1));
        assertEquals(lp.topLogprob(0), lp.logprob());   // token 4 is as likely as 1

        TokenLogprobs many = new TokenLogprobs(20);
        many.compute(logits, 0, 5, 3);
        assertEquals(5, many.count());
        assertArrayEquals(new int[] {1, 2, 4, 0, 3}, IntStream.range(0, 5).map(many::topId).toArray());
        double total = IntStream.range(0, 5).mapToDouble(k -> Math.exp(many.topLogprob(k))).sum();
        assertEquals(1.0, total, 1e-6, "the whole vocabulary's probabilities sum to 1");
    }

    @Test
    void noTopTokensStillGivesTheChosenOnesAndTheLimitIsTwenty() {
        TokenLogprobs lp = new TokenLogprobs(0);
        lp.compute(new float[] {0f, 0f}, 0, 2, 1);
        assertEquals(0, lp.count());
        assertEquals((float) Math.log(0.5), lp.logprob(), 1e-7);
        assertThrows(IllegalArgumentException.class, () -> new TokenLogprobs(21));
        assertThrows(IllegalArgumentException.class, () -> new TokenLogprobs(-1));
    }
}
