package io.tnsr.engine.tokenizer;

import io.tnsr.engine.gguf.GgufMetadata;
import java.nio.charset.StandardCharsets;
import org.agrona.collections.IntArrayList;

/**
 * The SentencePiece-style BPE tokenizer of Llama 1/2 and llama2.c models ({@code tokenizer.ggml.model =
 * llama}): spaces become U+2581 '▁', a dummy '▁' is put in front of the text, the text is split into
 * characters, and adjacent symbols are merged again and again, always the pair whose concatenation is the
 * vocabulary entry with the highest score (the leftmost pair on a tie), while such a pair exists. A symbol
 * that is not in the vocabulary at the end is written as its UTF-8 bytes, {@code <0xNN>} tokens
 * (byte fallback), or as the unknown token when the vocabulary has no byte tokens.
 *
 * <h2>llama.cpp and llama2.c</h2>
 * The merge loop is llama.cpp's {@code llm_tokenizer_spm} (a priority queue of candidate pairs over a linked
 * list of symbols: O(n log n), not O(n^2)). llama2.c's {@code encode} in run.c reaches the same result by a
 * quadratic scan (each round it looks at every adjacent pair and merges the best, the first on a tie), but
 * differs in a few places; which one this class follows, and why both test sets still pass:
 * <ul>
 *   <li><b>Byte fallback before or after merging.</b> llama2.c turns a character that is not itself a
 *       vocabulary entry into {@code <0xNN>} tokens <i>before</i> merging, so it can never become part of a
 *       longer piece; llama.cpp keeps it as a character and falls back to bytes only if it is still alone at
 *       the end. They differ only for a vocabulary holding a multi-character piece but not one of its
 *       characters, which SentencePiece's BPE training never produces (every piece is a merge of pieces).
 *       We follow llama.cpp.</li>
 *   <li><b>BOS and the dummy prefix as tokens.</b> llama2.c puts BOS and the " " token in its token list
 *       first and lets its merge loop look at (BOS, next) pairs too; a BOS piece ({@code "\n<s>\n"} in
 *       tokenizer.bin) never concatenates into an entry, so that changes nothing. We keep BOS out of merging
 *       and prefix '▁' to the text, as llama.cpp does.</li>
 *   <li><b>Special tokens.</b> llama2.c has none; llama.cpp first cuts user-defined tokens (and, when asked,
 *       control tokens) out of the text and adds a dummy prefix again after each of them. We follow llama.cpp
 *       ({@link BaseTokenizer}), including Phi-3's stripping of the white space after its chat tokens; of the
 *       test vocabularies only Phi-3 has a user-defined token ({@code </s>}).</li>
 *   <li><b>Decoding the leading space.</b> llama2.c drops the leading space of the token after BOS;
 *       llama.cpp's {@code llama_detokenize} drops it from the first token of the list instead, and keeps it
 *       after BOS. We drop it in both places (see {@link StreamingDecoder}), which is llama2.c's output for
 *       every sequence run.c makes (they start with BOS) and llama.cpp's for sequences without BOS.</li>
 *   <li><b>Unprintable bytes.</b> run.c's {@code safe_printf} skips a raw byte token that is not printable
 *       ASCII or whitespace, so it prints nothing for the bytes of "’" spelled as byte tokens; we reassemble
 *       UTF-8 like llama.cpp. The golden texts are ASCII, so the two agree there.</li>
 * </ul>
 */
public final class SentencePieceTokenizer extends BaseTokenizer {
    static final char SPACE = '\u2581';

    private final float[] scores;
    private final boolean addSpacePrefix;
    private final int[] byteTokens = new int[256];

    SentencePieceTokenizer(GgufMetadata md) {
        super("llama", md, new SpecialDefaults(1, 2, 0, true),
                md.getBoolean("tokenizer.ggml.add_space_prefix", true), SentencePieceTokenizer::render);
        addSpacePrefix = md.getBoolean("tokenizer.ggml.add_space_prefix", true);
        if (md.has(KEY_SCORES)) {
            scores = md.getFloatArray(KEY_SCORES);
            if (scores.length != pieces.length) {
                throw new TokenizerException("tokenizer 'llama': " + KEY_SCORES + " has " + scores.length
                        + " entries for " + pieces.length + " tokens");
            }
        } else {
            scores = new float[pieces.length];
        }
        for (int b = 0; b < 256; b++) {
            int id = index.find(String.format("<0x%02X>", b));
            if (id < 0 && b < 0x80) {
                id = index.find(String.valueOf((char) b));   // llama.cpp's fallback: the byte as a one-char piece
            }
            byteTokens[b] = id;
        }
    }

    private static byte[] render(String piece, TokenType type) {
        switch (type) {
            case NORMAL:
                return piece.replace(SPACE, ' ').getBytes(StandardCharsets.UTF_8);
            case USER_DEFINED:
                return piece.getBytes(StandardCharsets.UTF_8);
            case BYTE:
                if (piece.length() == 6 && piece.startsWith("<0x") && piece.endsWith(">")) {
                    try {
                        return new byte[] {(byte) Integer.parseInt(piece.substring(3, 5), 16)};
                    } catch (NumberFormatException e) {
                        throw new TokenizerException("byte token '" + piece + "' is not of the form <0xNN>");
                    }
                }
                throw new TokenizerException("byte token '" + piece + "' is not of the form <0xNN>");
            default:
                return new byte[0];   // control, unknown, unused, undefined: nothing, like llama.cpp
        }
    }

    /** The token's score, used to pick merges (higher first). */
    public float score(int id) {
        checkId(id);
        return scores[id];
    }

    @Override
    void encodeText(String raw, int start, int end, boolean afterSpecial, IntArrayList out) {
        StringBuilder sb = new StringBuilder(end - start + 1);
        if (addSpacePrefix && afterSpecial) {
            sb.append(SPACE);
        }
        for (int i = start; i < end; i++) {
            char c = raw.charAt(i);
            sb.append(c == ' ' ? SPACE : c);
        }
        String text = sb.toString();

        // One symbol per code point: symStart/symLen in chars, linked by prev/next; symLen 0 = merged away.
        int nChars = text.length();
        int[] symStart = new int[nChars];
        int[] symLen = new int[nChars];
        int[] prev = new int[nChars];
        int[] next = new int[nChars];
        int n = 0;
        for (int i = 0; i < nChars; ) {
            int len = Character.charCount(text.codePointAt(i));
            symStart[n] = i;
            symLen[n] = len;
            prev[n] = n - 1;
            next[n] = i + len < nChars ? n + 1 : -1;
            n++;
            i += len;
        }

        BigramQueue queue = new BigramQueue();
        for (int i = 1; i < n; i++) {
            tryAdd(text, i - 1, i, symStart, symLen, queue);
        }
        while (!queue.isEmpty()) {
            int e = queue.pop();
            int l = queue.left(e);
            int r = queue.right(e);
            // Stale: one side was merged into something else since the pair was queued. A left symbol only
            // grows by absorbing its right neighbour, so unchanged lengths mean an unchanged pair.
            if (symLen[l] == 0 || symLen[r] == 0 || symLen[l] + symLen[r] != queue.size(e)) {
                continue;
            }
            symLen[l] += symLen[r];
            symLen[r] = 0;
            next[l] = next[r];
            if (next[r] >= 0) {
                prev[next[r]] = l;
            }
            tryAdd(text, prev[l], l, symStart, symLen, queue);
            tryAdd(text, l, next[l], symStart, symLen, queue);
        }

        for (int i = 0; i != -1 && n > 0; i = next[i]) {
            int id = index.find(text, symStart[i], symStart[i] + symLen[i]);
            if (id >= 0) {
                out.addInt(id);
                continue;
            }
            // Only single characters can get here: a merge happens only when its result is an entry.
            unknown(text.substring(symStart[i], symStart[i] + symLen[i]), out);
        }
    }

    /**
     * A character that is not a vocabulary entry: its UTF-8 bytes as byte tokens when the vocabulary has
     * them all (byte fallback), else one unknown token for the character, as SentencePiece does without byte
     * fallback (llama.cpp would fail there).
     */
    private void unknown(String ch, IntArrayList out) {
        byte[] bytes = utf8(ch);
        boolean all = true;
        for (byte b : bytes) {
            all &= byteTokens[b & 0xFF] >= 0;
        }
        if (all) {
            for (byte b : bytes) {
                out.addInt(byteTokens[b & 0xFF]);
            }
        } else if (unk >= 0) {
            out.addInt(unk);
        } else {
            throw new TokenizerException("cannot encode '" + ch + "': the vocabulary has neither byte tokens for it nor an unknown token");
        }
    }

    private void tryAdd(String text, int l, int r, int[] symStart, int[] symLen, BigramQueue queue) {
        if (l < 0 || r < 0) {
            return;
        }
        int size = symLen[l] + symLen[r];
        int id = index.find(text, symStart[l], symStart[l] + size);
        if (id >= 0) {
            queue.push(scores[id], l, r, size);
        }
    }

    /** UTF-8 bytes of a code point; a lone surrogate becomes U+FFFD's bytes (Java's encoder would write '?'). */
    static byte[] utf8(String s) {
        if (s.length() == 1 && Character.isSurrogate(s.charAt(0))) {
            return new byte[] {(byte) 0xEF, (byte) 0xBF, (byte) 0xBD};
        }
        return s.getBytes(StandardCharsets.UTF_8);
    }
}
