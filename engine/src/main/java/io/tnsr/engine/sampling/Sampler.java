package io.tnsr.engine.sampling;

import io.tnsr.engine.kernels.VectorOps;
import java.util.Arrays;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * Chooses a token from one row of logits: greedy, or temperature with optional top-k and top-p (nucleus).
 *
 * <p>One sampler serves many sequences: the random state is passed in per call ({@link #newRandomState}), so
 * each sequence has its own reproducible stream. Scratch arrays are sized once for the vocabulary, on the first call
 * that needs them; after that, sampling allocates nothing. Not thread-safe.
 */
public final class Sampler {
    private static final VectorSpecies<Float> F = VectorOps.F;
    private static final int L = F.length();
    /** Candidates up to this many are sorted by insertion, more by radix ({@link #sortByProbability}). */
    private static final int INSERTION_SORT_MAX = 48;
    private static final int DIGIT_BITS = 11;
    private static final int DIGIT_MASK = (1 << DIGIT_BITS) - 1;
    private final SamplingConfig config;
    private final int vocab;
    // Scratch, [vocab] each, made by the first call that samples with a temperature (a coordinator's per-sequence
    // samplers mostly never do: the last stage chooses): the probabilities; the candidate ids, most likely first
    // after selection; sortByProbability's keys, and the ids and keys it moves them to; and a digit's counts.
    private float[] probs;
    private int[] order;
    private int[] sortKeys;
    private int[] sortIds;
    private int[] sortKeysToo;
    private int[] digits;
    /** Whether order[] holds 0, 1, ..., vocab - 1 (left by a call without top-k and top-p). */
    private boolean orderIsIds;

    public Sampler(SamplingConfig config, int vocab) {
        this.config = config;
        this.vocab = vocab;
    }

    public SamplingConfig config() {
        return config;
    }

    /** The vocabulary size: the length of a logits row. */
    public int vocab() {
        return vocab;
    }

    /** Initial random state of sequence number {@code sequenceIndex} (xorshift64*; never 0). */
    public long newRandomState(int sequenceIndex) {
        long s = config.seed() * 0x9E3779B97F4A7C15L + (sequenceIndex + 1) * 0xBF58476D1CE4E5B9L;
        s ^= s >>> 31;
        return s == 0 ? 0x2545F4914F6CDD1DL : s;
    }

    /** Index of the largest value of logits[off..off+vocab); the first one on ties. */
    public static int argmax(float[] logits, int off, int vocab) {
        return argmax(logits, off, vocab, VectorOps.max(logits, off, vocab));
    }

    /** {@link #argmax(float[], int, int)} given the row's {@link VectorOps#max}. */
    private static int argmax(float[] logits, int off, int vocab, float max) {
        int bound = F.loopBound(vocab);
        if (Float.isNaN(max)) { // the scalar rule: NaN never compares larger, so it only wins at index 0
            return firstLargest(logits, off, vocab);
        }
        for (int i = 0; i < bound; i += L) { // -0 == +0: the first zero of either sign, as the scalar rule takes
            VectorMask<Float> at = FloatVector.fromArray(F, logits, off + i).compare(VectorOperators.EQ, max);
            if (at.anyTrue()) {
                return i + at.firstTrue();
            }
        }
        for (int i = bound; i < vocab; i++) {
            if (logits[off + i] == max) {
                return i;
            }
        }
        return firstLargest(logits, off, vocab);
    }

    /** The first index whose value is larger than every one before it, and than none after it. */
    private static int firstLargest(float[] logits, int off, int vocab) {
        int best = 0;
        float max = logits[off];
        for (int i = 1; i < vocab; i++) {
            if (logits[off + i] > max) {
                max = logits[off + i];
                best = i;
            }
        }
        return best;
    }

    /**
     * Chooses a token from logits[off..off+vocab).
     *
     * @param state the sequence's random state, one element, advanced in place
     */
    public int sample(float[] logits, int off, long[] state) {
        return sample(config, logits, off, state);
    }

    /**
     * Chooses a token from logits[off..off+vocab) as {@code config} says (its seed is not used: {@code state} is the
     * sequence's stream), so that one sampler's scratch serves sequences with different settings (a last stage).
     * Draws exactly one number from {@code state} unless greedy ({@link #advance} keeps a copy of the state in step).
     *
     * <p>The probabilities: {@code p = exp(logit / T - max)} (each the bits of {@link VectorOps#exp}), their sum in
     * double precision in vocabulary order, each p times the float of its inverse. The element-wise passes run as
     * vectors, the sum and the walks over the candidates in their one order, so a choice depends only on the row and
     * the state.
     *
     * @throws NonFiniteLogitsException when the row holds a NaN or its largest value is infinite (after the
     *         temperature's scaling, which can overflow): nothing is drawn from {@code state} then
     */
    public int sample(SamplingConfig config, float[] logits, int off, long[] state) {
        if (config.greedy()) {
            float max = VectorOps.max(logits, off, vocab);
            if (!Float.isFinite(max)) {
                throw NonFiniteLogitsException.of(logits, off, vocab, 0f);
            }
            return argmax(logits, off, vocab, max);
        }
        if (probs == null) {
            probs = new float[vocab];
            order = new int[vocab];
            sortKeys = new int[vocab];
            sortIds = new int[vocab];
            sortKeysToo = new int[vocab];
            digits = new int[1 << DIGIT_BITS];
        }
        System.arraycopy(logits, off, probs, 0, vocab);
        VectorOps.scale(probs, 0, 1f / config.temperature(), vocab);
        float max = VectorOps.max(probs, 0, vocab);
        if (!Float.isFinite(max)) { // exp(x - max) would be NaN for every token
            throw NonFiniteLogitsException.of(logits, off, vocab, config.temperature());
        }
        VectorOps.expShifted(probs, 0, vocab, max);
        double sum = 0;
        for (int i = 0; i < vocab; i++) {
            sum += probs[i];
        }
        VectorOps.scale(probs, 0, (float) (1.0 / sum), vocab);
        int n = candidates(config);
        float total = 0f;
        for (int i = 0; i < n; i++) {
            total += probs[order[i]];
        }
        float r = nextFloat(state) * total;
        float cdf = 0f;
        for (int i = 0; i < n; i++) {
            cdf += probs[order[i]];
            if (r < cdf) {
                return order[i];
            }
        }
        return order[n - 1];
    }

    /** Fills order[0..n) with the tokens top-k and top-p keep, most likely first; returns n. */
    private int candidates(SamplingConfig config) {
        int k = config.topK() > 0 && config.topK() < vocab ? config.topK() : vocab;
        float topP = config.topP();
        if (k == vocab && topP >= 1f) {
            if (!orderIsIds) { // the whole vocabulary in id order: written once while settings stay the same
                for (int i = 0; i < vocab; i++) {
                    order[i] = i;
                }
                orderIsIds = true;
            }
            return vocab;
        }
        orderIsIds = false;
        // Below (1 - p) / (vocab - 1) a token cannot be in the nucleus; never above 1 / vocab, which the most likely
        // token reaches (a uniform row with p under 1 / vocab, or a vocabulary of one, would otherwise keep none).
        int n = k < vocab ? topK(k) : atLeast(Math.min((1f - topP) / (vocab - 1), 1f / vocab));
        sortByProbability(n);
        if (topP < 1f) {
            float cum = 0f;
            for (int i = 0; i < n; i++) {
                cum += probs[order[i]];
                if (cum >= topP) {
                    return i + 1;
                }
            }
        }
        return n;
    }

    /**
     * The tokens whose probability is at least {@code cutoff} into order[0..n), in id order; returns n. The nucleus
     * is among them (as llama2.c prunes): far fewer to sort.
     */
    private int atLeast(float cutoff) {
        int n = 0;
        int bound = F.loopBound(vocab);
        for (int i0 = 0; i0 < bound; i0 += L) { // a vector of tokens at a time, most of them below the cutoff
            if (FloatVector.fromArray(F, probs, i0).compare(VectorOperators.GE, cutoff).anyTrue()) {
                for (int i = i0; i < i0 + L; i++) {
                    if (probs[i] >= cutoff) {
                        order[n++] = i;
                    }
                }
            }
        }
        for (int i = bound; i < vocab; i++) {
            if (probs[i] >= cutoff) {
                order[n++] = i;
            }
        }
        return n;
    }

    /**
     * The k most likely tokens into order[0..k) (ties: the lower id): a min-heap over the vocabulary, which a
     * vector of tokens none of which beats the heap's least skips whole.
     */
    private int topK(int k) {
        for (int i = 0; i < k; i++) {
            order[i] = i;
            siftUp(i);
        }
        int i = k;
        for (int last = vocab - L; i <= last; i += L) {
            if (FloatVector.fromArray(F, probs, i).compare(VectorOperators.GT, probs[order[0]]).anyTrue()) {
                for (int j = i; j < i + L; j++) {
                    offer(j, k);
                }
            }
        }
        for (; i < vocab; i++) {
            offer(i, k);
        }
        Arrays.sort(order, 0, k); // in id order, as sortByProbability takes them
        return k;
    }

    /** Token i replaces the heap's least when it is more likely. */
    private void offer(int i, int k) {
        if (probs[i] > probs[order[0]]) {
            order[0] = i;
            siftDown(0, k);
        }
    }

    private boolean less(int a, int b) {
        return probs[a] < probs[b] || (probs[a] == probs[b] && a > b);
    }

    private void siftUp(int i) {
        while (i > 0) {
            int parent = (i - 1) / 2;
            if (!less(order[i], order[parent])) {
                return;
            }
            swap(i, parent);
            i = parent;
        }
    }

    private void siftDown(int i, int n) {
        while (true) {
            int l = 2 * i + 1;
            int smallest = i;
            if (l < n && less(order[l], order[smallest])) {
                smallest = l;
            }
            if (l + 1 < n && less(order[l + 1], order[smallest])) {
                smallest = l + 1;
            }
            if (smallest == i) {
                return;
            }
            swap(i, smallest);
            i = smallest;
        }
    }

    private void swap(int a, int b) {
        int t = order[a];
        order[a] = order[b];
        order[b] = t;
    }

    /**
     * Sorts order[0..n), which holds ids in increasing order, most likely first, ties lower id first ({@link #less}'s
     * order), by a key whose increasing order is decreasing probability: {@code MAX_VALUE - bits}, a probability's bits
     * never being negative. Few tokens by insertion; more by a stable radix sort of 11-bit digits (three passes, fewer
     * where a digit is the same for all), which keeps ids in increasing order within a probability: a row of a model
     * with random weights keeps most of a 32000-token vocabulary in its nucleus, where a comparison sort of the ids
     * took 1.5 ms, SamplerBenchmark.
     */
    private void sortByProbability(int n) {
        int[] ids = order, keys = sortKeys;
        for (int i = 0; i < n; i++) {
            keys[i] = Integer.MAX_VALUE - Float.floatToRawIntBits(probs[ids[i]]);
        }
        if (n <= INSERTION_SORT_MAX) {
            for (int i = 1; i < n; i++) {
                int id = ids[i], key = keys[i], j = i - 1;
                for (; j >= 0 && keys[j] > key; j--) { // stable: an equal key stays after the lower id
                    ids[j + 1] = ids[j];
                    keys[j + 1] = keys[j];
                }
                ids[j + 1] = id;
                keys[j + 1] = key;
            }
            return;
        }
        int[] toIds = sortIds, toKeys = sortKeysToo;
        for (int shift = 0; shift < Integer.SIZE - 1; shift += DIGIT_BITS) {
            Arrays.fill(digits, 0);
            for (int i = 0; i < n; i++) {
                digits[(keys[i] >>> shift) & DIGIT_MASK]++;
            }
            if (digits[(keys[0] >>> shift) & DIGIT_MASK] == n) {
                continue; // every key has this digit: the pass would move nothing
            }
            for (int d = 0, at = 0; d < digits.length; d++) {
                int c = digits[d];
                digits[d] = at;
                at += c;
            }
            for (int i = 0; i < n; i++) {
                int at = digits[(keys[i] >>> shift) & DIGIT_MASK]++;
                toIds[at] = ids[i];
                toKeys[at] = keys[i];
            }
            int[] t = ids;
            ids = toIds;
            toIds = t;
            t = keys;
            keys = toKeys;
            toKeys = t;
        }
        if (ids != order) {
            System.arraycopy(ids, 0, order, 0, n);
        }
    }

    /**
     * Moves {@code state} on as {@link #sample(SamplingConfig, float[], int, long[])} does when it chose a token with
     * {@code config}: for a sequence whose tokens another process sampled from the same state.
     */
    public static void advance(SamplingConfig config, long[] state) {
        if (!config.greedy()) {
            nextFloat(state);
        }
    }

    /** Uniform in [0, 1) from the sequence's xorshift64* state. */
    static float nextFloat(long[] state) {
        long x = state[0];
        x ^= x >>> 12;
        x ^= x << 25;
        x ^= x >>> 27;
        state[0] = x;
        return ((x * 0x2545F4914F6CDD1DL) >>> 40) / 16777216f;
    }
}
