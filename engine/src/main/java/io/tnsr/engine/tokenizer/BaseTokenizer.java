package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufMetadata;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import org.agrona.collections.IntArrayList;

/**
 * What both vocabulary kinds share: the vocabulary itself (pieces, types, text -> id), the special ids,
 * the splitting of text around special tokens before the model's own algorithm runs (llama.cpp's
 * {@code tokenizer_st_partition}), and decoding through each token's pre-rendered bytes.
 */
abstract class BaseTokenizer implements Tokenizer {
    static final String KEY_MODEL = "tokenizer.ggml.model";
    static final String KEY_TOKENS = "tokenizer.ggml.tokens";
    static final String KEY_TYPES = "tokenizer.ggml.token_type";
    static final String KEY_SCORES = "tokenizer.ggml.scores";
    static final String KEY_MERGES = "tokenizer.ggml.merges";
    static final String KEY_PRE = "tokenizer.ggml.pre";

    /** How a vocabulary kind turns one entry into the bytes it stands for in decoded text. */
    @FunctionalInterface
    interface Renderer {
        byte[] render(String piece, TokenType type);
    }

    private static final byte[] NOTHING = new byte[0];

    /**
     * Texts of tokens that end generation whatever their type in the file, as llama.cpp lists them (it finds
     * them by text because GGUF files do not mark them). llama.cpp also makes such a token a control token
     * when the file says otherwise (Phi-3's user-defined {@code </s>}), and so does this class.
     */
    private static final String[] EOG_TEXTS = {
        "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
        "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
        "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
    };

    private final String model;
    final String[] pieces;
    final TokenType[] types;
    final PieceIndex index;
    final int bos;
    final int eos;
    final int unk;
    private final boolean addBos;
    /** SentencePiece with a dummy space prefix: decoding drops the first token's leading space. */
    final boolean stripsLeadingSpace;
    private final boolean[] endOfGeneration;
    private final byte[][] rendered;
    /** Control, unknown and user-defined tokens, longest text first: matched in text with parseSpecial. */
    private final int[] specialAll;
    /** User-defined tokens only, longest first: always matched in text. */
    private final int[] specialUserDefined;
    /** Special tokens that swallow the white space after them in text (llama.cpp's RSTRIP attribute); null: none. */
    private final boolean[] rstrip;

    BaseTokenizer(String model, GgufMetadata md, SpecialDefaults defaults, boolean stripsLeadingSpace, Renderer renderer) {
        this.model = model;
        String[] raw = md.getStringArray(KEY_TOKENS);
        int n = raw.length;
        if (n == 0) {
            throw new TokenizerException("tokenizer '" + model + "': the vocabulary (" + KEY_TOKENS + ") is empty");
        }
        pieces = new String[n];
        types = new TokenType[n];
        int[] rawTypes = md.has(KEY_TYPES) ? md.getIntArray(KEY_TYPES) : null;
        if (rawTypes != null && rawTypes.length != n) {
            throw new TokenizerException("tokenizer '" + model + "': " + KEY_TYPES + " has " + rawTypes.length
                    + " entries for " + n + " tokens");
        }
        for (int i = 0; i < n; i++) {
            String p = raw[i];
            if (p.isEmpty()) {
                p = "[EMPTY_" + i + "]";   // llama.cpp's stand-in, so that "" never matches
            }
            pieces[i] = p;
            types[i] = rawTypes == null ? TokenType.NORMAL : TokenType.fromGguf(rawTypes[i]);
        }
        index = new PieceIndex(pieces);
        bos = specialId(md, "tokenizer.ggml.bos_token_id", defaults.bos, n);
        eos = specialId(md, "tokenizer.ggml.eos_token_id", defaults.eos, n);
        unk = specialId(md, "tokenizer.ggml.unknown_token_id", defaults.unk, n);
        addBos = md.getBoolean("tokenizer.ggml.add_bos_token", defaults.addBos) && bos >= 0;
        this.stripsLeadingSpace = stripsLeadingSpace;

        endOfGeneration = new boolean[n];
        markEog(eos);
        markEog(specialId(md, "tokenizer.ggml.eot_token_id", -1, n));
        markEog(specialId(md, "tokenizer.ggml.eom_token_id", -1, n));
        for (String text : EOG_TEXTS) {
            int id = index.find(text);
            if (id >= 0) {
                markEog(id);
                types[id] = TokenType.CONTROL;   // llama.cpp overrides the type: never parsed unasked, renders as nothing
            }
        }

        rendered = new byte[n][];
        for (int i = 0; i < n; i++) {
            byte[] r = renderer.render(pieces[i], types[i]);
            rendered[i] = r.length == 0 ? NOTHING : r;
        }

        List<Integer> all = new ArrayList<>();
        List<Integer> user = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            TokenType t = types[i];
            if (t == TokenType.CONTROL || t == TokenType.UNKNOWN || t == TokenType.USER_DEFINED) {
                all.add(i);
                if (t == TokenType.USER_DEFINED) {
                    user.add(i);
                }
            }
        }
        Comparator<Integer> longestFirst = Comparator.<Integer>comparingInt(i -> pieces[i].length()).reversed()
                .thenComparingInt(i -> i);
        all.sort(longestFirst);
        user.sort(longestFirst);
        specialAll = all.stream().mapToInt(Integer::intValue).toArray();
        specialUserDefined = user.stream().mapToInt(Integer::intValue).toArray();
        rstrip = rstripTokens(md, specialAll);
    }

    /**
     * The special tokens that strip the white space following them, as llama.cpp sets them by model name (the
     * GGUF has no per-token attributes): for Phi-3 ({@code general.name} containing "phi-3" or "phi3", any case)
     * every special token and {@code </s>} except {@code <unk>}, {@code <s>} and {@code <|endoftext|>}, like the
     * {@code rstrip} of the added tokens in Phi-3's {@code tokenizer.json}: {@code "<|user|>\nHi"} encodes as
     * {@code <|user|>} then {@code "Hi"}. Null when no token does.
     */
    private boolean[] rstripTokens(GgufMetadata md, int[] specials) {
        String name = md.getString("general.name", "").toLowerCase(Locale.ROOT);
        if (!name.contains("phi-3") && !name.contains("phi3")) {
            return null;
        }
        boolean[] r = new boolean[pieces.length];
        for (int id : specials) {
            r[id] = true;
        }
        int eosText = index.find("</s>");
        if (eosText >= 0) {
            r[eosText] = true;
        }
        for (String keep : new String[] {"<unk>", "<s>", "<|endoftext|>"}) {
            int id = index.find(keep);
            if (id >= 0) {
                r[id] = false;
            }
        }
        return r;
    }

    /** C's {@code isspace} in the "C" locale, which llama.cpp uses to strip around special tokens. */
    private static boolean isCSpace(char c) {
        return c == ' ' || (c >= '\t' && c <= '\r');
    }

    /** llama.cpp's per-kind defaults for ids and add_bos when the metadata has no key. */
    record SpecialDefaults(int bos, int eos, int unk, boolean addBos) { }

    private static int specialId(GgufMetadata md, String key, int fallback, int n) {
        int id = md.has(key) ? md.getTokenId(key) : fallback;
        return id >= 0 && id < n ? id : -1;
    }

    private void markEog(int id) {
        if (id >= 0) {
            endOfGeneration[id] = true;
        }
    }

    // ---- encoding ------------------------------------------------------------------------------------

    /**
     * Encodes the raw text {@code text[start, end)} (no special tokens in it) and appends the ids.
     * {@code afterSpecial}: the fragment starts the text or follows a special token (SentencePiece then adds
     * its dummy space prefix).
     */
    abstract void encodeText(String text, int start, int end, boolean afterSpecial, IntArrayList out);

    @Override
    public final int[] encode(String text, boolean addBos, boolean parseSpecial) {
        IntArrayList out = new IntArrayList(text.length() / 3 + 4, Integer.MIN_VALUE);
        if (addBos && bos >= 0) {
            out.addInt(bos);
        }
        if (text.isEmpty()) {
            return out.toIntArray();   // like SentencePiece: "" encodes to nothing (no dummy prefix)
        }
        int[] specials = parseSpecial ? specialAll : specialUserDefined;
        if (specials.length == 0) {
            encodeText(text, 0, text.length(), true, out);
            return out.toIntArray();
        }
        boolean afterSpecial = true;
        for (int[] f : partition(text, specials)) {
            if (f[0] >= 0) {
                out.addInt(f[0]);
                afterSpecial = true;
            } else {
                encodeText(text, f[1], f[2], afterSpecial, out);
                afterSpecial = false;
            }
        }
        return out.toIntArray();
    }

    /**
     * Splits {@code text} into fragments {@code {tokenId, 0, 0}} for special tokens found in it and
     * {@code {-1, start, end}} for the raw text between them. Each special token, longest first, is searched
     * in every raw fragment left by the ones before it (leftmost occurrences, not overlapping), as llama.cpp does.
     * White space after a token that strips it ({@link #rstripTokens}) belongs to no fragment.
     */
    private List<int[]> partition(String text, int[] specials) {
        List<int[]> frags = new ArrayList<>();
        frags.add(new int[] {-1, 0, text.length()});
        for (int id : specials) {
            String p = pieces[id];
            if (p.isEmpty() || text.indexOf(p) < 0) {
                continue;
            }
            List<int[]> next = new ArrayList<>(frags.size() + 4);
            for (int[] f : frags) {
                if (f[0] >= 0) {
                    next.add(f);
                    continue;
                }
                int from = f[1];
                int end = f[2];
                while (true) {
                    int at = text.indexOf(p, from);
                    if (at < 0 || at + p.length() > end) {
                        break;
                    }
                    if (at > from) {
                        next.add(new int[] {-1, from, at});
                    }
                    next.add(new int[] {id, 0, 0});
                    from = at + p.length();
                    if (rstrip != null && rstrip[id]) {
                        while (from < end && isCSpace(text.charAt(from))) {
                            from++;
                        }
                    }
                }
                if (from < end) {
                    next.add(new int[] {-1, from, end});
                }
            }
            frags = next;
        }
        return frags;
    }

    // ---- decoding ------------------------------------------------------------------------------------

    @Override
    public final byte[] tokenBytes(int id) {
        return rendered(id).clone();
    }

    /** The bytes {@code id} stands for in decoded text (empty for control tokens); never modify. */
    final byte[] rendered(int id) {
        checkId(id);
        return rendered[id];
    }

    final void checkId(int id) {
        if (id < 0 || id >= pieces.length) {
            throw new IllegalArgumentException("token id " + id + " is outside the vocabulary (0.." + (pieces.length - 1) + ")");
        }
    }

    @Override
    public final String decode(int[] ids) {
        StreamingDecoder d = newDecoder();
        StringBuilder sb = new StringBuilder(ids.length * 4);
        for (int id : ids) {
            d.next(id, sb);
        }
        d.finish(sb);
        return sb.toString();
    }

    @Override
    public final StreamingDecoder newDecoder() {
        return new StreamingDecoder(this, -1);
    }

    @Override
    public final StreamingDecoder newDecoder(int previousToken) {
        if (previousToken != -1) {
            checkId(previousToken);
        }
        return new StreamingDecoder(this, previousToken);
    }

    // ---- vocabulary ----------------------------------------------------------------------------------

    @Override
    public final String model() {
        return model;
    }

    @Override
    public final boolean addsBos() {
        return addBos;
    }

    @Override
    public final int bos() {
        return bos;
    }

    @Override
    public final int eos() {
        return eos;
    }

    @Override
    public final boolean isEndOfGeneration(int id) {
        return id >= 0 && id < endOfGeneration.length && endOfGeneration[id];
    }

    @Override
    public final int vocabSize() {
        return pieces.length;
    }

    @Override
    public final String piece(int id) {
        checkId(id);
        return pieces[id];
    }

    @Override
    public final TokenType type(int id) {
        checkId(id);
        return types[id];
    }

    @Override
    public final int tokenId(String piece) {
        return index.find(piece);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "[" + model + ", " + pieces.length + " tokens, bos=" + bos + ", eos=" + eos + "]";
    }
}
