package io.tnsr.engine.tokenizer;

import java.util.Arrays;

/**
 * GPT-2's reversible byte-to-unicode mapping, used by byte-level BPE vocabularies: every byte becomes one
 * printable character so that vocabulary entries are plain strings. Bytes {@code !..~}, {@code ¡..¬} and
 * {@code ®..ÿ} stand for themselves; the other 68 bytes (controls, space, DEL, NBSP, soft hyphen...) map in
 * increasing order to U+0100, U+0101, ... (so space is {@code Ġ} U+0120 and newline {@code Ċ} U+010A).
 */
final class ByteLevel {
    private static final char[] BYTE_TO_CHAR = new char[256];
    private static final int[] CHAR_TO_BYTE = new int[256 + 68];

    static {
        Arrays.fill(CHAR_TO_BYTE, -1);
        int extra = 0;
        for (int b = 0; b < 256; b++) {
            boolean printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            char c = printable ? (char) b : (char) (256 + extra++);
            BYTE_TO_CHAR[b] = c;
            CHAR_TO_BYTE[c] = b;
        }
    }

    private ByteLevel() {
    }

    /** The character that stands for byte {@code b} (0..255). */
    static char charOf(int b) {
        return BYTE_TO_CHAR[b];
    }

    /** The byte that character {@code c} stands for, or -1 if it stands for none. */
    static int byteOf(int c) {
        return c >= 0 && c < CHAR_TO_BYTE.length ? CHAR_TO_BYTE[c] : -1;
    }
}
