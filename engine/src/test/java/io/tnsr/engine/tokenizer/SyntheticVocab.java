package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;
import io.tnsr.engine.gguf.GgufWriter;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/** Small vocabularies written as metadata-only GGUF files, for tests that must not depend on shared/. */
final class SyntheticVocab {
    private SyntheticVocab() {
    }

    /**
     * A SentencePiece-style vocabulary like llama2.c's: {@code <unk> <s> </s>}, the 256 byte tokens
     * (ids 3..258), then {@code normal} pieces scored by decreasing rank.
     */
    static GgufWriter spm(String... normal) {
        List<String> tokens = new ArrayList<>(List.of("<unk>", "<s>", "</s>"));
        List<Integer> types = new ArrayList<>(List.of(2, 3, 3));
        for (int b = 0; b < 256; b++) {
            tokens.add(String.format("<0x%02X>", b));
            types.add(6);
        }
        for (String p : normal) {
            tokens.add(p);
            types.add(1);
        }
        float[] scores = new float[tokens.size()];
        for (int i = 259; i < scores.length; i++) {
            scores[i] = -(i - 259);
        }
        return new GgufWriter()
                .putString("general.architecture", "llama")
                .putString("tokenizer.ggml.model", "llama")
                .putStringArray("tokenizer.ggml.tokens", tokens.toArray(new String[0]))
                .putFloatArray("tokenizer.ggml.scores", scores)
                .putIntArray("tokenizer.ggml.token_type", types.stream().mapToInt(Integer::intValue).toArray())
                .putU32("tokenizer.ggml.bos_token_id", 1)
                .putU32("tokenizer.ggml.eos_token_id", 2)
                .putU32("tokenizer.ggml.unknown_token_id", 0);
    }

    static GgufMetadata metadata(GgufWriter w) {
        try {
            Path dir = Files.createTempDirectory("tnsr-vocab");
            Path f = dir.resolve("vocab.gguf");
            w.write(f);
            try (GgufFile g = GgufFile.open(f)) {
                return g.metadata();
            } finally {
                Files.deleteIfExists(f);
                Files.deleteIfExists(dir);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static Tokenizer tokenizer(GgufWriter w) {
        return Tokenizers.fromGguf(metadata(w));
    }
}
