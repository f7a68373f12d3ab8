package io.tnsr.engine.loadgen;

import java.io.IOException;
import java.net.ConnectException;
import java.net.UnknownHostException;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpTimeoutException;
import java.nio.channels.UnresolvedAddressException;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;

/** Names the ways a request can fail without an HTTP status, in a few fixed categories (so counting them is bounded). */
final class Failures {
    private Failures() {
    }

    /** The exception under the wrappers the HTTP client and futures put around it. */
    static Throwable unwrap(Throwable t) {
        Throwable c = t;
        while ((c instanceof CompletionException || c instanceof ExecutionException) && c.getCause() != null) {
            c = c.getCause();
        }
        return c;
    }

    /** {@code timeout}, {@code connection failed}, {@code I/O error} or {@code client error}. */
    static String category(Throwable t) {
        Throwable c = unwrap(t);
        if (c instanceof HttpConnectTimeoutException || isConnectFailure(c)) {
            return "connection failed";
        }
        if (c instanceof HttpTimeoutException) {
            return "timeout";
        }
        if (c instanceof IOException) {
            return "I/O error";
        }
        return "client error";
    }

    /** Whether {@code t} says no connection could be made (refused, unknown host). */
    static boolean isConnectFailure(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ConnectException || c instanceof UnknownHostException
                    || c instanceof UnresolvedAddressException || c instanceof HttpConnectTimeoutException) {
                return true;
            }
        }
        return false;
    }

    /** One line: the innermost message worth showing. */
    static String message(Throwable t) {
        Throwable c = unwrap(t);
        String m = c.getMessage();
        if ((m == null || m.isBlank()) && c.getCause() != null) {
            m = c.getCause().toString();
        }
        return SseCompletionSubscriber.clip(m == null || m.isBlank() ? c.getClass().getSimpleName() : m);
    }
}
