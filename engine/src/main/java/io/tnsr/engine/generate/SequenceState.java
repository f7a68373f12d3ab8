package io.tnsr.engine.generate;

import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.TokenLogprobs;
import java.util.Arrays;
import java.util.function.IntPredicate;

/**
 * One sequence being generated: its prompt, the tokens chosen so far, where it is, and when it stops. Shared
 * by the single-process generator and the pipeline coordinator, so both stop and sample identically.
 *
 * <p>Position bookkeeping: the prompt's tokens occupy positions [0, promptLength); the i-th generated token is
 * fed back at position promptLength + i. {@link #nextPosition()} is where the next token to feed goes.
 */
public final class SequenceState {
    private final int index;
    private final String prompt;
    private final int[] promptTokens;
    private final int maxNewTokens;
    private final int contextLength;
    private final int bos;
    private final IntPredicate endOfGeneration;
    private final Sampler sampler;
    private final long[] random = new long[1];
    private TokenLogprobs logprobs;   // null unless asked for
    private int[] generated;
    private int generatedCount;
    private int prefilled;        // prompt (or replayed history) tokens already sent
    private int prefillLength;    // tokens to send before decoding: the prompt, or after a rewind the whole history
    private StopReason stoppedBy;
    private String error;
    private long startNanos;      // intended start: every latency of this sequence is measured from here
    private long admittedNanos;   // when it actually joined a micro-batch (coordinator only)
    private long admitByNanos;    // latest time it may join a micro-batch; 0: no limit
    private long firstTokenNanos;
    private long endNanos;

    /**
     * A sequence whose random choices are stream {@code index} of the sampler's seed (the k-th prompt of a run).
     *
     * @param bos             the BOS id: emitting it ends the sequence (TinyStories models end a story so)
     * @param endOfGeneration EOS and end-of-turn ids
     * @param sampler         how its tokens are chosen
     */
    public SequenceState(int index, String prompt, int[] promptTokens, int maxNewTokens, int contextLength, int bos,
                         IntPredicate endOfGeneration, Sampler sampler) {
        this(index, index, prompt, promptTokens, maxNewTokens, contextLength, bos, endOfGeneration, sampler);
    }

    /**
     * @param index        the sequence's id in the pipeline (unique among the sequences alive at once)
     * @param randomStream which of the sampler seed's random streams it draws from: the same stream gives the same
     *                     tokens, whatever the id
     */
    public SequenceState(int index, int randomStream, String prompt, int[] promptTokens, int maxNewTokens, int contextLength,
                         int bos, IntPredicate endOfGeneration, Sampler sampler) {
        if (promptTokens.length == 0) {
            throw new IllegalArgumentException("sequence " + index + ": empty prompt (not even BOS)");
        }
        this.index = index;
        this.prompt = prompt;
        this.promptTokens = promptTokens.clone();
        this.maxNewTokens = maxNewTokens;
        this.contextLength = contextLength;
        this.bos = bos;
        this.endOfGeneration = endOfGeneration;
        this.generated = new int[Math.max(16, Math.min(maxNewTokens, 4096))];
        this.sampler = sampler;
        this.random[0] = sampler.newRandomState(randomStream);
        this.prefillLength = promptTokens.length;
        if (promptTokens.length > contextLength) {
            fail("the prompt has " + promptTokens.length + " tokens but the model's context holds " + contextLength);
        } else if (maxNewTokens <= 0) {
            stoppedBy = StopReason.LIMIT;
        }
    }

    public int index() {
        return index;
    }

    public String prompt() {
        return prompt;
    }

    public int[] promptTokens() {
        return promptTokens.clone();
    }

    public int promptLength() {
        return promptTokens.length;
    }

    /** Tokens to send before decoding: the prompt, or after {@link #rewind} the whole history. */
    public int prefillLength() {
        return prefillLength;
    }

    /** Prompt tokens (or, after {@link #rewind}, history tokens) not yet sent for prefill. */
    public int prefillRemaining() {
        return prefillLength - prefilled;
    }

    /** Copies the next {@code n} prefill tokens to dst and marks them sent; returns their first position. */
    public int takePrefill(int n, int[] dst, int off) {
        int pos = prefilled;
        int fromPrompt = Math.max(0, Math.min(n, promptTokens.length - pos));
        if (fromPrompt > 0) {
            System.arraycopy(promptTokens, pos, dst, off, fromPrompt);
        }
        if (fromPrompt < n) {   // replaying history: the tokens chosen so far follow the prompt
            System.arraycopy(generated, pos + fromPrompt - promptTokens.length, dst, off + fromPrompt, n - fromPrompt);
        }
        prefilled += n;
        return pos;
    }

    /** Puts back {@code n} prefill tokens taken but not run (their batch failed for other reasons). */
    public void untakePrefill(int n) {
        prefilled -= n;
    }

    /**
     * The pipeline lost this sequence's KV cache (a stage was replaced): its whole history, the prompt and every
     * token chosen so far, is to be sent again as a prefill. The logits of its last token then give the next token,
     * exactly as the decode step that was lost would have (the kernels' results do not depend on the batch a row ran
     * in); nothing already chosen is chosen or emitted again, and the random state is untouched.
     */
    public void rewind() {
        prefilled = 0;
        prefillLength = promptTokens.length + generatedCount;
    }

    /** The token to feed next during decode: the last one chosen. */
    public int lastToken() {
        return generated[generatedCount - 1];
    }

    /** Position of the next token fed back: after the prompt and every generated token but the last. */
    public int nextPosition() {
        return promptTokens.length + generatedCount - 1;
    }

    /** How this sequence's tokens are chosen. */
    public Sampler sampler() {
        return sampler;
    }

    public long[] randomState() {
        return random;
    }

    /**
     * Asks for the log-probabilities of each chosen token and of the {@code top} most likely ones (before it starts):
     * {@link #logprobs()} holds those of the token last chosen when the listener hears of it.
     */
    public void wantLogprobs(int top) {
        this.logprobs = new TokenLogprobs(top);
    }

    /** The log-probabilities of the token last chosen, or null when the sequence did not ask for them. */
    public TokenLogprobs logprobs() {
        return logprobs;
    }

    public boolean finished() {
        return stoppedBy != null;
    }

    public StopReason stoppedBy() {
        return stoppedBy;
    }

    public String error() {
        return error;
    }

    public int generatedCount() {
        return generatedCount;
    }

    public int[] generatedTokens() {
        return Arrays.copyOf(generated, generatedCount);
    }

    /**
     * Sets the sequence's intended start, from which its time to first token and whole-request latency are
     * measured: the run's start in a closed loop (every sequence submitted at once), or its scheduled arrival
     * in an open loop ({@code run-pipeline --rate}), so that waiting for a busy pipeline counts against it
     * (no coordinated omission).
     */
    public void started(long nanos) {
        startNanos = nanos;
    }

    /** The intended start ({@link #started}). */
    public long intendedStartNanos() {
        return startNanos;
    }

    /** Records when the sequence actually joined a micro-batch (its first frame went out then or soon after). */
    public void admitted(long nanos) {
        admittedNanos = nanos;
    }

    /** When it joined a micro-batch (0 if it never did). */
    public long admittedNanos() {
        return admittedNanos;
    }

    /**
     * Records the token chosen from this sequence's logits and decides whether it ends the sequence: EOS or
     * BOS stop it (and are not kept), as do the token limit and a full context.
     *
     * @return true when the sequence has finished
     */
    public boolean accept(int token, long nanos) {
        if (firstTokenNanos == 0) {
            firstTokenNanos = nanos;
        }
        if (endOfGeneration.test(token)) {
            return stop(StopReason.EOS, nanos);
        }
        if (token == bos) {
            return stop(StopReason.BOS, nanos);
        }
        if (generatedCount == generated.length) {
            generated = Arrays.copyOf(generated, generated.length * 2);
        }
        generated[generatedCount++] = token;
        // Full context: the token just chosen would be fed back at a position the model does not have.
        if (generatedCount >= maxNewTokens || nextPosition() >= contextLength) {
            return stop(StopReason.LIMIT, nanos);
        }
        return false;
    }

    private boolean stop(StopReason reason, long nanos) {
        stoppedBy = reason;
        endNanos = nanos;
        return true;
    }

    /** Ends the sequence with an error; its message goes to the JSON output. */
    public void fail(String message) {
        error = message;
        stoppedBy = StopReason.ERROR;
        endNanos = System.nanoTime();
    }

    /** Sets the latest {@link System#nanoTime()} at which it may still join a micro-batch (before it is submitted). */
    public void admitBy(long nanos) {
        admitByNanos = nanos;
    }

    /** Whether it has a wait limit and {@code nowNanos} is past it. */
    public boolean waitExpired(long nowNanos) {
        return admitByNanos != 0 && nowNanos - admitByNanos > 0;
    }

    /** Ends the sequence before it ran: it waited longer than {@link #admitBy} allowed. */
    public void expire(long nanos) {
        stoppedBy = StopReason.EXPIRED;
        endNanos = nanos;
    }

    /** Ends the sequence because nobody wants the rest; the tokens so far stay. */
    public void cancel() {
        stoppedBy = StopReason.CANCELLED;
        endNanos = System.nanoTime();
    }

    /** Nanoseconds from start to the first generated token (0 if none). */
    public long timeToFirstTokenNanos() {
        return firstTokenNanos == 0 ? 0 : firstTokenNanos - startNanos;
    }

    public long elapsedNanos() {
        return endNanos == 0 ? 0 : endNanos - startNanos;
    }
}
