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
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** Byte-level BPE with the Llama 3 pre-tokenizer against llama.cpp's test vectors for the Llama 3 vocabulary. */
class ByteLevelBpeTokenizerTest {
    static final String BPE_VOCAB = "ggml-vocab-llama-bpe.gguf";
    private static Tokenizer cached;

    static synchronized Tokenizer llama3() {
        if (cached == null) {
            cached = Tokenizers.load(SharedData.path("tokenizers/" + BPE_VOCAB));
        }
        return cached;
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

    /** Loading 128k tokens and 280k merges from metadata: measured (printed), and bounded loosely. */
    @Test
    void loadTime() {
        Path p = SharedData.path("tokenizers/" + BPE_VOCAB);
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
            System.out.printf("llama-bpe round %d: GGUF metadata %d ms, tokenizer build %d ms%n",
                    round, (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000);
        }
        assertTrue(best < 3_000_000_000L, "building the tokenizer took " + best / 1_000_000 + " ms");
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
}
