package io.tnsr.engine.tokenizer;

import java.util.ArrayList;
import java.util.List;

/**
 * Llama 3's pre-tokenizer: splits text into the words that BPE then merges within, by the regex
 * <pre>
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * </pre>
 * (leftmost-first alternation, as in the {@code tokenizer.json} of Llama 3 and llama.cpp's
 * {@code unicode_regex_split_custom_llama3}), written out by hand over code points: linear time, no
 * backtracking, no allocation per word. {@code \p{L}} and {@code \p{N}} are Unicode general categories
 * (Java's tables); {@code \s} is the Unicode White_Space property, as in llama.cpp (not Java's ASCII-only
 * {@code \s}); the contraction letters match case-insensitively. A test checks this against
 * {@code java.util.regex} on random text.
 */
public final class Llama3PreTokenizer {

    /** Receives each word as a range of code point indices {@code [start, end)}. */
    @FunctionalInterface
    public interface WordSink {
        void word(int start, int end);
    }

    private Llama3PreTokenizer() {
    }

    /** Splits code points {@code cps[from, to)} into words, in order, covering the range exactly. */
    public static void split(int[] cps, int from, int to, WordSink sink) {
        int pos = from;
        while (pos < to) {
            int cp = cps[pos];

            // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            if (cp == '\'' && pos + 1 < to) {
                int c1 = lowerAscii(cps[pos + 1]);
                if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
                    sink.word(pos, pos + 2);
                    pos += 2;
                    continue;
                }
                if (pos + 2 < to) {
                    int c2 = lowerAscii(cps[pos + 2]);
                    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                        sink.word(pos, pos + 3);
                        pos += 3;
                        continue;
                    }
                }
            }

            // [^\r\n\p{L}\p{N}]?\p{L}+ : a letter run, with at most one leading char that is not \r, \n or a digit
            if (cp != '\r' && cp != '\n' && !isNumber(cp)
                    && (isLetter(cp) || (pos + 1 < to && isLetter(cps[pos + 1])))) {
                int end = pos + 1;
                while (end < to && isLetter(cps[end])) {
                    end++;
                }
                sink.word(pos, end);
                pos = end;
                continue;
            }

            // \p{N}{1,3}
            if (isNumber(cp)) {
                int end = pos + 1;
                while (end < to && end - pos < 3 && isNumber(cps[end])) {
                    end++;
                }
                sink.word(pos, end);
                pos = end;
                continue;
            }

            // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
            int q = cp == ' ' ? pos + 1 : pos;
            if (q < to && isOther(cps[q])) {
                int end = q + 1;
                while (end < to && isOther(cps[end])) {
                    end++;
                }
                while (end < to && (cps[end] == '\r' || cps[end] == '\n')) {
                    end++;
                }
                sink.word(pos, end);
                pos = end;
                continue;
            }

            // Whitespace: here cp is whitespace (letters, digits and others were taken above).
            int wsEnd = pos;
            int lastNewline = -1;
            while (wsEnd < to && isWhitespace(cps[wsEnd])) {
                if (cps[wsEnd] == '\r' || cps[wsEnd] == '\n') {
                    lastNewline = wsEnd + 1;
                }
                wsEnd++;
            }
            int end;
            if (lastNewline > 0) {
                end = lastNewline;                 // \s*[\r\n]+ : up to the run's last \r or \n
            } else if (wsEnd - pos > 1 && wsEnd < to) {
                end = wsEnd - 1;                   // \s+(?!\S) : leave the last space to the word after it
            } else if (wsEnd > pos) {
                end = wsEnd;                       // \s+
            } else {
                end = pos + 1;                     // not reached: every code point is one of the classes above
            }
            sink.word(pos, end);
            pos = end;
        }
    }

    /** The words of {@code text} as strings (for tests and tools). */
    public static List<String> split(String text) {
        int[] cps = text.codePoints().toArray();
        List<String> words = new ArrayList<>();
        split(cps, 0, cps.length, (s, e) -> words.add(new String(cps, s, e - s)));
        return words;
    }

    private static int lowerAscii(int c) {
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    }

    static boolean isLetter(int cp) {
        return Character.isLetter(cp);   // exactly the L categories: Lu, Ll, Lt, Lm, Lo
    }

    static boolean isNumber(int cp) {
        int t = Character.getType(cp);
        return t == Character.DECIMAL_DIGIT_NUMBER || t == Character.LETTER_NUMBER || t == Character.OTHER_NUMBER;
    }

    /** The Unicode White_Space property (what llama.cpp's tables and the original regex engine call \s). */
    static boolean isWhitespace(int cp) {
        if (cp <= 0x20) {
            return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D);
        }
        if (cp < 0x85) {
            return false;
        }
        return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A)
                || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
    }

    /** {@code [^\s\p{L}\p{N}]}. */
    static boolean isOther(int cp) {
        return !isWhitespace(cp) && !isLetter(cp) && !isNumber(cp);
    }
}
