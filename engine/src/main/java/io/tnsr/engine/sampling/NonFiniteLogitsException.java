package io.tnsr.engine.sampling;

import java.util.Locale;

/**
 * A logits row no token can be chosen from: it holds a NaN, or its largest value is infinite (+Infinity, or every
 * value -Infinity). A model whose weights or activations overflowed gives such rows; the caller fails the one
 * sequence the row belongs to, never its batch.
 */
public final class NonFiniteLogitsException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private NonFiniteLogitsException(String message) {
        super(message, null, false, false);
    }

    /**
     * The exception for {@code logits[off, off + vocab)}, sampled at {@code temperature} (0: greedy), saying what is
     * wrong with it: NaNs (how many, the first), +Infinity, every value -Infinity, or a finite largest logit that
     * overflows once divided by the temperature.
     */
    static NonFiniteLogitsException of(float[] logits, int off, int vocab, float temperature) {
        int nan = 0;
        int first = -1;
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < vocab; i++) {
            float v = logits[off + i];
            if (Float.isNaN(v)) {
                nan++;
                first = first < 0 ? i : first;
            } else {
                max = Math.max(max, v);
            }
        }
        String what;
        if (nan > 0) {
            what = String.format(Locale.ROOT, "%d of the %d logits are NaN (the first at token %d)", nan, vocab, first);
        } else if (max == Float.NEGATIVE_INFINITY) {
            what = "every logit is -Infinity";
        } else if (max == Float.POSITIVE_INFINITY) {
            what = "the largest logit is +Infinity";
        } else {
            what = String.format(Locale.ROOT, "the largest logit, %g, overflows divided by the temperature %g", max,
                    temperature);
        }
        return new NonFiniteLogitsException(what + ": no token can be chosen (the model's activations overflowed?)");
    }
}
