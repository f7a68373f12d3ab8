package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufWriter;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** The factory: which implementation, and clear errors for what is not supported. */
class TokenizersTest {

    private static String error(GgufWriter w) {
        return assertThrows(TokenizerException.class, () -> SyntheticVocab.tokenizer(w)).getMessage();
    }

    @Test
    void picksSentencePieceForLlama() {
        Tokenizer t = SyntheticVocab.tokenizer(SyntheticVocab.spm("▁", "a", "b", "▁a", "ab", "▁ab"));
        assertInstanceOf(SentencePieceTokenizer.class, t);
        assertArrayEquals(new int[] {1, t.tokenId("▁ab")}, t.encode("ab", true));
    }

    /** Without byte tokens, a character the vocabulary lacks becomes one unknown token. */
    @Test
    void sentencePieceWithoutByteFallback() {
        Tokenizer t = SyntheticVocab.tokenizer(new GgufWriter().putString("tokenizer.ggml.model", "llama")
                .putStringArray("tokenizer.ggml.tokens", new String[] {"<unk>", "<s>", "</s>", "▁", "a", "▁a"})
                .putFloatArray("tokenizer.ggml.scores", new float[] {0, 0, 0, -1, -2, -3})
                .putIntArray("tokenizer.ggml.token_type", new int[] {2, 3, 3, 1, 1, 1}));
        assertArrayEquals(new int[] {1, 5, 3, 0, 4}, t.encode("a éa", true));
        assertEquals("a a", t.decode(t.encode("a éa", true)));   // <unk> renders as nothing
    }

    @Test
    void unsupportedModelIsNamed() {
        String msg = error(new GgufWriter().putString("tokenizer.ggml.model", "bert")
                .putStringArray("tokenizer.ggml.tokens", new String[] {"[PAD]", "a"}));
        assertTrue(msg.contains("'bert'") && msg.contains("not supported"), msg);
    }

    @Test
    void unsupportedPreTokenizerIsNamed() {
        String msg = error(new GgufWriter().putString("tokenizer.ggml.model", "gpt2").putString("tokenizer.ggml.pre", "starcoder")
                .putStringArray("tokenizer.ggml.tokens", new String[] {"a", "b"})
                .putStringArray("tokenizer.ggml.merges", new String[] {"a b"}));
        assertTrue(msg.contains("'gpt2'") && msg.contains("'starcoder'") && msg.contains("tokenizer.ggml.pre")
                && msg.contains("qwen2") && msg.contains("gpt-2") && msg.contains("llama-bpe"), msg);
    }

    /** Loaded from a file, the error names the file too. */
    @Test
    void unsupportedPreTokenizerNamesTheFile(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("odd-vocab.gguf");
        new GgufWriter().putString("tokenizer.ggml.model", "gpt2").putString("tokenizer.ggml.pre", "starcoder")
                .putStringArray("tokenizer.ggml.tokens", new String[] {"a", "b"})
                .putStringArray("tokenizer.ggml.merges", new String[] {"a b"})
                .write(f);
        String msg = assertThrows(TokenizerException.class, () -> Tokenizers.load(f)).getMessage();
        assertTrue(msg.startsWith(f.toString()) && msg.contains("'starcoder'"), msg);
    }

    /** Each supported pre-tokenizer name picks its split. */
    @Test
    void preTokenizerNamesPickTheirSplit() {
        for (var e : java.util.Map.of("llama-bpe", PreTokenizer.LLAMA3, "qwen2", PreTokenizer.QWEN2, "gpt-2", PreTokenizer.GPT2).entrySet()) {
            Tokenizer t = SyntheticVocab.tokenizer(new GgufWriter().putString("tokenizer.ggml.model", "gpt2")
                    .putString("tokenizer.ggml.pre", e.getKey())
                    .putStringArray("tokenizer.ggml.tokens", new String[] {"a", "b", "ab"})
                    .putStringArray("tokenizer.ggml.merges", new String[] {"a b"})
                    .putU32("tokenizer.ggml.bos_token_id", 0));
            assertEquals(e.getValue(), assertInstanceOf(ByteLevelBpeTokenizer.class, t).split(), e.getKey());
            assertEquals(e.getKey().equals("llama-bpe"), t.addsBos(), e.getKey());
        }
    }

    @Test
    void missingTokenizerIsSaid() {
        String msg = error(new GgufWriter().putString("general.architecture", "llama"));
        assertTrue(msg.contains("no tokenizer") && msg.contains("tokenizer.ggml.model"), msg);
    }

    /** A tiny byte-level BPE vocabulary: the 256 byte characters, then merges building "Ġhello". */
    @Test
    void tinyByteLevelBpe() {
        java.util.List<String> tokens = new java.util.ArrayList<>();
        for (int b = 0; b < 256; b++) {
            tokens.add(String.valueOf(ByteLevel.charOf(b)));
        }
        String[] merged = {"he", "ll", "hell", "hello", "Ġhello"};
        tokens.addAll(java.util.List.of(merged));
        tokens.add("<|end|>");
        int[] types = new int[tokens.size()];
        java.util.Arrays.fill(types, 1);
        types[types.length - 1] = 3;
        Tokenizer t = SyntheticVocab.tokenizer(new GgufWriter().putString("tokenizer.ggml.model", "gpt2")
                .putString("tokenizer.ggml.pre", "llama-bpe")
                .putStringArray("tokenizer.ggml.tokens", tokens.toArray(new String[0]))
                .putIntArray("tokenizer.ggml.token_type", types)
                .putStringArray("tokenizer.ggml.merges", new String[] {"h e", "l l", "he ll", "hell o", "Ġ hello"})
                .putU32("tokenizer.ggml.eos_token_id", types.length - 1));
        assertInstanceOf(ByteLevelBpeTokenizer.class, t);
        assertEquals(-1, t.bos());
        int hello = t.tokenId("hello");
        int spaceHello = t.tokenId("Ġhello");
        assertArrayEquals(new int[] {hello, spaceHello, t.tokenId("!")}, t.encode("hello hello!", true));
        // "helo": h+e merge, then no rule for (he, l) or (l, o).
        assertArrayEquals(new int[] {t.tokenId("he"), t.tokenId("l"), t.tokenId("o")}, t.encode("helo", false));
        assertEquals("hello hello!\n", t.decode(t.encode("hello hello!\n", false)));
        assertTrue(t.isEndOfGeneration(types.length - 1));
        assertTrue(t.isEndOfGeneration(t.eos()));
    }
}
