package io.tnsr.engine.tokenizer;

/**
 * The type of a vocabulary entry, as stored in {@code tokenizer.ggml.token_type} (llama.cpp's
 * {@code llama_token_type} numbering). It decides how a token is rendered and whether it can be matched in
 * text: see {@link Tokenizer#decode(int[])} and {@link Tokenizer#encode(String, boolean, boolean)}.
 */
public enum TokenType {
    /** 0: no type given. Rendered as nothing, like llama.cpp. */
    UNDEFINED,
    /** 1: an ordinary piece of text. */
    NORMAL,
    /** 2: the unknown token ({@code <unk>}). Rendered as nothing. */
    UNKNOWN,
    /** 3: a control token ({@code <s>}, {@code <|eot_id|>}...). Rendered as nothing; matched in text only when asked. */
    CONTROL,
    /** 4: a user-defined token: always matched in text before the model's own splitting, rendered as its text. */
    USER_DEFINED,
    /** 5: an unused slot. Rendered as nothing. */
    UNUSED,
    /** 6: a raw byte, written {@code <0xNN>} (SentencePiece byte fallback). Rendered as that byte. */
    BYTE;

    private static final TokenType[] BY_ID = values();

    /** The type for a GGUF {@code token_type} value; anything out of range is {@link #UNDEFINED}. */
    public static TokenType fromGguf(long id) {
        return id >= 0 && id < BY_ID.length ? BY_ID[(int) id] : UNDEFINED;
    }
}
