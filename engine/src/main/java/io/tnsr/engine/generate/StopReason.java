package io.tnsr.engine.generate;

/** Why a sequence stopped; {@link #json()} is the value of {@code stopped_by} in JSON output. */
public enum StopReason {
    /** The model emitted its end-of-sequence token. */
    EOS("eos"),
    /** The model emitted BOS, which ends a story for the TinyStories models (as llama2.c stops). */
    BOS("bos"),
    /** The token limit, or the context length, was reached. */
    LIMIT("limit"),
    /** The sequence failed (its KV cache ran out, a stage reported an error...); see its error message. */
    ERROR("error"),
    /** Whoever asked for it no longer wants it (a client that went away). */
    CANCELLED("cancelled"),
    /** It waited for a place in a micro-batch longer than its caller allowed, and never ran. */
    EXPIRED("expired");

    private final String json;

    StopReason(String json) {
        this.json = json;
    }

    public String json() {
        return json;
    }
}
