package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufMetadata;
import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import org.agrona.collections.IntArrayList;

/**
 * Byte-level BPE ({@code tokenizer.ggml.model = gpt2}) as llama.cpp's {@code llm_tokenizer_bpe} does it, for the
 * pre-tokenizers ({@code tokenizer.ggml.pre}) of {@link #SUPPORTED_PRE}:
 * <ol>
 *   <li>the text is split into words by the vocabulary's {@link PreTokenizer};</li>
 *   <li>each word's UTF-8 bytes are written as GPT-2 byte characters ({@link ByteLevel});</li>
 *   <li>for Llama 3 only (llama.cpp's {@code ignore_merges}), a word that is itself a vocabulary entry is that
 *       token;</li>
 *   <li>otherwise the word starts as one symbol per byte, and adjacent symbols are merged by the rule of
 *       lowest rank in {@code tokenizer.ggml.merges} (the leftmost pair on a tie) while a rule applies.</li>
 * </ol>
 * Merge rules are resolved to token ids when loading ({@link MergeTable}), so merging compares ints and
 * allocates nothing per pair. A rule whose parts or result are not vocabulary entries cannot apply to a
 * well-formed vocabulary and is skipped ({@link #skippedMerges()} counts them; 0 for Llama 3, Qwen2 and GPT-2).
 *
 * <p>Decoding gives each token's bytes exactly; llama.cpp's {@code llama_detokenize} can also "clean up"
 * spaces before punctuation for some of these vocabularies ({@code clean_spaces}), which this class does not
 * do, so that decoding round-trips the text and streamed pieces add up to the decoded whole.
 */
public final class ByteLevelBpeTokenizer extends BaseTokenizer {

    /** How llama.cpp treats a {@code tokenizer.ggml.pre} value: the split, {@code ignore_merges} and its default add_bos. */
    record Pre(PreTokenizer split, boolean ignoreMerges, boolean addBos) { }

    /** The {@code tokenizer.ggml.pre} values supported, each as llama.cpp's {@code llama_vocab::impl::load} maps it. */
    static final Map<String, Pre> SUPPORTED_PRE = Map.of(
            "llama-bpe", new Pre(PreTokenizer.LLAMA3, true, true),
            "llama3", new Pre(PreTokenizer.LLAMA3, true, true),
            "llama-v3", new Pre(PreTokenizer.LLAMA3, true, true),
            "falcon3", new Pre(PreTokenizer.LLAMA3, true, true),
            "qwen2", new Pre(PreTokenizer.QWEN2, false, false),
            "deepseek-r1-qwen", new Pre(PreTokenizer.QWEN2, false, false),
            "gpt-2", new Pre(PreTokenizer.GPT2, false, false),
            "phi-2", new Pre(PreTokenizer.GPT2, false, false));

    private final String pre;
    private final PreTokenizer split;
    private final boolean ignoreMerges;
    private final MergeTable merges;
    private final int skippedMerges;
    private final int[] byteTokens = new int[256];

    /** {@code pre} must be a key of {@link #SUPPORTED_PRE} (the factory checks it and names the file's value otherwise). */
    ByteLevelBpeTokenizer(GgufMetadata md, String pre) {
        this(md, pre, supported(pre));
    }

    private ByteLevelBpeTokenizer(GgufMetadata md, String pre, Pre kind) {
        super("gpt2", md, new SpecialDefaults(-1, -1, -1, kind.addBos()), false, ByteLevelBpeTokenizer::render);
        this.pre = pre;
        this.split = kind.split();
        this.ignoreMerges = kind.ignoreMerges();
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

    private static Pre supported(String pre) {
        Pre p = SUPPORTED_PRE.get(pre);
        if (p == null) {
            throw new TokenizerException("tokenizer model 'gpt2' with pre-tokenizer '" + pre + "' is not supported");
        }
        return p;
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

    /** The split the pre-tokenizer name stands for. */
    public PreTokenizer split() {
        return split;
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
        split.split(cps, 0, cps.length, words);
    }

    /** Encodes each word as it comes from the pre-tokenizer; holds the scratch arrays reused across words. */
    private final class Words implements PreTokenizer.WordSink {
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
            if (ignoreMerges) {
                int whole = index.find(chars, 0, n);
                if (whole >= 0) {
                    out.addInt(whole);   // the word is an entry of its own
                    return;
                }
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
