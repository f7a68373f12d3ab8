package io.tnsr.engine.coordinator;

/**
 * The pipeline as a whole cannot go on: a stage died, is unreachable, refused us, or stopped answering. A
 * {@link #fatal} one is not worth a recovery (the coordinator was interrupted, or a recovery already gave up).
 */
public final class PipelineException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final boolean fatal;

    public PipelineException(String message) {
        this(message, null, false);
    }

    public PipelineException(String message, Throwable cause) {
        this(message, cause, false);
    }

    private PipelineException(String message, Throwable cause, boolean fatal) {
        super(message, cause);
        this.fatal = fatal;
    }

    /** A failure that no recovery can mend. */
    public static PipelineException fatal(String message) {
        return new PipelineException(message, null, true);
    }

    /** Whether no recovery should be tried. */
    public boolean fatal() {
        return fatal;
    }
}
