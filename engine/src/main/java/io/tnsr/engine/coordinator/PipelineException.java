package io.tnsr.engine.coordinator;

/** The pipeline as a whole cannot go on: a stage died, is unreachable, refused us, or stopped answering. */
public final class PipelineException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public PipelineException(String message) {
        super(message);
    }

    public PipelineException(String message, Throwable cause) {
        super(message, cause);
    }
}
