package io.tnsr.engine.generate;

import io.tnsr.engine.sampling.NonFiniteLogitsException;
import io.tnsr.engine.sampling.Sampler;

/**
 * Chooses a sequence's next token from its logits row: sample, let the sequence accept it, tell the listener. The one
 * place where tokens are chosen, for the in-process {@link Generator} and for the pipeline's scheduler alike, so both
 * give the same tokens for the same logits. Allocates nothing.
 */
public final class TokenChooser {
    /** {@link #choose} bit: the token was kept (added to the text; a stopping EOS or BOS is not). */
    public static final int KEPT = 1;
    /** {@link #choose} bit: it was the sequence's first chosen token, kept or not. */
    public static final int FIRST = 2;
    /** {@link #choose} bit: the sequence is finished (stop token, token limit or context full). */
    public static final int DONE = 4;
    /** {@link #choose} bit, with {@link #DONE}: its logits could not be sampled, and the sequence has failed. */
    public static final int FAILED = 8;

    private final Generator.Listener listener;

    public TokenChooser(Generator.Listener listener) {
        this.listener = listener;
    }

    /**
     * Samples from {@code logits[offset, offset + vocab)} with the sequence's sampler and random state, records the token and, if
     * it is kept, tells the listener ({@link Generator.Listener#onToken}). The caller ends a finished sequence (frees
     * its cache, then {@link #finished}).
     *
     * @return {@link #KEPT}, {@link #FIRST} and {@link #DONE} bits; {@link #DONE} and {@link #FAILED} when the row holds
     *         no token to choose (NaN or infinite logits: {@link NonFiniteLogitsException}), the sequence then failed
     */
    public int choose(SequenceState s, float[] logits, int offset, long nowNanos) {
        int token;
        try {
            token = s.sampler().sample(logits, offset, s.randomState());
        } catch (NonFiniteLogitsException e) { // this sequence fails alone
            s.fail("sequence " + s.index() + " at position " + s.nextPosition() + ": " + e.getMessage());
            return DONE | FAILED;
        }
        if (s.logprobs() != null) {
            s.logprobs().compute(logits, offset, s.sampler().vocab(), token);
        }
        return take(s, token, nowNanos);
    }

    /**
     * As {@link #choose}, for a token another process sampled with the sequence's sampler settings from its random
     * state as it stands: the state moves on as that sampling moved it ({@link Sampler#advance}), so that the
     * sequence's state stays the stage's and a replay draws the same numbers. When the sequence asked for
     * log-probabilities, the caller has {@link io.tnsr.engine.sampling.TokenLogprobs#set set} them first.
     */
    public int accept(SequenceState s, int token, long nowNanos) {
        Sampler.advance(s.sampler().config(), s.randomState());
        return take(s, token, nowNanos);
    }

    private int take(SequenceState s, int token, long nowNanos) {
        int before = s.generatedCount();
        boolean done = s.accept(token, nowNanos);
        int result = before == 0 ? FIRST : 0;
        if (s.generatedCount() > before) {
            result |= KEPT;
            listener.onToken(s, token);
        }
        return done ? result | DONE : result;
    }

    /** Tells the listener that a sequence ended (finished, failed, or refused before it started). */
    public void finished(SequenceState s) {
        listener.onFinished(s);
    }
}
