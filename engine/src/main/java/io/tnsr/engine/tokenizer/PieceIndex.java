package io.tnsr.engine.tokenizer;

/**
 * Vocabulary text -> id, looked up by a range of chars or by the concatenation of two ranges without
 * building the key string. The hash is {@link String#hashCode()}'s polynomial computed over the range;
 * matches are confirmed by comparing the chars. Open addressing; each slot holds the id, the hash and where
 * the piece's chars lie in one shared array, so a lookup touches about two cache lines (a
 * {@code HashMap<String, Integer>} touches four or five, and needs the key as a {@code String}). A
 * duplicated piece maps to its last id, as llama.cpp's {@code token_to_id} does.
 */
final class PieceIndex {
    private static final int ID = 0;       // id + 1; 0 = empty slot
    private static final int HASH = 1;
    private static final int OFFSET = 2;   // into chars
    private static final int LENGTH = 3;

    private final char[] chars;
    /** 4 ints per slot: ID, HASH, OFFSET, LENGTH. */
    private final int[] table;
    private final int mask;

    PieceIndex(String[] pieces) {
        int n = pieces.length;
        long total = 0;
        for (String p : pieces) {
            total += p.length();
        }
        if (total > Integer.MAX_VALUE - 16) {
            throw new TokenizerException("vocabulary too large: " + total + " chars of pieces");
        }
        chars = new char[(int) total];
        int cap = Integer.highestOneBit(Math.max(4, n * 2 - 1)) << 1;   // load factor <= 1/2
        table = new int[cap * 4];
        mask = cap - 1;
        int offset = 0;
        for (int id = 0; id < n; id++) {
            String p = pieces[id];
            int len = p.length();
            p.getChars(0, len, chars, offset);
            int h = p.hashCode();
            int i = spread(h) & mask;
            while (true) {
                int t = i * 4;
                if (table[t + ID] == 0) {
                    table[t + ID] = id + 1;
                    table[t + HASH] = h;
                    table[t + OFFSET] = offset;
                    table[t + LENGTH] = len;
                    break;
                }
                if (table[t + HASH] == h && table[t + LENGTH] == len && same(table[t + OFFSET], p, 0, len)) {
                    table[t + ID] = id + 1;   // duplicate text: the later id wins
                    break;
                }
                i = (i + 1) & mask;
            }
            offset += len;
        }
    }

    private static int spread(int h) {
        int x = h * 0x9E3779B9;
        return x ^ (x >>> 16);
    }

    private static int hash(int h, CharSequence s, int from, int to) {
        for (int k = from; k < to; k++) {
            h = 31 * h + s.charAt(k);
        }
        return h;
    }

    private boolean same(int offset, CharSequence s, int from, int len) {
        for (int k = 0; k < len; k++) {
            if (chars[offset + k] != s.charAt(from + k)) {
                return false;
            }
        }
        return true;
    }

    /** The id of the entry equal to {@code s[from, to)}, or -1. */
    int find(CharSequence s, int from, int to) {
        return findConcat(s, from, to, s, to, to);
    }

    /** The id of the entry equal to {@code s}, or -1. */
    int find(String s) {
        return find(s, 0, s.length());
    }

    /** The id of the entry equal to {@code a[aFrom, aTo) + b[bFrom, bTo)}, or -1. */
    int findConcat(CharSequence a, int aFrom, int aTo, CharSequence b, int bFrom, int bTo) {
        int h = hash(hash(0, a, aFrom, aTo), b, bFrom, bTo);
        int aLen = aTo - aFrom;
        int len = aLen + bTo - bFrom;
        for (int i = spread(h) & mask; ; i = (i + 1) & mask) {
            int t = i * 4;
            int id = table[t + ID] - 1;
            if (id < 0) {
                return -1;
            }
            if (table[t + HASH] == h && table[t + LENGTH] == len) {
                int off = table[t + OFFSET];
                if (same(off, a, aFrom, aLen) && same(off + aLen, b, bFrom, len - aLen)) {
                    return id;
                }
            }
        }
    }
}
