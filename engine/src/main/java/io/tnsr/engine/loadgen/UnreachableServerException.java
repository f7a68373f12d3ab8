package io.tnsr.engine.loadgen;

/** The server could not be reached at all (refused, unknown host, no answer): the benchmark cannot start. */
public final class UnreachableServerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public UnreachableServerException(String message, Throwable cause) {
        super(message, cause);
    }
}
