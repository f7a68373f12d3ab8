package io.tnsr.engine.sampling;

/**
 * Chooses a token from one row of logits: greedy, or temperature with optional top-k and top-p (nucleus).
 *
 * <p>One sampler serves many sequences: the random state is passed in per call ({@link #newRandomState}), so
 * each sequence has its own reproducible stream. Scratch arrays are sized once for the vocabulary; sampling
 * allocates nothing. Not thread-safe.
 */
public final class Sampler {
    private final SamplingConfig config;
    private final int vocab;
    private final float[] probs;   // [vocab]
    private final int[] order;     // [vocab] candidate ids, most likely first after selection

    public Sampler(SamplingConfig config, int vocab) {
        this.config = config;
        this.vocab = vocab;
        this.probs = new float[vocab];
        this.order = new int[vocab];
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
     */
    public int sample(SamplingConfig config, float[] logits, int off, long[] state) {
        if (config.greedy()) {
            return argmax(logits, off, vocab);
        }
        float inv = 1f / config.temperature();
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < vocab; i++) {
            max = Math.max(max, logits[off + i] * inv);
        }
        double sum = 0;
        for (int i = 0; i < vocab; i++) {
            float p = io.tnsr.engine.kernels.VectorOps.exp(logits[off + i] * inv - max); // the same bits compiled or not
            probs[i] = p;
            sum += p;
        }
        float norm = (float) (1.0 / sum);
        for (int i = 0; i < vocab; i++) {
            probs[i] *= norm;
        }
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
            for (int i = 0; i < vocab; i++) {
                order[i] = i;
            }
            return vocab;
        }
        int n = 0;
        if (k < vocab) {
            n = topK(k);
        } else {
            // Tokens below this cannot be in the nucleus (as llama2.c prunes): sorts far fewer.
            float cutoff = (1f - topP) / (vocab - 1);
            for (int i = 0; i < vocab; i++) {
                if (probs[i] >= cutoff) {
                    order[n++] = i;
                }
            }
            sortByProbability(0, n - 1);
        }
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

    /** The k most likely tokens into order[0..k), most likely first: a min-heap over the vocabulary. */
    private int topK(int k) {
        for (int i = 0; i < k; i++) {
            order[i] = i;
            siftUp(i);
        }
        for (int i = k; i < vocab; i++) {
            if (probs[i] > probs[order[0]]) {
                order[0] = i;
                siftDown(0, k);
            }
        }
        sortByProbability(0, k - 1);
        return k;
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

    /** Sorts order[lo..hi] most likely first (ties: lower id first); quicksort on primitives, no boxing. */
    private void sortByProbability(int lo, int hi) {
        while (lo < hi) {
            int pivot = order[(lo + hi) >>> 1];
            int i = lo;
            int j = hi;
            while (i <= j) {
                while (less(pivot, order[i])) {
                    i++;
                }
                while (less(order[j], pivot)) {
                    j--;
                }
                if (i <= j) {
                    swap(i++, j--);
                }
            }
            if (j - lo < hi - i) {
                sortByProbability(lo, j);
                lo = i;
            } else {
                sortByProbability(i, hi);
                hi = j;
            }
        }
    }

    private void swap(int a, int b) {
        int t = order[a];
        order[a] = order[b];
        order[b] = t;
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
