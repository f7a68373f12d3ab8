package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;

import java.nio.file.Path;

/** Builds the {@link Tokenizer} a GGUF model's metadata describes. */
public final class Tokenizers {
    private Tokenizers() {
    }

    /**
     * The tokenizer for {@code tokenizer.ggml.model}: {@code llama} (SentencePiece-style, {@link SentencePieceTokenizer})
     * or {@code gpt2} ({@link ByteLevelBpeTokenizer}) with a pre-tokenizer ({@code tokenizer.ggml.pre}) of Llama 3
     * ({@code llama-bpe}, {@code llama3}, {@code llama-v3}, {@code falcon3}), Qwen2 ({@code qwen2},
     * {@code deepseek-r1-qwen}) or GPT-2 ({@code gpt-2}, {@code phi-2}).
     *
     * @throws TokenizerException naming the model (and pre-tokenizer) type when it is missing or not supported
     * @throws io.tnsr.engine.gguf.GgufException naming the key when a tokenizer key is missing or of the wrong type
     */
    public static Tokenizer fromGguf(GgufMetadata md) {
        if (!md.has(BaseTokenizer.KEY_MODEL)) {
            throw new TokenizerException("the model has no tokenizer: metadata key '" + BaseTokenizer.KEY_MODEL + "' is missing");
        }
        String model = md.getString(BaseTokenizer.KEY_MODEL);
        if (!md.has(BaseTokenizer.KEY_TOKENS)) {
            throw new TokenizerException("the model has no tokenizer vocabulary: metadata key '"
                    + BaseTokenizer.KEY_TOKENS + "' is missing (" + BaseTokenizer.KEY_MODEL + " = '" + model + "')");
        }
        switch (model) {
            case "llama":
                return new SentencePieceTokenizer(md);
            case "gpt2": {
                String pre = md.getString(BaseTokenizer.KEY_PRE, "default");
                if (!ByteLevelBpeTokenizer.SUPPORTED_PRE.containsKey(pre)) {
                    throw new TokenizerException("tokenizer model 'gpt2' with pre-tokenizer '" + pre + "' ("
                            + BaseTokenizer.KEY_PRE + ") is not supported (supported: "
                            + String.join(", ", ByteLevelBpeTokenizer.SUPPORTED_PRE.keySet().stream().sorted().toList()) + ")");
                }
                return new ByteLevelBpeTokenizer(md, pre);
            }
            default:
                throw new TokenizerException("tokenizer model '" + model + "' is not supported (supported: llama, gpt2)");
        }
    }

    /**
     * {@link #fromGguf(GgufMetadata)} of an open file. Reads only metadata.
     *
     * @throws TokenizerException as {@link #fromGguf(GgufMetadata)}, its message starting with the file's path
     */
    public static Tokenizer fromGguf(GgufFile file) {
        try {
            return fromGguf(file.metadata());
        } catch (TokenizerException e) {
            throw new TokenizerException(file.path() + ": " + e.getMessage(), e);
        }
    }

    /** Opens {@code path}, reads its metadata (never tensor data) and builds the tokenizer. */
    public static Tokenizer load(Path path) {
        try (GgufFile f = GgufFile.open(path)) {
            return fromGguf(f);
        }
    }
}
