package io.tnsr.engine.tokenizer;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The hand-written splits against their regexes, run by java.util.regex. */
class PreTokenizerTest {
    /** {@code \s} and {@code \S} spelled as the Unicode White_Space property (Java's {@code \s} is ASCII-only; the original engines' is not). */
    private static final String WS = "\\p{IsWhite_Space}";
    private static final String NOT_WS = "\\P{IsWhite_Space}";

    /** Llama 3's pattern; {@code (?i)} on ASCII letters only. */
    static final Pattern LLAMA3 = Pattern.compile(
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^" + WS + "\\p{L}\\p{N}]+[\\r\\n]*"
                    + "|" + WS + "*[\\r\\n]+|" + WS + "+(?!" + NOT_WS + ")|" + WS + "+");

    /** Qwen2's pattern: Llama 3's with single digits. */
    static final Pattern QWEN2 = Pattern.compile(
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" + WS + "\\p{L}\\p{N}]+[\\r\\n]*"
                    + "|" + WS + "*[\\r\\n]+|" + WS + "+(?!" + NOT_WS + ")|" + WS + "+");

    /** GPT-2's pattern. */
    static final Pattern GPT2 = Pattern.compile(
            "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + WS + "\\p{L}\\p{N}]+|" + WS + "+(?!" + NOT_WS + ")|" + WS + "+");

    static List<String> byRegex(Pattern p, String text) {
        List<String> words = new ArrayList<>();
        Matcher m = p.matcher(text);
        int last = 0;
        while (m.find()) {
            if (m.start() > last) {
                words.add(text.substring(last, m.start()));   // unmatched text (none expected)
            }
            words.add(m.group());
            last = m.end();
        }
        if (last < text.length()) {
            words.add(text.substring(last));
        }
        return words;
    }

    @Test
    void llama3Examples() {
        PreTokenizer p = PreTokenizer.LLAMA3;
        assertEquals(List.of("Hello", ",", " world", "!"), p.split("Hello, world!"));
        assertEquals(List.of("   ", " Hello"), p.split("    Hello"));
        assertEquals(List.of("123", "456", "7"), p.split("1234567"));
        assertEquals(List.of("I", "'VE", " been"), p.split("I'VE been"));
        assertEquals(List.of("y", "'all"), p.split("y'all"));
        assertEquals(List.of(" \n\n", " ", "\tx"), p.split(" \n\n \tx"));
        assertEquals(List.of("\u3000", "\u3000中文"), p.split("\u3000\u3000中文"));
    }

    @Test
    void qwen2Examples() {
        PreTokenizer p = PreTokenizer.QWEN2;
        assertEquals(List.of("1", "2", "3", "4", "5", "6", "7"), p.split("1234567"));
        assertEquals(List.of("w", "0", "4", "8", " ", "7", "tuijk"), p.split("w048 7tuijk"));
        assertEquals(List.of("I", "'VE", " been"), p.split("I'VE been"));
        assertEquals(List.of("   ", " Hello"), p.split("    Hello"));
    }

    @Test
    void gpt2Examples() {
        PreTokenizer p = PreTokenizer.GPT2;
        assertEquals(List.of("Hello", ",", " world", "!"), p.split("Hello, world!"));
        assertEquals(List.of("1234567", " 89"), p.split("1234567 89"));
        assertEquals(List.of("I", "'", "VE", " been", "'s"), p.split("I'VE been's"));   // lower case only
        assertEquals(List.of("   ", " Hello", "\n\n", "\t", "x"), p.split("    Hello\n\n\tx"));
        assertEquals(List.of(" \n ", " ("), p.split(" \n  ("));
        assertEquals(List.of("  "), p.split("  "));
    }

    @Test
    void llama3AgreesWithRegexOnRandomText() {
        agreesOnRandomText(PreTokenizer.LLAMA3, LLAMA3);
    }

    @Test
    void qwen2AgreesWithRegexOnRandomText() {
        agreesOnRandomText(PreTokenizer.QWEN2, QWEN2);
    }

    @Test
    void gpt2AgreesWithRegexOnRandomText() {
        agreesOnRandomText(PreTokenizer.GPT2, GPT2);
    }

    private static void agreesOnRandomText(PreTokenizer split, Pattern regex) {
        String[] alphabet = {"a", "Z", "é", "ß", "Б", "中", "ｶ", "𝐀", "1", "٣", "½", "Ⅻ", " ", " ", " ", "\t", "\n", "\r",
            "\u000B", "\u00A0", "\u3000", "\u2028", "\u0085", "'", "'s", "'T", "'re", "'LL", "'d", "!", ".", "(", "😀",
            "\u0301", "\u200D", "\u0000", "_", "-", "~", "\u001F", "s", "ve"};
        Random r = new Random(7);
        for (int round = 0; round < 20_000; round++) {
            StringBuilder sb = new StringBuilder();
            int n = r.nextInt(16);
            for (int i = 0; i < n; i++) {
                sb.append(alphabet[r.nextInt(alphabet.length)]);
            }
            String text = sb.toString();
            assertEquals(byRegex(regex, text), split.split(text), () -> split + " " + VocabTestCases.show(text));
        }
    }
}
