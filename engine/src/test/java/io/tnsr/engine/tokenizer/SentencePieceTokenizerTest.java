package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.stream.IntStream;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The SentencePiece-style tokenizer against llama2.c (golden prompts of stories260K) and llama.cpp (Llama 2 and
 * Phi-3 vocabularies).
 */
class SentencePieceTokenizerTest {
    static final String SPM_VOCAB = "ggml-vocab-llama-spm.gguf";
    static final String PHI3_VOCAB = "ggml-vocab-phi-3.gguf";

    static Tokenizer stories() {
        return Tokenizers.load(SharedData.path("models/stories260K.gguf"));
    }

    static Tokenizer llama2() {
        return Tokenizers.load(SharedData.path("tokenizers/" + SPM_VOCAB));
    }

    static Tokenizer phi3() {
        return Tokenizers.load(SharedData.path("tokenizers/" + PHI3_VOCAB));
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> goldenCases() throws IOException {
        Map<String, Object> golden = (Map<String, Object>) TestJson.read(SharedData.path("golden/stories260K-greedy.json"));
        return (List<Map<String, Object>>) golden.get("cases");
    }

    @Test
    void storiesVocabularyBasics() {
        Tokenizer t = stories();
        assertInstanceOf(SentencePieceTokenizer.class, t);
        assertEquals("llama", t.model());
        assertEquals(512, t.vocabSize());
        assertEquals(1, t.bos());
        assertEquals(2, t.eos());
        assertTrue(t.addsBos());
        assertEquals("▁Once", t.piece(403));
        assertEquals(TokenType.BYTE, t.type(13));
        assertTrue(t.isControl(1));
        assertTrue(t.isEndOfGeneration(2));
    }

    /** llama2.c's run.c encodes each golden prompt (BOS first) to exactly these ids. */
    @TestFactory
    Stream<DynamicTest> goldenPromptTokens() throws IOException {
        Tokenizer t = stories();
        List<DynamicTest> tests = new ArrayList<>();
        for (Map<String, Object> c : goldenCases()) {
            String prompt = (String) c.get("prompt");
            int[] want = TestJson.ints(c.get("prompt_tokens"));
            tests.add(DynamicTest.dynamicTest("prompt " + VocabTestCases.show(prompt),
                    () -> assertArrayEquals(want, t.encode(prompt, true),
                            () -> "got " + Arrays.toString(t.encode(prompt, true)))));
        }
        return tests.stream();
    }

    /**
     * run.c prints {@code text}: the prompt decoded from its tokens, then each generated token, dropping the
     * leading space of the token that follows BOS. Decoding prompt + generated tokens gives exactly that.
     *
     * <p>Subtlety: the generated part alone is {@code text} minus the prompt only when decoded <i>after</i> the
     * last prompt token ({@code newDecoder(lastPromptToken)}). Decoding {@code generated_tokens} as a text of
     * its own treats the first one as the start of a text and drops its leading space: right for the empty
     * prompt (run.c drops the space of " Once" after BOS), wrong for "One day, a little boy named Tim", whose
     * first generated token is " went".
     */
    @TestFactory
    Stream<DynamicTest> goldenTextDecodes() throws IOException {
        Tokenizer t = stories();
        List<DynamicTest> tests = new ArrayList<>();
        for (Map<String, Object> c : goldenCases()) {
            String prompt = (String) c.get("prompt");
            String text = (String) c.get("text");
            int[] promptTokens = TestJson.ints(c.get("prompt_tokens"));
            int[] generated = TestJson.ints(c.get("generated_tokens"));
            tests.add(DynamicTest.dynamicTest("text " + VocabTestCases.show(prompt), () -> {
                int[] all = IntStream.concat(Arrays.stream(promptTokens), Arrays.stream(generated)).toArray();
                assertEquals(text, t.decode(all));
                assertTrue(text.startsWith(prompt));
                StreamingDecoder d = t.newDecoder(promptTokens[promptTokens.length - 1]);
                StringBuilder sb = new StringBuilder();
                for (int id : generated) {
                    d.next(id, sb);
                }
                d.finish(sb);
                assertEquals(text.substring(prompt.length()), sb.toString());
                String alone = t.decode(generated);
                String afterPrompt = text.substring(prompt.length());
                assertEquals(afterPrompt.startsWith(" ") ? afterPrompt.substring(1) : afterPrompt, alone);
            }));
        }
        return tests.stream();
    }

    /** llama.cpp's test vectors for the Llama 2 vocabulary, encoded without BOS. */
    @TestFactory
    Stream<DynamicTest> llamaCppVectors() throws IOException {
        Tokenizer t = llama2();
        return VocabTestCases.load(SPM_VOCAB).encodeTests(s -> t.encode(s, false));
    }

    @TestFactory
    Stream<DynamicTest> llamaCppVectorsRoundTrip() throws IOException {
        return VocabTestCases.load(SPM_VOCAB).roundTripTests(llama2());
    }

    /** llama.cpp's test vectors for the Phi-3 vocabulary (Llama 2's 32000 pieces plus chat tokens), without BOS. */
    @TestFactory
    Stream<DynamicTest> phi3Vectors() throws IOException {
        Tokenizer t = phi3();
        return VocabTestCases.load(PHI3_VOCAB).encodeTests(s -> t.encode(s, false));
    }

    @TestFactory
    Stream<DynamicTest> phi3VectorsRoundTrip() throws IOException {
        return VocabTestCases.load(PHI3_VOCAB).roundTripTests(phi3());
    }

    @Test
    void phi3VocabularyBasics() {
        Tokenizer t = phi3();
        assertInstanceOf(SentencePieceTokenizer.class, t);
        assertEquals(32064, t.vocabSize());
        assertEquals(1, t.bos());
        assertEquals(32000, t.eos());
        assertTrue(t.addsBos());
        assertEquals("<|endoftext|>", t.piece(32000));
        assertTrue(t.isEndOfGeneration(32000));
        assertTrue(t.isEndOfGeneration(32007), "<|end|> ends a turn");
        assertFalse(t.isEndOfGeneration(32010));
        // "</s>" is user-defined in the file; llama.cpp makes it a control token that ends generation, as its text says.
        assertEquals(TokenType.CONTROL, t.type(2));
        assertTrue(t.isEndOfGeneration(2));
    }

    /**
     * Phi-3's chat tokens strip the white space after them (llama.cpp sets RSTRIP for a model named Phi-3), so the
     * newlines a chat template writes after them are not encoded; the text after one starts with a dummy space.
     */
    @Test
    void phi3ChatMarkersStripTheSpaceAfterThem() {
        Tokenizer t = phi3();
        int hi = t.tokenId("▁Hi");
        assertArrayEquals(new int[] {32010, hi, 32007, 32001},
                t.encode("<|user|>\nHi<|end|>\n<|assistant|>\n", false, true));
        // <|endoftext|> keeps it: the text after it is encoded as if it started the text.
        assertArrayEquals(IntStream.concat(IntStream.of(32000), Arrays.stream(t.encode("\nHi", false))).toArray(),
                t.encode("<|endoftext|>\nHi", false, true));
        // "</s>" strips too; being a control token it is text unless parsed (llama.cpp gives the same ids).
        assertArrayEquals(new int[] {263, 2, 289}, t.encode("a</s>  b", false, true));
        assertArrayEquals(new int[] {263, 829, 29879, 29958, 29871, 289}, t.encode("a</s>  b", false));
        // Llama 2's vocabulary has no such rule: the space after a special token is text.
        Tokenizer llama2 = llama2();
        int[] spaceHi = llama2.encode(" Hi", false);
        assertTrue(spaceHi.length > 1 || spaceHi[0] != llama2.tokenId("▁Hi"), Arrays.toString(spaceHi));
        assertArrayEquals(IntStream.concat(IntStream.of(1), Arrays.stream(spaceHi)).toArray(), llama2.encode("<s> Hi", false, true));
    }

    @Test
    void emptyTextIsJustBos() {
        Tokenizer t = llama2();
        assertArrayEquals(new int[] {1}, t.encode("", true));
        assertArrayEquals(new int[0], t.encode("", false));
    }

    @Test
    void byteFallbackAndReassembly() {
        Tokenizer t = stories();
        // 'ü' is not in the 512-token vocabulary: its UTF-8 bytes C3 BC become <0xC3><0xBC> (ids 3 + byte).
        int[] ids = t.encode("ü", false);
        assertArrayEquals(new int[] {t.tokenId("▁"), 3 + 0xC3, 3 + 0xBC}, ids);
        assertEquals("ü", t.decode(ids));
    }

    @Test
    void controlTokensInTextAreTextUnlessParsed() {
        Tokenizer t = llama2();
        int[] plain = t.encode("<s>Hi", false);
        assertTrue(Arrays.stream(plain).noneMatch(id -> id == 1), Arrays.toString(plain));
        // parse_special: the control token is cut out and a dummy prefix starts the text after it.
        assertArrayEquals(new int[] {1, 1, t.tokenId("▁Hi")}, t.encode("<s>Hi", true, true));
    }

    @Test
    void longTextEncodesQuicklyAndRoundTrips() {
        String unit = "Hello, world! Ça va? 🦙 The quick brown fox jumps over the lazy dog. 1234567890\n";
        long ms = VocabTestCases.timedRoundTrip(llama2(), "SPM text", unit, 2000);
        assertTrue(ms < 5_000, "encoding took " + ms + " ms");
        // One long "word" of 100k chars: merging must stay near-linear (priority queue, not rescans).
        ms = VocabTestCases.timedRoundTrip(llama2(), "SPM one word", "ab", 50_000);
        assertTrue(ms < 5_000, "encoding took " + ms + " ms");
    }

    @Test
    void metadataOnly() {
        try (GgufFile f = GgufFile.open(SharedData.path("models/stories260K.gguf"))) {
            Tokenizers.fromGguf(f);
            assertEquals(0, f.mappedBytes());
        }
    }
}
