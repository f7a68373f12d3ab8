package io.tnsr.engine.tokenizer;

/**
 * Text to token ids and back, exactly as the reference implementations do it for the model's vocabulary.
 * Build one with {@link Tokenizers#fromGguf}. Instances are immutable and thread-safe; a
 * {@link StreamingDecoder} is not (one per generation).
 *
 * <p>Implementations: {@link SentencePieceTokenizer} ({@code tokenizer.ggml.model = llama}) and
 * {@link ByteLevelBpeTokenizer} ({@code tokenizer.ggml.model = gpt2} with the pre-tokenizer of Llama 3, Qwen2 or GPT-2).
 */
public interface Tokenizer {

    /** The GGUF {@code tokenizer.ggml.model} this tokenizer implements ({@code llama}, {@code gpt2}). */
    String model();

    /**
     * Encodes {@code text}, with BOS first when {@code addBos} is set and the vocabulary has one. Control
     * tokens written in the text (such as {@code <s>} or {@code <|eot_id|>}) are not recognised: they are
     * tokenized as plain text, as llama.cpp does without {@code parse_special}. User-defined tokens are.
     */
    default int[] encode(String text, boolean addBos) {
        return encode(text, addBos, false);
    }

    /**
     * Encodes {@code text}; with {@code parseSpecial}, control tokens written in the text become their ids
     * (longest first), like llama.cpp's {@code llama_tokenize(..., parse_special = true)}.
     */
    int[] encode(String text, boolean addBos, boolean parseSpecial);

    /**
     * The text of {@code ids}. Byte tokens are reassembled into UTF-8 (an invalid or incomplete sequence
     * becomes U+FFFD); control, unknown and unused tokens render as nothing. For SentencePiece vocabularies
     * the leading space that encoding adds is dropped from the first token and from the token right after
     * BOS. So {@code decode(encode(s, addBos)) == s} for text without user-defined tokens whose characters
     * the vocabulary can spell (always, with byte fallback or byte-level BPE).
     * Same as feeding {@link #newDecoder()} every id and calling {@link StreamingDecoder#finish()}.
     */
    String decode(int[] ids);

    /** A decoder for text generated from the start of a sequence (the first token's leading space is dropped). */
    StreamingDecoder newDecoder();

    /**
     * A decoder that continues after {@code previousToken} (for example the last prompt token, or -1 for
     * "none, start of text"): generated text printed through it equals what llama2.c's run.c prints after
     * that token. It knows only the id: to carry an incomplete UTF-8 sequence over from earlier tokens, keep
     * one decoder and feed it everything instead.
     */
    StreamingDecoder newDecoder(int previousToken);

    /** Whether the model wants BOS added when encoding a prompt ({@code tokenizer.ggml.add_bos_token}, with llama.cpp's defaults). */
    boolean addsBos();

    /** Beginning-of-sequence id, or -1 if the vocabulary has none. */
    int bos();

    /** End-of-sequence id, or -1 if the vocabulary has none. */
    int eos();

    /** Whether {@code id} ends generation: EOS, or an end-of-turn token ({@code <|eot_id|>}, {@code <|im_end|>}, {@code <|end|>} and the others llama.cpp lists) when the vocabulary has one. */
    boolean isEndOfGeneration(int id);

    /** Number of entries in the vocabulary (valid ids are 0 .. vocabSize()-1). */
    int vocabSize();

    /** The vocabulary entry of {@code id} as stored in the model: {@code "▁Once"}, {@code "<0x0A>"}, {@code "Ġthe"}, {@code "<s>"}. */
    String piece(int id);

    /** The type of {@code id}. */
    TokenType type(int id);

    /**
     * The bytes {@code id} stands for in decoded text: UTF-8, possibly part of a character (a byte token); empty for a
     * control token. A fresh copy.
     */
    byte[] tokenBytes(int id);

    /** Whether {@code id} is a control token (BOS, EOS, chat markers): never produced from plain text, renders as nothing. */
    default boolean isControl(int id) {
        return type(id) == TokenType.CONTROL;
    }

    /** The id of the vocabulary entry whose text is exactly {@code piece}, or -1. */
    int tokenId(String piece);
}
