package io.tnsr.engine.tokenizer;

import java.util.ArrayList;
import java.util.List;

/**
 * The pre-tokenizers of byte-level BPE vocabularies: each splits text into the words that BPE then merges
 * within, by the regex of its {@code tokenizer.json} (leftmost-first alternation), written out by hand over
 * code points as llama.cpp's {@code unicode_regex_split_custom_*} functions do: linear time, no
 * backtracking, no allocation per word.
 * <ul>
 *   <li>{@link #LLAMA3}: <pre>(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+</pre></li>
 *   <li>{@link #QWEN2}: the same with single digits, {@code \p{N}} instead of {@code \p{N}{1,3}}.</li>
 *   <li>{@link #GPT2}: <pre>'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+</pre></li>
 * </ul>
 * {@code \p{L}} and {@code \p{N}} are Unicode general categories (Java's tables); {@code \s} is the Unicode
 * White_Space property, as in llama.cpp (not Java's ASCII-only {@code \s}). Llama 3's and Qwen2's contraction
 * letters match case-insensitively (llama.cpp spells them {@code '[sS]|'[tT]|...}), GPT-2's only in lower case.
 * {@code \s+(?!\S)} leaves the last of several white-space characters to the word after them (a word that
 * starts with one space), and takes the whole run at the end of the text. A test checks each against
 * {@code java.util.regex} on random text.
 */
public enum PreTokenizer {
    /** Llama 3 (and Falcon 3): digits in groups of up to three. */
    LLAMA3 {
        @Override
        public void split(int[] cps, int from, int to, WordSink sink) {
            splitLlama3Style(cps, from, to, 3, sink);
        }
    },
    /** Qwen2, Qwen2.5, Qwen3: Llama 3's regex with each digit a word of its own. */
    QWEN2 {
        @Override
        public void split(int[] cps, int from, int to, WordSink sink) {
            splitLlama3Style(cps, from, to, 1, sink);
        }
    },
    /** GPT-2: an optional space joins the letter, digit or other run after it; no special case for newlines. */
    GPT2 {
        @Override
        public void split(int[] cps, int from, int to, WordSink sink) {
            splitGpt2(cps, from, to, sink);
        }
    };

    /** Receives each word as a range of code point indices {@code [start, end)}. */
    @FunctionalInterface
    public interface WordSink {
        void word(int start, int end);
    }

    /** Splits code points {@code cps[from, to)} into words, in order, covering the range exactly. */
    public abstract void split(int[] cps, int from, int to, WordSink sink);

    /** The words of {@code text} as strings (for tests and tools). */
    public List<String> split(String text) {
        int[] cps = text.codePoints().toArray();
        List<String> words = new ArrayList<>();
        split(cps, 0, cps.length, (s, e) -> words.add(new String(cps, s, e - s)));
        return words;
    }

    /**
     * {@code (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,maxDigits}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+}.
     */
    private static void splitLlama3Style(int[] cps, int from, int to, int maxDigits, WordSink sink) {
        int pos = from;
        while (pos < to) {
            int cp = cps[pos];

            // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            int contraction = contraction(cps, pos, to, true);
            if (contraction > 0) {
                sink.word(pos, pos + contraction);
                pos += contraction;
                continue;
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

            // \p{N}{1,maxDigits}
            if (isNumber(cp)) {
                int end = pos + 1;
                while (end < to && end - pos < maxDigits && isNumber(cps[end])) {
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
            } else {
                end = whitespaceEnd(pos, wsEnd, to);
            }
            sink.word(pos, end);
            pos = end;
        }
    }

    /** {@code 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+}. */
    private static void splitGpt2(int[] cps, int from, int to, WordSink sink) {
        int pos = from;
        while (pos < to) {
            int cp = cps[pos];

            // 's|'t|'re|'ve|'m|'ll|'d
            int contraction = contraction(cps, pos, to, false);
            if (contraction > 0) {
                sink.word(pos, pos + contraction);
                pos += contraction;
                continue;
            }

            // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': a run of one class, with the space before it
            int q = cp == ' ' && pos + 1 < to ? pos + 1 : pos;
            int c = cps[q];
            int kind = kindOf(c);
            if (kind != 0) {
                int end = q + 1;
                while (end < to && kindOf(cps[end]) == kind) {
                    end++;
                }
                sink.word(pos, end);
                pos = end;
                continue;
            }

            // Whitespace: here cp is whitespace (a space before anything else was taken above).
            int wsEnd = pos;
            while (wsEnd < to && isWhitespace(cps[wsEnd])) {
                wsEnd++;
            }
            int end = whitespaceEnd(pos, wsEnd, to);
            sink.word(pos, end);
            pos = end;
        }
    }

    /**
     * Where {@code \s+(?!\S)|\s+} ends for the whitespace run {@code [pos, wsEnd)}: before the run's last
     * character when more follows (that character then starts the next word), else at the run's end.
     */
    private static int whitespaceEnd(int pos, int wsEnd, int to) {
        if (wsEnd - pos > 1 && wsEnd < to) {
            return wsEnd - 1;                      // \s+(?!\S)
        }
        return Math.max(wsEnd, pos + 1);           // \s+ (pos + 1: not reached, every code point has a class)
    }

    /**
     * The length of the contraction {@code 's|'t|'re|'ve|'m|'ll|'d} at {@code pos} (2 or 3), or 0. With
     * {@code anyCase}, the letters match in either ASCII case (llama.cpp lowers them with its Unicode table, but
     * the only code points lowering to these letters are their ASCII capitals).
     */
    private static int contraction(int[] cps, int pos, int to, boolean anyCase) {
        if (cps[pos] != '\'' || pos + 1 >= to) {
            return 0;
        }
        int c1 = anyCase ? lowerAscii(cps[pos + 1]) : cps[pos + 1];
        if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') {
            return 2;
        }
        if (pos + 2 < to) {
            int c2 = anyCase ? lowerAscii(cps[pos + 2]) : cps[pos + 2];
            if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                return 3;
            }
        }
        return 0;
    }

    private static int lowerAscii(int c) {
        return c >= 'A' && c <= 'Z' ? c + 32 : c;
    }

    /** 1 letter, 2 number, 0 whitespace, 3 anything else. */
    private static int kindOf(int cp) {
        return isLetter(cp) ? 1 : isNumber(cp) ? 2 : isWhitespace(cp) ? 0 : 3;
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
