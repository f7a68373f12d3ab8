package io.tnsr.engine.sampling;

import io.tnsr.engine.kernels.VectorOps;
import io.tnsr.wire.FrameValidator;

/**
 * The log-probabilities of one chosen token: its own and those of the {@link #top()} most likely tokens, under the
 * model's distribution as OpenAI reports it (log-softmax of the raw logits: temperature 1, before top-k and top-p).
 * One per sequence that asks for them, overwritten by each token chosen; computed from a logits row by
 * {@link #compute} (in the last stage, or in the coordinator when it reads logits) or set from a SAMPLED frame by
 * {@link #set}. Both give the same values for the same logits. Allocates nothing after construction.
 *
 * <p>{@code logprob(i) = (l[i] - max) - ln(sum_j e^(l[j] - max))}, with {@code e^x} as {@link VectorOps#exp}
 * computes it (the sampler's softmax) and the sum in double.
 */
public final class TokenLogprobs {
    /** Most top tokens a sequence may ask for (OpenAI's {@code top_logprobs} limit; a SAMPLED row's room). */
    public static final int MAX_TOP = FrameValidator.MAX_TOP_LOGPROBS;

    /** Logits per block of {@link #exps}: a few vectors, in L1. */
    private static final int EXP_BLOCK = 256;

    private final int top;
    /** A block of {@code e^(l - max)}, each the bits of {@link VectorOps#exp}. */
    private final float[] exps = new float[EXP_BLOCK];
    private final int[] ids;
    private final float[] logprobs;
    private int count;
    private int token = -1;
    private float logprob;

    /** @param top how many of the most likely tokens to report beside the chosen one, 0..{@value #MAX_TOP} */
    public TokenLogprobs(int top) {
        if (top < 0 || top > MAX_TOP) {
            throw new IllegalArgumentException("top log-probabilities must be 0 to " + MAX_TOP + ", got " + top);
        }
        this.top = top;
        this.ids = new int[Math.max(1, top)];
        this.logprobs = new float[Math.max(1, top)];
    }

    /** How many of the most likely tokens are reported beside the chosen one. */
    public int top() {
        return top;
    }

    /** Computes the values of token {@code chosen} from {@code logits[off, off + vocab)}. */
    public void compute(float[] logits, int off, int vocab, int chosen) {
        float max = VectorOps.max(logits, off, vocab);
        double sum = 0;
        for (int i0 = 0; i0 < vocab; i0 += EXP_BLOCK) { // the exponentials a block at a time in vectors, summed in order
            int len = Math.min(EXP_BLOCK, vocab - i0);
            System.arraycopy(logits, off + i0, exps, 0, len);
            VectorOps.expShifted(exps, 0, len, max);
            for (int i = 0; i < len; i++) {
                sum += exps[i];
            }
        }
        float logZ = (float) StrictMath.log(sum);
        int n = 0;
        for (int i = 0; i < vocab && top > 0; i++) {
            float v = logits[off + i];
            if (n == top && !(v > logprobs[n - 1])) {
                continue;   // not above the k-th best so far (a later equal value loses: lower id first)
            }
            int at = n < top ? n++ : n - 1;
            while (at > 0 && v > logprobs[at - 1]) {
                logprobs[at] = logprobs[at - 1];
                ids[at] = ids[at - 1];
                at--;
            }
            logprobs[at] = v;
            ids[at] = i;
        }
        for (int i = 0; i < n; i++) {
            logprobs[i] = (logprobs[i] - max) - logZ;
        }
        this.count = n;
        this.token = chosen;
        this.logprob = (logits[off + chosen] - max) - logZ;
    }

    /** Sets the values another process computed: the chosen token and its log-probability; then {@link #setTop}. */
    public void set(int chosen, float chosenLogprob) {
        this.token = chosen;
        this.logprob = chosenLogprob;
        this.count = 0;
    }

    /** Appends the next most likely token of a {@link #set} (ignored beyond {@link #top()}). */
    public void setTop(int id, float value) {
        if (count < top) {
            ids[count] = id;
            logprobs[count++] = value;
        }
    }

    /** The chosen token. */
    public int token() {
        return token;
    }

    /** The chosen token's log-probability. */
    public float logprob() {
        return logprob;
    }

    /** How many top tokens are set (at most {@link #top()}; fewer when the vocabulary is smaller). */
    public int count() {
        return count;
    }

    /** The i-th most likely token. */
    public int topId(int i) {
        return ids[i];
    }

    /** The i-th most likely token's log-probability. */
    public float topLogprob(int i) {
        return logprobs[i];
    }
}
