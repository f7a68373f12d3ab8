package io.tnsr.engine.server;

import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.engine.tokenizer.StreamingDecoder;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * One completion as it runs: its sequence, its text so far in whole characters, where a stop string cut it, and what
 * the client has not been given yet. Tokens arrive on the coordinator's thread ({@link #onToken}, {@link #onFinished});
 * the request's own thread takes the text ({@link #nextDelta}, {@link #awaitText}): the hand-off is synchronized, and
 * the coordinator never waits for a client.
 *
 * <p>Stop strings: the text is searched as it grows; the first stop string found ends the text just before it (the
 * stop string itself is not part of it) and the sequence is ended. Until a possible stop string is complete, the
 * characters that could start one are held back from {@link #nextDelta}, so a streamed client never sees text that a
 * stop string then takes away.
 */
public final class Completion {
    /** Why the text ended, as OpenAI's {@code finish_reason} says it. */
    public enum Finish {
        /** An end-of-generation token or a stop string. */
        STOP("stop"),
        /** The token limit or the model's context. */
        LENGTH("length"),
        /** The pipeline could not run it (the message says why). */
        ERROR("error"),
        /** The client went away. */
        CANCELLED("cancelled"),
        /** It waited for a place longer than the server allows, and never ran (an HTTP server answers 503). */
        EXPIRED("expired");

        private final String json;

        Finish(String json) {
            this.json = json;
        }

        public String json() {
            return json;
        }
    }

    /**
     * One generated token's log-probabilities, as a request asked for them.
     *
     * @param textOffset where the token's text starts in the completion's text (chars)
     * @param topIds     the most likely tokens, most likely first
     */
    public record TokenLogprob(int token, float logprob, int textOffset, int[] topIds, float[] topLogprobs) {
        static TokenLogprob of(TokenLogprobs lp, int textOffset) {
            int[] ids = new int[lp.count()];
            float[] values = new float[lp.count()];
            for (int i = 0; i < ids.length; i++) {
                ids[i] = lp.topId(i);
                values[i] = lp.topLogprob(i);
            }
            return new TokenLogprob(lp.token(), lp.logprob(), textOffset, ids, values);
        }
    }

    private final SequenceState sequence;
    private final StreamingDecoder decoder;
    private final List<String> stops;
    private final int holdBack;                    // longest stop string - 1: what may still turn into one
    private final StringBuilder text = new StringBuilder();
    private int sent;                              // chars of text handed out by nextDelta
    private int searched;                          // chars of text already searched for stop strings
    private boolean stopped;                       // a stop string ended the text
    private Finish finish;
    private String error;
    private final List<TokenLogprob> logprobs = new ArrayList<>();   // one per kept token, when asked for
    private int logprobsGiven;                     // entries handed out by takeLogprobs
    private int logprobsReady;                     // entries of tokens generated before the last text handed out

    /**
     * @param decoder a decoder that has seen the prompt's last token (so that leading spaces come out right)
     * @param stops   stop strings, none empty
     */
    Completion(SequenceState sequence, StreamingDecoder decoder, List<String> stops) {
        this.sequence = sequence;
        this.decoder = decoder;
        this.stops = List.copyOf(stops);
        this.holdBack = stops.stream().mapToInt(String::length).max().orElse(1) - 1;
    }

    public SequenceState sequence() {
        return sequence;
    }

    /**
     * A token of this completion was chosen (coordinator thread), with its log-probabilities when the request asked
     * for them (else null).
     *
     * @return true when a stop string now ends the text: the caller ends the sequence
     */
    synchronized boolean onToken(int token, TokenLogprobs lp) {
        if (stopped || finish != null) {
            return false;
        }
        if (lp != null && lp.token() == token) {
            logprobs.add(TokenLogprob.of(lp, text.length()));
        }
        decoder.next(token, text);
        if (!stops.isEmpty()) {
            int cut = firstStop();
            if (cut >= 0) {
                text.setLength(cut);
                stopped = true;
                notifyAll();
                return true;
            }
        }
        notifyAll();
        return false;
    }

    /** The sequence ended (coordinator thread): the text is complete. */
    synchronized void onFinished() {
        if (!stopped) {
            decoder.finish(text);
        }
        finish = stopped ? Finish.STOP : switch (sequence.stoppedBy()) {
            case EOS, BOS -> Finish.STOP;
            case LIMIT -> Finish.LENGTH;
            case ERROR -> Finish.ERROR;
            case CANCELLED -> Finish.CANCELLED;
            case EXPIRED -> Finish.EXPIRED;
        };
        error = sequence.error();
        notifyAll();
    }

    /** Ends it with an error (the pipeline broke under it); a no-op once it has ended. */
    synchronized void fail(String message) {
        if (finish == null) {
            decoder.finish(text);
            finish = Finish.ERROR;
            error = message;
            notifyAll();
        }
    }

    /** Where the first stop string starts in the text, or -1; searches only what it has not searched before. */
    private int firstStop() {
        int from = Math.max(0, searched - holdBack);
        int best = -1;
        for (String s : stops) {
            int at = text.indexOf(s, from);
            if (at >= 0 && (best < 0 || at < best)) {
                best = at;
            }
        }
        searched = text.length();
        return best;
    }

    /**
     * The text not given out yet, waiting up to {@code timeoutMillis} for some; characters that may still begin a
     * stop string are kept back until they cannot.
     *
     * @return the new text ({@code ""} when none came in time), or null once the completion is finished and all of
     *         its text was given out
     */
    public synchronized String nextDelta(long timeoutMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (true) {
            int upTo = finish != null || stopped ? text.length() : Math.max(sent, text.length() - holdBack);
            if (upTo > sent) {
                String delta = text.substring(sent, upTo);
                sent = upTo;
                logprobsReady = logprobs.size();
                return delta;
            }
            if (finish != null) {
                logprobsReady = logprobs.size();
                return null;
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return "";
            }
            TimeUnit.NANOSECONDS.timedWait(this, left);
        }
    }

    /** Waits up to {@code timeoutMillis} for the end; the whole text, or null if it did not end in time. */
    public synchronized String awaitText(long timeoutMillis) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        while (finish == null) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            TimeUnit.NANOSECONDS.timedWait(this, left);
        }
        return text.toString();
    }

    /**
     * The log-probabilities not handed out yet of the tokens generated up to the text {@link #nextDelta} last gave
     * (all of them once it returned null): each entry is handed out once, in order.
     */
    public synchronized List<TokenLogprob> takeLogprobs() {
        List<TokenLogprob> out = List.copyOf(logprobs.subList(logprobsGiven, logprobsReady));
        logprobsGiven = logprobsReady;
        return out;
    }

    /** Every token's log-probabilities (when the request asked for them; else empty). */
    public synchronized List<TokenLogprob> logprobs() {
        return List.copyOf(logprobs);
    }

    /** Why it ended, or null while it runs. */
    public synchronized Finish finish() {
        return finish;
    }

    /** The pipeline's message when it ended with {@link Finish#ERROR}. */
    public synchronized String error() {
        return error;
    }

    /** Prompt tokens, for usage. */
    public int promptTokens() {
        return sequence.promptLength();
    }

    /** Tokens generated (a stopping token not counted), for usage. */
    public synchronized int completionTokens() {
        return sequence.generatedCount();
    }
}
