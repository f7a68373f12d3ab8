package io.tnsr.engine.loadgen;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Flow;

/**
 * Reads one streamed {@code /v1/completions} answer line by line as the HTTP client decodes it, timing each event
 * when it arrives: Server-Sent Events {@code data: {...}} lines holding {@code text_completion} chunks
 * ({@code choices[0].text}), a chunk with {@code finish_reason}, optionally a chunk with {@code usage}, then
 * {@code data: [DONE]}. A non-200 answer is read as an OpenAI error object instead. Keeps counts only, never the
 * text, so a long stream costs no memory.
 *
 * <p>Completes {@link #outcome()} once: when the body ends, fails, or {@link #cancel} is called (a timeout).
 */
final class SseCompletionSubscriber implements Flow.Subscriber<String> {
    /** Characters of an error body kept for the report. */
    static final int MAX_ERROR_CHARS = 500;

    private final long sendNanos;
    private final CompletableFuture<Outcome> outcome = new CompletableFuture<>();
    private volatile int status;
    private volatile Flow.Subscription subscription;
    private final StringBuilder errorBody = new StringBuilder();
    private long firstTokenNanos;
    private long doneNanos;
    private int chunks;
    private long promptTokens = -1;
    private long completionTokens = -1;
    private boolean finished;
    private String streamError;

    SseCompletionSubscriber(long sendNanos) {
        this.sendNanos = sendNanos;
    }

    /** Completed once with what the request came to. */
    CompletableFuture<Outcome> outcome() {
        return outcome;
    }

    /** The HTTP status, given by the body handler before the body flows. */
    void status(int code) {
        status = code;
    }

    @Override
    public void onSubscribe(Flow.Subscription s) {
        subscription = s;
        if (outcome.isDone()) {
            s.cancel();
        } else {
            s.request(Long.MAX_VALUE);
        }
    }

    @Override
    public void onNext(String line) {
        long now = System.nanoTime();
        if (status != 200) {
            if (errorBody.length() < MAX_ERROR_CHARS) {
                errorBody.append(line, 0, Math.min(line.length(), MAX_ERROR_CHARS - errorBody.length()));
            }
            return;
        }
        if (!line.startsWith("data:") || doneNanos != 0) {
            return;   // comments (":"), "event:", "id:", blank separators, anything after [DONE]
        }
        String data = line.substring(5).strip();
        if (data.equals("[DONE]")) {
            doneNanos = now;
        } else if (!data.isEmpty()) {
            event(data, now);
        }
    }

    private void event(String data, long now) {
        JsonNode e;
        try {
            e = Jackson.MAPPER.readTree(data);
        } catch (IOException ex) {
            streamError = streamError != null ? streamError : "an event is not JSON: " + clip(data);
            return;
        }
        if (e == null || !e.isObject()) {
            return;
        }
        if (e.hasNonNull("error")) {
            streamError = streamError != null ? streamError : errorMessage(e);
            return;
        }
        JsonNode choice = e.path("choices").path(0);
        String text = choice.path("text").asText("");
        if (!text.isEmpty()) {
            if (firstTokenNanos == 0) {
                firstTokenNanos = now;
            }
            chunks++;
        }
        if (choice.hasNonNull("finish_reason")) {
            finished = true;
        }
        JsonNode usage = e.get("usage");
        if (usage != null && usage.isObject()) {
            promptTokens = usage.path("prompt_tokens").asLong(-1);
            completionTokens = usage.path("completion_tokens").asLong(-1);
        }
    }

    @Override
    public void onError(Throwable t) {
        outcome.complete(Outcome.failed(Failures.category(t), Failures.message(t), sendNanos, System.nanoTime()));
    }

    @Override
    public void onComplete() {
        long end = doneNanos != 0 ? doneNanos : System.nanoTime();
        if (status != 200) {
            outcome.complete(Outcome.failed("HTTP " + status, bodyMessage(), sendNanos, end));
        } else if (streamError != null) {
            outcome.complete(Outcome.failed("stream error", streamError, sendNanos, end));
        } else if (doneNanos == 0 && !finished) {
            outcome.complete(Outcome.failed("incomplete stream", "the stream ended without a finish_reason or [DONE]",
                    sendNanos, end));
        } else {
            outcome.complete(new Outcome(null, null, sendNanos, firstTokenNanos, end, chunks, promptTokens,
                    completionTokens));
        }
    }

    /** Ends the request now (a timeout): the outcome is {@code failure}, the body stops flowing. */
    void cancel(Outcome failure) {
        if (outcome.complete(failure)) {
            Flow.Subscription s = subscription;
            if (s != null) {
                s.cancel();
            }
        }
    }

    /** error.message of an OpenAI error body, or the body itself. */
    private String bodyMessage() {
        String body = errorBody.toString().strip();
        try {
            JsonNode e = Jackson.MAPPER.readTree(body);
            if (e != null && e.hasNonNull("error")) {
                return errorMessage(e);
            }
        } catch (IOException ignored) {
            // not JSON: the body as it is
        }
        return body.isEmpty() ? null : clip(body);
    }

    private static String errorMessage(JsonNode e) {
        JsonNode err = e.get("error");
        return clip(err.isObject() ? err.path("message").asText(err.toString()) : err.asText());
    }

    static String clip(String s) {
        String one = s.replaceAll("\\s+", " ");
        return one.length() <= 200 ? one : one.substring(0, 200) + "...";
    }
}
