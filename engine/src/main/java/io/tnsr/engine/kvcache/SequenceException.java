package io.tnsr.engine.kvcache;

/**
 * A failure that concerns one sequence only (its cache ran out, its prompt is longer than the context, it is
 * unknown): the caller fails that sequence and goes on with the others.
 */
public class SequenceException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** What went wrong, stable for error frames and JSON output. */
    public enum Kind { OUT_OF_KV_CACHE, CONTEXT_OVERFLOW, UNKNOWN_SEQUENCE, BAD_TOKEN, BATCH_TOO_LARGE }

    private final int seqId;
    private final Kind kind;

    public SequenceException(Kind kind, int seqId, String message) {
        super(message);
        this.kind = kind;
        this.seqId = seqId;
    }

    public int seqId() {
        return seqId;
    }

    public Kind kind() {
        return kind;
    }
}
