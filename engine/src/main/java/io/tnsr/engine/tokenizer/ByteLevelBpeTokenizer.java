package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufMetadata;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Set;
import org.agrona.collections.IntArrayList;

/**
 * Byte-level BPE ({@code tokenizer.ggml.model = gpt2}) with the Llama 3 pre-tokenizer
 * ({@code tokenizer.ggml.pre} = {@code llama-bpe}, {@code llama3}, {@code llama-v3} or {@code falcon3}),
 * as llama.cpp's {@code llm_tokenizer_bpe} does it:
 * <ol>
 *   <li>the text is split into words by {@link Llama3PreTokenizer};</li>
 *   <li>each word's UTF-8 bytes are written as GPT-2 byte characters ({@link ByteLevel});</li>
 *   <li>a word that is itself a vocabulary entry is that token (llama.cpp's {@code ignore_merges}, set for
 *       Llama 3);</li>
 *   <li>otherwise the word starts as one symbol per byte, and adjacent symbols are merged by the rule of
 *       lowest rank in {@code tokenizer.ggml.merges} (the leftmost pair on a tie) while a rule applies.</li>
 * </ol>
 * Merge rules are resolved to token ids when loading ({@link MergeTable}), so merging compares ints and
 * allocates nothing per pair. A rule whose parts or result are not vocabulary entries cannot apply to a
 * well-formed vocabulary and is skipped ({@link #skippedMerges()} counts them; 0 for Llama 3).
 */
public final class ByteLevelBpeTokenizer extends BaseTokenizer {
    /** Pre-tokenizer names llama.cpp maps to its LLAMA3 pre-tokenizer type. */
    static final Set<String> LLAMA3_PRE = Set.of("llama-bpe", "llama3", "llama-v3", "falcon3");

    private final String pre;
    private final MergeTable merges;
    private final int skippedMerges;
    private final int[] byteTokens = new int[256];

    ByteLevelBpeTokenizer(GgufMetadata md, String pre) {
        super("gpt2", md, new SpecialDefaults(-1, -1, -1, true), false, ByteLevelBpeTokenizer::render);
        this.pre = pre;
        for (int b = 0; b < 256; b++) {
            byteTokens[b] = index.find(String.valueOf(ByteLevel.charOf(b)));
        }
        if (!md.has(KEY_MERGES)) {
            throw new TokenizerException("tokenizer 'gpt2': the metadata has no " + KEY_MERGES);
        }
        String[] rules = md.getStringArray(KEY_MERGES);
        merges = new MergeTable(rules.length);
        int skipped = 0;
        for (int rank = 0; rank < rules.length; rank++) {
            String rule = rules[rank];
            int sp = rule.indexOf(' ', 1);
            if (sp < 0) {
                skipped++;
                continue;
            }
            int left = index.find(rule, 0, sp);
            int right = index.find(rule, sp + 1, rule.length());
            int result = left < 0 || right < 0 ? -1 : index.findConcat(rule, 0, sp, rule, sp + 1, rule.length());
            if (result < 0) {
                skipped++;
                continue;
            }
            merges.putIfAbsent(left, right, rank, result);
        }
        skippedMerges = skipped;
    }

    private static byte[] render(String piece, TokenType type) {
        switch (type) {
            case NORMAL: {
                // GPT-2 characters back to bytes; a character outside the map (not in a well-formed vocabulary)
                // is kept as its own UTF-8 (llama.cpp writes "[UNK_BYTE_0x..]" there instead).
                byte[] fast = new byte[piece.length()];
                int k = 0;
                while (k < fast.length && ByteLevel.byteOf(piece.charAt(k)) >= 0) {
                    fast[k] = (byte) ByteLevel.byteOf(piece.charAt(k));
                    k++;
                }
                if (k == fast.length) {
                    return fast;
                }
                ByteArrayOutputStream out = new ByteArrayOutputStream(piece.length());
                for (int i = 0; i < piece.length(); ) {
                    int cp = piece.codePointAt(i);
                    int b = ByteLevel.byteOf(cp);
                    if (b >= 0) {
                        out.write(b);
                    } else {
                        byte[] u = new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8);
                        out.write(u, 0, u.length);
                    }
                    i += Character.charCount(cp);
                }
                return out.toByteArray();
            }
            case USER_DEFINED:
                return piece.getBytes(StandardCharsets.UTF_8);
            default:
                return new byte[0];   // control, unknown, unused, undefined: nothing, like llama.cpp
        }
    }

    /** The pre-tokenizer name from the metadata. */
    public String preTokenizer() {
        return pre;
    }

    /** Number of merge rules. */
    public int mergeCount() {
        return merges.size();
    }

    /** Merge rules that could not be resolved to vocabulary entries and were left out. */
    public int skippedMerges() {
        return skippedMerges;
    }

    @Override
    void encodeText(String text, int start, int end, boolean afterSpecial, IntArrayList out) {
        int[] cps = text.substring(start, end).codePoints().toArray();
        Words words = new Words(cps, out);
        Llama3PreTokenizer.split(cps, 0, cps.length, words);
    }

    /** Encodes each word as it comes from the pre-tokenizer; holds the scratch arrays reused across words. */
    private final class Words implements Llama3PreTokenizer.WordSink {
        private final int[] cps;
        private final IntArrayList out;
        private byte[] bytes = new byte[64];
        private final StringBuilder chars = new StringBuilder(64);
        private int[] tok = new int[64];
        private int[] next = new int[64];
        private int[] prev = new int[64];
        private int[] len = new int[64];
        private final BigramQueue queue = new BigramQueue();

        Words(int[] cps, IntArrayList out) {
            this.cps = cps;
            this.out = out;
        }

        @Override
        public void word(int s, int e) {
            int n = 0;
            for (int i = s; i < e; i++) {
                int cp = cps[i];
                if (cp >= 0xD800 && cp <= 0xDFFF) {
                    cp = 0xFFFD;   // a lone surrogate: what llama.cpp reads for invalid UTF-8
                }
                if (n + 4 > bytes.length) {
                    grow(n + 4);
                }
                if (cp < 0x80) {
                    bytes[n++] = (byte) cp;
                } else if (cp < 0x800) {
                    bytes[n++] = (byte) (0xC0 | (cp >> 6));
                    bytes[n++] = (byte) (0x80 | (cp & 0x3F));
                } else if (cp < 0x10000) {
                    bytes[n++] = (byte) (0xE0 | (cp >> 12));
                    bytes[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                    bytes[n++] = (byte) (0x80 | (cp & 0x3F));
                } else {
                    bytes[n++] = (byte) (0xF0 | (cp >> 18));
                    bytes[n++] = (byte) (0x80 | ((cp >> 12) & 0x3F));
                    bytes[n++] = (byte) (0x80 | ((cp >> 6) & 0x3F));
                    bytes[n++] = (byte) (0x80 | (cp & 0x3F));
                }
            }
            chars.setLength(0);
            for (int i = 0; i < n; i++) {
                chars.append(ByteLevel.charOf(bytes[i] & 0xFF));
            }
            int whole = index.find(chars, 0, n);
            if (whole >= 0) {
                out.addInt(whole);   // ignore_merges: the word is an entry of its own
                return;
            }
            for (int i = 0; i < n; i++) {
                tok[i] = byteTokens[bytes[i] & 0xFF];
                len[i] = 1;
                prev[i] = i - 1;
                next[i] = i + 1 < n ? i + 1 : -1;
            }
            queue.clear();
            for (int i = 1; i < n; i++) {
                tryAdd(i - 1, i);
            }
            while (!queue.isEmpty()) {
                int q = queue.pop();
                int l = queue.left(q);
                int r = queue.right(q);
                if (len[l] == 0 || len[r] == 0 || len[l] + len[r] != queue.size(q)) {
                    continue;   // stale: a side was merged with something else meanwhile
                }
                int slot = merges.find(tok[l], tok[r]);
                tok[l] = merges.result(slot);
                len[l] += len[r];
                len[r] = 0;
                next[l] = next[r];
                if (next[r] >= 0) {
                    prev[next[r]] = l;
                }
                tryAdd(prev[l], l);
                tryAdd(l, next[l]);
            }
            for (int i = 0; i != -1; i = next[i]) {
                if (tok[i] >= 0) {
                    out.addInt(tok[i]);   // -1: a byte with no entry of its own; llama.cpp drops it too
                }
            }
        }

        private void tryAdd(int l, int r) {
            if (l < 0 || r < 0 || tok[l] < 0 || tok[r] < 0) {
                return;
            }
            int slot = merges.find(tok[l], tok[r]);
            if (slot >= 0) {
                queue.push(-merges.rank(slot), l, r, len[l] + len[r]);
            }
        }

        private void grow(int min) {
            int cap = Math.max(min, bytes.length * 2);
            bytes = java.util.Arrays.copyOf(bytes, cap);
            tok = new int[cap];
            next = new int[cap];
            prev = new int[cap];
            len = new int[cap];
        }
    }
}
