package io.tnsr.engine.tokenizer;

import io.tnsr.engine.testing.SharedData;
import org.junit.jupiter.api.DynamicTest;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.function.Function;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * llama.cpp's tokenizer test vectors ({@code shared/tokenizers/NAME.gguf.inp} and {@code .out}): the input
 * strings are separated by lines {@code __ggml_vocab_test__}; the output has one line per string, the ids
 * encoded without BOS, each preceded by a space.
 */
record VocabTestCases(List<String> texts, List<int[]> expected) {
    static final String SEPARATOR = "\n__ggml_vocab_test__\n";

    static VocabTestCases load(String vocabName) throws IOException {
        Path inp = SharedData.path("tokenizers/" + vocabName + ".inp");
        Path outp = SharedData.path("tokenizers/" + vocabName + ".out");
        String all = Files.readString(inp, StandardCharsets.UTF_8);
        List<String> texts = new ArrayList<>();
        int from = 0;
        for (int at; (at = all.indexOf(SEPARATOR, from)) >= 0; from = at + SEPARATOR.length()) {
            texts.add(all.substring(from, at));
        }
        List<String> lines = Files.readAllLines(outp, StandardCharsets.UTF_8);
        List<int[]> expected = new ArrayList<>();
        for (String line : lines) {
            String t = line.trim();
            expected.add(t.isEmpty() ? new int[0] : Arrays.stream(t.split(" +")).mapToInt(Integer::parseInt).toArray());
        }
        assertEquals(texts.size(), expected.size(), vocabName + ": .inp and .out disagree on the number of cases");
        return new VocabTestCases(texts, expected);
    }

    /** One test per case: {@code encode(text)} must give the expected ids; the name shows the text escaped. */
    Stream<DynamicTest> encodeTests(Function<String, int[]> encode) {
        List<DynamicTest> tests = new ArrayList<>();
        for (int k = 0; k < texts.size(); k++) {
            String text = texts.get(k);
            int[] want = expected.get(k);
            tests.add(DynamicTest.dynamicTest(String.format("#%02d %s", k, show(text)),
                    () -> assertArrayEquals(want, encode.apply(text),
                            () -> "text " + show(text) + "\n expected " + Arrays.toString(want)
                                    + "\n got      " + Arrays.toString(encode.apply(text)))));
        }
        return tests.stream();
    }

    /** One test per case: decoding the encoded text, with or without BOS, gives the text back. */
    Stream<DynamicTest> roundTripTests(Tokenizer t) {
        return texts.stream().map(text -> DynamicTest.dynamicTest("round trip " + show(text), () -> {
            assertEquals(text, t.decode(t.encode(text, true)));
            assertEquals(text, t.decode(t.encode(text, false)));
        }));
    }

    /**
     * Encodes {@code unit} repeated {@code times} times (after one warm-up encode), prints how long it took,
     * checks that it decodes back and returns the milliseconds.
     */
    static long timedRoundTrip(Tokenizer t, String label, String unit, int times) {
        String text = unit.repeat(times);
        t.encode(unit, false);
        long t0 = System.nanoTime();
        int[] ids = t.encode(text, false);
        long ms = (System.nanoTime() - t0) / 1_000_000;
        System.out.printf("%s: encoding %d chars took %d ms, %d tokens%n", label, text.length(), ms, ids.length);
        assertEquals(text, t.decode(ids));
        return ms;
    }

    /** {@code s} quoted, with control characters escaped, shortened for test names. */
    static String show(String s) {
        StringBuilder sb = new StringBuilder("\"");
        s.codePoints().limit(60).forEach(c -> {
            switch (c) {
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '"' -> sb.append("\\\"");
                default -> {
                    if (c < 0x20) {
                        sb.append(String.format("\\x%02x", c));
                    } else {
                        sb.appendCodePoint(c);
                    }
                }
            }
        });
        if (s.codePointCount(0, s.length()) > 60) {
            sb.append("...");
        }
        return sb.append('"').toString();
    }
}
