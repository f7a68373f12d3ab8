package io.tnsr.engine.tokenizer;

import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;

/** The hand-written Llama 3 split against the regex itself, run by java.util.regex. */
class Llama3PreTokenizerTest {
    /**
     * Llama 3's pattern with {@code \s}/{@code \S} spelled as the Unicode White_Space property (Java's
     * {@code \s} is ASCII-only; the original engines' is not). {@code (?i)} on ASCII letters only.
     */
    static final Pattern LLAMA3 = Pattern.compile(
            "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\p{IsWhite_Space}\\p{L}\\p{N}]+[\\r\\n]*"
                    + "|\\p{IsWhite_Space}*[\\r\\n]+|\\p{IsWhite_Space}+(?!\\P{IsWhite_Space})|\\p{IsWhite_Space}+");

    static List<String> byRegex(String text) {
        List<String> words = new ArrayList<>();
        Matcher m = LLAMA3.matcher(text);
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
    void examples() {
        assertEquals(List.of("Hello", ",", " world", "!"), Llama3PreTokenizer.split("Hello, world!"));
        assertEquals(List.of("   ", " Hello"), Llama3PreTokenizer.split("    Hello"));
        assertEquals(List.of("123", "456", "7"), Llama3PreTokenizer.split("1234567"));
        assertEquals(List.of("I", "'VE", " been"), Llama3PreTokenizer.split("I'VE been"));
        assertEquals(List.of("y", "'all"), Llama3PreTokenizer.split("y'all"));
        assertEquals(List.of(" \n\n", " ", "\tx"), Llama3PreTokenizer.split(" \n\n \tx"));
        assertEquals(List.of("\u3000", "\u3000中文"), Llama3PreTokenizer.split("\u3000\u3000中文"));
    }

    @Test
    void agreesWithRegexOnRandomText() {
        String[] alphabet = {"a", "Z", "é", "ß", "Б", "中", "ｶ", "𝐀", "1", "٣", "½", "Ⅻ", " ", " ", " ", "\t", "\n", "\r",
            "\u000B", "\u00A0", "\u3000", "\u2028", "\u0085", "'", "'s", "'T", "'re", "'LL", "'d", "!", ".", "(", "😀",
            "\u0301", "\u200D", "\u0000", "_", "-", "~", "\u001F"};
        Random r = new Random(7);
        for (int round = 0; round < 20_000; round++) {
            StringBuilder sb = new StringBuilder();
            int n = r.nextInt(16);
            for (int i = 0; i < n; i++) {
                sb.append(alphabet[r.nextInt(alphabet.length)]);
            }
            String text = sb.toString();
            assertEquals(byRegex(text), Llama3PreTokenizer.split(text), () -> VocabTestCases.show(text));
        }
    }
}
