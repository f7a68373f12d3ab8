package io.tnsr.engine.loadgen;

/**
 * What one streamed completion request came to, as the client saw it: times are {@link System#nanoTime()} readings.
 *
 * @param error            null when the request succeeded; else its category: {@code HTTP 429}, {@code timeout},
 *                         {@code connection failed}, {@code stream error}, {@code incomplete stream}, ...
 * @param message          what the server or the exception said (one line, bounded), or null
 * @param sendNanos        when the request was handed to the HTTP client
 * @param firstTokenNanos  when the first non-empty text delta arrived; 0 if none did
 * @param endNanos         when the stream ended ({@code data: [DONE]}, or the body's end), or the request failed
 * @param contentChunks    events that carried non-empty text
 * @param promptTokens     {@code usage.prompt_tokens}, or -1 when the server sent no usage
 * @param completionTokens {@code usage.completion_tokens}, or -1 when the server sent no usage
 */
public record Outcome(String error, String message, long sendNanos, long firstTokenNanos, long endNanos,
                      int contentChunks, long promptTokens, long completionTokens) {

    /** A request that failed before or while streaming. */
    static Outcome failed(String error, String message, long sendNanos, long endNanos) {
        return new Outcome(error, message, sendNanos, 0, endNanos, 0, -1, -1);
    }

    public boolean ok() {
        return error == null;
    }

    /** Whether the token counts come from the server's usage chunk. */
    public boolean hasUsage() {
        return completionTokens >= 0;
    }

    /** Output tokens: usage.completion_tokens when the server sent it, else the text chunks counted. */
    public long outputTokens() {
        return hasUsage() ? completionTokens : contentChunks;
    }
}
