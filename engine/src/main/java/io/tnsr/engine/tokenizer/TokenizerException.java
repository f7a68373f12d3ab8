package io.tnsr.engine.tokenizer;

/** A tokenizer that cannot be built from a model's metadata (unsupported type, inconsistent vocabulary), or bad input to one. */
public final class TokenizerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public TokenizerException(String message) {
        super(message);
    }

    public TokenizerException(String message, Throwable cause) {
        super(message, cause);
    }
}
