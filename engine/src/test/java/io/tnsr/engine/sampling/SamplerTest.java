package io.tnsr.engine.sampling;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.kernels.VectorOps;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/**
 * The sampler chooses what a plain one-token-at-a-time loop over the row chooses (softmax of logits / T with the
 * float exponential, its sum in double in vocabulary order, top-k by a full sort, the nucleus by the cumulative sum
 * in order, the walk of the CDF, in id order when neither top-k nor top-p is set): the same token from the same row and state, whatever the vector width, for
 * every vocabulary size around the vector's lanes, flat and peaked rows, ties and edge values.
 */
class SamplerTest {
    private static final List<SamplingConfig> CONFIGS = List.of(
            SamplingConfig.GREEDY,
            new SamplingConfig(0.8f, 0, 0.95f, 1),
            new SamplingConfig(0.8f, 40, 0.95f, 1),
            new SamplingConfig(1f, 0, 1f, 1),
            new SamplingConfig(1.3f, 5, 1f, 1),
            new SamplingConfig(0.5f, 0, 0.5f, 1),
            new SamplingConfig(0.7f, 1, 0.9f, 1),
            new SamplingConfig(2f, 0, 0.999f, 1));

    /** The choice as written plainly, element by element: the reference. */
    static int reference(SamplingConfig c, float[] logits, int off, int vocab, long[] state) {
        if (c.greedy()) {
            int best = 0;
            for (int i = 1; i < vocab; i++) {
                if (logits[off + i] > logits[off + best]) {
                    best = i;
                }
            }
            return best;
        }
        float inv = 1f / c.temperature();
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < vocab; i++) {
            max = Math.max(max, logits[off + i] * inv);
        }
        float[] p = new float[vocab];
        double sum = 0;
        for (int i = 0; i < vocab; i++) {
            p[i] = VectorOps.exp(logits[off + i] * inv - max);
            sum += p[i];
        }
        float norm = (float) (1.0 / sum);
        for (int i = 0; i < vocab; i++) {
            p[i] *= norm;
        }
        Comparator<Integer> likelyFirst = (a, b) -> p[a] != p[b] ? Float.compare(p[b], p[a]) : Integer.compare(a, b);
        int n = c.topK() > 0 && c.topK() < vocab ? c.topK() : vocab;
        // no top-k and no top-p: the whole vocabulary in id order (llama2.c's sample_mult)
        Integer[] sorted = IntStream.range(0, vocab).boxed().sorted(n == vocab && c.topP() >= 1f ? Comparator.naturalOrder()
                : likelyFirst).toArray(Integer[]::new);
        if (c.topP() < 1f) {
            float cum = 0f;
            for (int i = 0; i < n; i++) {
                cum += p[sorted[i]];
                if (cum >= c.topP()) {
                    n = i + 1;
                    break;
                }
            }
        }
        float total = 0f;
        for (int i = 0; i < n; i++) {
            total += p[sorted[i]];
        }
        float r = Sampler.nextFloat(state) * total;
        float cdf = 0f;
        for (int i = 0; i < n; i++) {
            cdf += p[sorted[i]];
            if (r < cdf) {
                return sorted[i];
            }
        }
        return sorted[n - 1];
    }

    private static void assertSameChoices(float[] rows, int vocab, String what) {
        int count = rows.length / vocab;
        for (SamplingConfig c : CONFIGS) {
            Sampler sampler = new Sampler(c, vocab);
            long[] state = {sampler.newRandomState(3)};
            long[] refState = state.clone();
            for (int row = 0; row < count; row++) {
                for (int draw = 0; draw < 4; draw++) {
                    int want = reference(c, rows, row * vocab, vocab, refState);
                    int got = sampler.sample(rows, row * vocab, state);
                    assertEquals(want, got, what + ", vocab " + vocab + ", row " + row + ", draw " + draw + ", " + c);
                    assertEquals(refState[0], state[0], "random state in step: " + what + ", " + c);
                }
            }
        }
    }

    private static float[] rows(int vocab, int count, double spread, boolean peaked, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        float[] rows = new float[vocab * count];
        for (int i = 0; i < rows.length; i++) {
            rows[i] = (float) ((r.nextDouble() * 2 - 1) * spread);
        }
        for (int row = 0; peaked && row < count; row++) {
            for (int k = 0; k < Math.min(vocab, 8); k++) {
                rows[row * vocab + r.nextInt(vocab)] += 6 + 8 * (float) r.nextDouble();
            }
        }
        return rows;
    }

    @Test
    void choosesWhatThePlainLoopChoosesForFlatAndPeakedRows() {
        int lanes = VectorOps.F.length();
        for (int vocab : new int[] {1, 2, 3, lanes - 1, lanes, lanes + 1, 2 * lanes + 3, 100, 512, 4099}) {
            if (vocab < 1) {
                continue;
            }
            assertSameChoices(rows(vocab, 6, 2, false, vocab), vocab, "flat");
            assertSameChoices(rows(vocab, 6, 3, true, 31L * vocab), vocab, "peaked");
        }
    }

    @Test
    void oneSamplerServesSequencesOfDifferentSettingsAsALastStageDoes() {
        int vocab = 3001;
        float[] rows = rows(vocab, 8, 3, true, 77);
        Sampler shared = new Sampler(SamplingConfig.GREEDY, vocab);
        long[] state = {shared.newRandomState(1)};
        long[] refState = state.clone();
        for (int call = 0; call < 48; call++) {
            SamplingConfig c = CONFIGS.get(call % CONFIGS.size());
            int row = call % 8;
            assertEquals(reference(c, rows, row * vocab, vocab, refState), shared.sample(c, rows, row * vocab, state),
                    "call " + call + ", " + c);
        }
    }

    @Test
    void tiesGoToTheLowerIdInEveryPath() {
        int vocab = 301;
        float[] rows = new float[vocab * 4];
        SplittableRandom r = new SplittableRandom(5);
        for (int i = 0; i < rows.length; i++) {
            rows[i] = r.nextInt(4) * 0.5f; // four values only: ties everywhere, at the maximum too
        }
        Arrays.fill(rows, 2 * vocab, 3 * vocab, 1f); // a row of one value
        rows[3 * vocab + 7] = 0f;                    // -0 and +0 sharing the maximum of a row below zero
        Arrays.fill(rows, 3 * vocab, 3 * vocab + 7, -1f);
        Arrays.fill(rows, 3 * vocab + 8, 4 * vocab, -1f);
        rows[3 * vocab + 200] = -0f;
        assertSameChoices(rows, vocab, "ties");
        assertEquals(7, Sampler.argmax(rows, 3 * vocab, vocab), "the first of +0 and -0");
        rows[3 * vocab + 5] = -0f;
        assertEquals(5, Sampler.argmax(rows, 3 * vocab, vocab), "-0 first: it is the first largest");
    }

    @Test
    void greedyIgnoresNaNAsTheScalarRuleDoesAndFindsInfinities() {
        int vocab = 77;
        float[] row = rows(vocab, 1, 1, false, 9);
        row[40] = Float.NaN;
        assertEquals(reference(SamplingConfig.GREEDY, row, 0, vocab, new long[1]), Sampler.argmax(row, 0, vocab));
        row[0] = Float.NaN;
        assertEquals(0, Sampler.argmax(row, 0, vocab), "NaN first: nothing compares larger");
        row[0] = 0f;
        row[63] = Float.POSITIVE_INFINITY;
        assertEquals(63, Sampler.argmax(row, 0, vocab));
        Arrays.fill(row, Float.NEGATIVE_INFINITY);
        assertEquals(0, Sampler.argmax(row, 0, vocab));
    }

    @Test
    void aRowWithANaNOrAnInfiniteMaximumCannotBeSampledAndDrawsNothing() {
        int vocab = 300;
        List<SamplingConfig> configs = List.of(SamplingConfig.GREEDY, new SamplingConfig(0.8f, 0, 1f, 1),
                new SamplingConfig(0.8f, 40, 1f, 1), new SamplingConfig(0.8f, 0, 0.95f, 1), new SamplingConfig(1.2f, 40, 0.9f, 1));
        for (SamplingConfig c : configs) {
            Sampler s = new Sampler(c, vocab);
            float[] row = rows(vocab, 1, 1, false, 5);
            row[123] = Float.NaN;
            row[200] = Float.NaN;
            long[] state = {s.newRandomState(3)};
            long before = state[0];
            NonFiniteLogitsException e = assertThrows(NonFiniteLogitsException.class, () -> s.sample(row, 0, state), c.toString());
            assertTrue(e.getMessage().contains("2 of the 300 logits are NaN (the first at token 123)"), e.getMessage());
            assertEquals(before, state[0], "no number drawn from the sequence's stream");
            row[123] = 1f;
            row[200] = Float.POSITIVE_INFINITY;
            e = assertThrows(NonFiniteLogitsException.class, () -> s.sample(row, 0, state), c.toString());
            assertTrue(e.getMessage().contains("the largest logit is +Infinity"), e.getMessage());
            Arrays.fill(row, Float.NEGATIVE_INFINITY);
            e = assertThrows(NonFiniteLogitsException.class, () -> s.sample(row, 0, state), c.toString());
            assertTrue(e.getMessage().contains("every logit is -Infinity"), e.getMessage());
            row[7] = 2f; // -Infinity elsewhere is a masked token: the row samples, never one of those
            row[250] = 1f;
            for (int k = 0; k < 20; k++) {
                int t = s.sample(row, 0, state);
                assertTrue(t == 7 || t == 250, c + ": " + t);
            }
        }
        Sampler cold = new Sampler(new SamplingConfig(1e-3f, 0, 1f, 1), 4);
        NonFiniteLogitsException e = assertThrows(NonFiniteLogitsException.class,
                () -> cold.sample(new float[] {1f, 3e37f, 2f, 0f}, 0, new long[] {1}));
        assertTrue(e.getMessage().contains("overflows divided by the temperature"), e.getMessage());
    }

    @Test
    void topKOfOneAndATinyNucleusAreGreedy() {
        int vocab = 1000;
        float[] rows = rows(vocab, 8, 4, true, 17);
        Sampler one = new Sampler(new SamplingConfig(1f, 1, 1f, 1), vocab);
        Sampler nucleus = new Sampler(new SamplingConfig(1f, 0, 1e-6f, 1), vocab);
        long[] state = {one.newRandomState(0)};
        for (int row = 0; row < 8; row++) {
            int best = Sampler.argmax(rows, row * vocab, vocab);
            assertEquals(best, one.sample(rows, row * vocab, state));
            assertEquals(best, nucleus.sample(rows, row * vocab, state));
        }
    }

    @Test
    void aNucleusBelowOneOverTheVocabularyKeepsTheMostLikelyTokenOfAUniformRow() {
        float[] row = new float[1000]; // every token 1 / 1000, under the pruning bound (1 - p) / 999
        Sampler s = new Sampler(new SamplingConfig(1f, 0, 1e-6f, 1), row.length);
        assertEquals(0, s.sample(row, 0, new long[] {s.newRandomState(0)}), "the lowest id of a tie");
        Sampler one = new Sampler(new SamplingConfig(0.8f, 0, 0.5f, 1), 1);
        assertEquals(0, one.sample(new float[] {3f}, 0, new long[] {one.newRandomState(0)}), "a vocabulary of one");
    }

    @Test
    void drawsFollowTheDistribution() {
        float[] logits = {0f, (float) Math.log(3), Float.NEGATIVE_INFINITY, (float) Math.log(6)}; // 0.1, 0.3, 0, 0.6
        Sampler s = new Sampler(new SamplingConfig(1f, 0, 1f, 1), logits.length);
        long[] state = {s.newRandomState(0)};
        int[] counts = new int[logits.length];
        int draws = 20_000;
        for (int i = 0; i < draws; i++) {
            counts[s.sample(logits, 0, state)]++;
        }
        assertEquals(0, counts[2], "a token of probability 0 is never drawn");
        // binomial standard deviations at 20000 draws: 42, 65, 69; five of them either side
        assertTrue(Math.abs(counts[0] - 2000) < 212 && Math.abs(counts[1] - 6000) < 325 && Math.abs(counts[3] - 12000) < 347,
                Arrays.toString(counts));
    }
}
