package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;
import io.tnsr.engine.testing.SharedData;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Byte-level BPE against llama.cpp's test vectors for the Llama 3, Qwen2 and GPT-2 vocabularies (each with its
 * own pre-tokenizer).
 */
class ByteLevelBpeTokenizerTest {
    static final String BPE_VOCAB = "ggml-vocab-llama-bpe.gguf";
    static final String QWEN2_VOCAB = "ggml-vocab-qwen2.gguf";
    static final String GPT2_VOCAB = "ggml-vocab-gpt-2.gguf";
    private static final Map<String, Tokenizer> cached = new HashMap<>();

    /** The tokenizer of {@code shared/tokenizers/vocab}, loaded once for the whole class. */
    static synchronized Tokenizer vocab(String vocab) {
        return cached.computeIfAbsent(vocab, v -> Tokenizers.load(SharedData.path("tokenizers/" + v)));
    }

    static Tokenizer llama3() {
        return vocab(BPE_VOCAB);
    }

    @Test
    void vocabularyBasics() {
        Tokenizer t = llama3();
        ByteLevelBpeTokenizer bpe = assertInstanceOf(ByteLevelBpeTokenizer.class, t);
        assertEquals("gpt2", t.model());
        assertEquals("llama-bpe", bpe.preTokenizer());
        assertEquals(128256, t.vocabSize());
        assertEquals(280147, bpe.mergeCount());
        assertEquals(0, bpe.skippedMerges());
        assertEquals(128000, t.bos());
        assertEquals(128001, t.eos());
        assertTrue(t.addsBos());
        assertTrue(t.isEndOfGeneration(128001));
        assertTrue(t.isEndOfGeneration(128009), "<|eot_id|> ends a turn");
        assertFalse(t.isEndOfGeneration(128000));
        assertEquals("Ġthe", t.piece(279));
    }

    /** llama.cpp's test vectors for the Llama 3 vocabulary, encoded without BOS. */
    @TestFactory
    Stream<DynamicTest> llamaCppVectors() throws IOException {
        Tokenizer t = llama3();
        return VocabTestCases.load(BPE_VOCAB).encodeTests(s -> t.encode(s, false));
    }

    @TestFactory
    Stream<DynamicTest> llamaCppVectorsRoundTrip() throws IOException {
        return VocabTestCases.load(BPE_VOCAB).roundTripTests(llama3());
    }

    @Test
    void bosAndSpecialTokens() {
        Tokenizer t = llama3();
        int[] ids = t.encode("Hello world", true);
        assertArrayEquals(new int[] {128000, 9906, 1917}, ids);
        assertEquals("Hello world", t.decode(ids));
        // Control tokens are text unless parsed; parsed, they become their ids and render as nothing.
        int[] plain = t.encode("<|eot_id|>", false);
        assertTrue(plain.length > 1, Arrays.toString(plain));
        assertEquals("<|eot_id|>", t.decode(plain));
        int[] parsed = t.encode("Hi<|eot_id|>there", false, true);
        int hi = t.encode("Hi", false)[0];
        int there = t.encode("there", false)[0];
        assertArrayEquals(new int[] {hi, 128009, there}, parsed);
        assertEquals("Hithere", t.decode(parsed));
    }

    @Test
    void qwen2VocabularyBasics() {
        Tokenizer t = vocab(QWEN2_VOCAB);
        ByteLevelBpeTokenizer bpe = assertInstanceOf(ByteLevelBpeTokenizer.class, t);
        assertEquals("qwen2", bpe.preTokenizer());
        assertEquals(PreTokenizer.QWEN2, bpe.split());
        assertEquals(151936, t.vocabSize());
        assertEquals(151387, bpe.mergeCount());
        assertEquals(0, bpe.skippedMerges());
        assertEquals(151643, t.bos());
        assertEquals(151643, t.eos());
        assertFalse(t.addsBos(), "Qwen2 GGUFs do not ask for BOS; llama.cpp's default for the pre-tokenizer is no BOS");
        assertEquals("<|endoftext|>", t.piece(151643));
        assertEquals(151644, t.tokenId("<|im_start|>"));
        assertEquals(151645, t.tokenId("<|im_end|>"));
        assertTrue(t.isControl(151644) && t.isControl(151645));
        assertTrue(t.isEndOfGeneration(151643));
        assertTrue(t.isEndOfGeneration(151645), "<|im_end|> ends a turn");
        assertFalse(t.isEndOfGeneration(151644));
    }

    /** llama.cpp's test vectors for the Qwen2 vocabulary (single-digit split, no ignore_merges), without BOS. */
    @TestFactory
    Stream<DynamicTest> qwen2Vectors() throws IOException {
        Tokenizer t = vocab(QWEN2_VOCAB);
        return VocabTestCases.load(QWEN2_VOCAB).encodeTests(s -> t.encode(s, false));
    }

    @TestFactory
    Stream<DynamicTest> qwen2VectorsRoundTrip() throws IOException {
        return VocabTestCases.load(QWEN2_VOCAB).roundTripTests(vocab(QWEN2_VOCAB));
    }

    /** A ChatML prompt as a chat template writes it: with parse_special its markers become their control tokens. */
    @Test
    void qwen2ChatMarkers() {
        Tokenizer t = vocab(QWEN2_VOCAB);
        String prompt = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
        int[] ids = t.encode(prompt, false, true);
        int[] user = t.encode("user\nHi", false);
        int[] newline = t.encode("\n", false);
        int[] assistant = t.encode("assistant\n", false);
        int[] want = IntStream.concat(IntStream.concat(IntStream.concat(IntStream.of(151644), Arrays.stream(user)),
                IntStream.concat(IntStream.of(151645), Arrays.stream(newline))),
                IntStream.concat(IntStream.of(151644), Arrays.stream(assistant))).toArray();
        assertArrayEquals(want, ids);
        assertEquals("user\nHi\nassistant\n", t.decode(ids));   // control tokens render as nothing
        int[] plain = t.encode(prompt, false);
        assertTrue(Arrays.stream(plain).noneMatch(id -> id >= 151643), Arrays.toString(plain));
        assertEquals(prompt, t.decode(plain));
    }

    @Test
    void gpt2VocabularyBasics() {
        Tokenizer t = vocab(GPT2_VOCAB);
        ByteLevelBpeTokenizer bpe = assertInstanceOf(ByteLevelBpeTokenizer.class, t);
        assertEquals("gpt-2", bpe.preTokenizer());
        assertEquals(PreTokenizer.GPT2, bpe.split());
        assertEquals(50257, t.vocabSize());
        assertEquals(50000, bpe.mergeCount());
        assertEquals(0, bpe.skippedMerges());
        assertEquals(50256, t.bos());
        assertEquals(50256, t.eos());
        assertFalse(t.addsBos());
        assertTrue(t.isEndOfGeneration(50256));
        assertArrayEquals(new int[] {15496, 11, 995, 0}, t.encode("Hello, world!", false));
    }

    /** llama.cpp's test vectors for the GPT-2 vocabulary, encoded without BOS. */
    @TestFactory
    Stream<DynamicTest> gpt2Vectors() throws IOException {
        Tokenizer t = vocab(GPT2_VOCAB);
        return VocabTestCases.load(GPT2_VOCAB).encodeTests(s -> t.encode(s, false));
    }

    @TestFactory
    Stream<DynamicTest> gpt2VectorsRoundTrip() throws IOException {
        return VocabTestCases.load(GPT2_VOCAB).roundTripTests(vocab(GPT2_VOCAB));
    }

    /** Loading 128k tokens and 280k merges from metadata: measured (printed), and bounded loosely. */
    @Test
    void loadTime() {
        assertLoadsQuickly(BPE_VOCAB);
    }

    /** Loading Qwen2's 152k tokens and 151k merges. */
    @Test
    void qwen2LoadTime() {
        assertLoadsQuickly(QWEN2_VOCAB);
    }

    @Test
    void gpt2LoadTime() {
        assertLoadsQuickly(GPT2_VOCAB);
    }

    /** Reads the metadata and builds the tokenizer four times, prints each time, bounds the best build loosely. */
    static void assertLoadsQuickly(String vocab) {
        Path p = SharedData.path("tokenizers/" + vocab);
        long best = Long.MAX_VALUE;
        long bestParse = Long.MAX_VALUE;
        for (int round = 0; round < 4; round++) {
            long t0 = System.nanoTime();
            GgufMetadata md;
            try (GgufFile f = GgufFile.open(p)) {
                md = f.metadata();
            }
            long t1 = System.nanoTime();
            Tokenizers.fromGguf(md);
            long t2 = System.nanoTime();
            best = Math.min(best, t2 - t1);
            bestParse = Math.min(bestParse, t1 - t0);
            System.out.printf("%s round %d: GGUF metadata %d ms, tokenizer build %d ms%n",
                    vocab, round, (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000);
        }
        assertTrue(best < 3_000_000_000L, vocab + ": building the tokenizer took " + best / 1_000_000 + " ms");
    }

    @Test
    void longTextEncodesQuicklyAndRoundTrips() {
        String unit = "Hello, world! Ça va? 🦙 The quick brown fox jumps over the lazy dog. 1234567890 supercalifragilistic\n";
        long ms = VocabTestCases.timedRoundTrip(llama3(), "BPE text", unit, 2000);
        assertTrue(ms < 5_000, "encoding took " + ms + " ms");
        // One 100k-char word: merging must stay near-linear (priority queue, not rescans).
        ms = VocabTestCases.timedRoundTrip(llama3(), "BPE one word", "ab", 50_000);
        assertTrue(ms < 5_000, "encoding took " + ms + " ms");
    }

    /** Qwen2 and GPT-2 merge every word from its bytes (no ignore_merges): still near-linear on long words. */
    @Test
    void longTextEncodesQuicklyWithoutIgnoreMerges() {
        String unit = "Hello, world! Ça va? 🦙 The quick brown fox jumps over the lazy dog. 1234567890 supercalifragilistic\n";
        for (String v : new String[] {QWEN2_VOCAB, GPT2_VOCAB}) {
            long ms = VocabTestCases.timedRoundTrip(vocab(v), v + " text", unit, 2000);
            assertTrue(ms < 5_000, v + ": encoding took " + ms + " ms");
            ms = VocabTestCases.timedRoundTrip(vocab(v), v + " one word", "ab", 50_000);
            assertTrue(ms < 5_000, v + ": encoding took " + ms + " ms");
        }
    }
}
