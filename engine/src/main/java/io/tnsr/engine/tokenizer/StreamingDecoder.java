package io.tnsr.engine.tokenizer;

/**
 * Turns token ids into text one token at a time, for printing while generating. Each call returns only
 * complete characters: the bytes of a UTF-8 sequence split across byte tokens (for example
 * {@code <0xE2><0x80><0x99>} for "’") are held back until the sequence is complete, so half a character
 * is never printed. A byte that cannot continue or start a sequence becomes U+FFFD at once (one U+FFFD per
 * maximal invalid subpart, Unicode's recommended practice; {@code new String(bytes, UTF_8)} keeps the same
 * valid characters but sometimes writes fewer U+FFFD); {@link #finish()} turns an incomplete tail into U+FFFD.
 *
 * <p>Leading space (SentencePiece vocabularies): the token right after BOS, and the first token of a decoder
 * made by {@link Tokenizer#newDecoder()}, lose the one leading space that encoding's dummy prefix put there,
 * as llama2.c's {@code decode} does after BOS. So feeding the prompt's tokens (BOS first) and then the
 * generated ones prints exactly what run.c prints.
 *
 * <p>Allocation: {@link #next(int, StringBuilder)} allocates nothing; {@link #next(int)} allocates only the
 * returned string, and returns the shared {@code ""} when a token completes no character. Not thread-safe.
 */
public final class StreamingDecoder {
    private static final char REPLACEMENT = '\uFFFD';

    private final BaseTokenizer tokenizer;
    private int previous;
    private final byte[] pending = new byte[4];
    private int pendingLen;
    private int needed;
    private final StringBuilder scratch = new StringBuilder(32);

    StreamingDecoder(BaseTokenizer tokenizer, int previousToken) {
        this.tokenizer = tokenizer;
        this.previous = previousToken;
    }

    /** Feeds one token; returns the text it completes ({@code ""} if none yet). */
    public String next(int id) {
        scratch.setLength(0);
        next(id, scratch);
        return scratch.length() == 0 ? "" : scratch.toString();
    }

    /** Feeds one token and appends the text it completes to {@code out}; returns the number of chars appended. */
    public int next(int id, StringBuilder out) {
        byte[] bytes = tokenizer.rendered(id);
        int from = 0;
        if (tokenizer.stripsLeadingSpace && (previous == -1 || previous == tokenizer.bos)
                && tokenizer.types[id] == TokenType.NORMAL && bytes.length > 0 && bytes[0] == ' ') {
            from = 1;
        }
        previous = id;
        int before = out.length();
        for (int i = from; i < bytes.length; i++) {
            push(bytes[i] & 0xFF, out);
        }
        return out.length() - before;
    }

    /** Ends the text: returns U+FFFD if an incomplete UTF-8 sequence was pending, else {@code ""}. The decoder can go on after. */
    public String finish() {
        scratch.setLength(0);
        finish(scratch);
        return scratch.length() == 0 ? "" : scratch.toString();
    }

    /** Like {@link #finish()}, appending to {@code out}; returns the number of chars appended (0 or 1). */
    public int finish(StringBuilder out) {
        if (pendingLen == 0) {
            return 0;
        }
        out.append(REPLACEMENT);
        pendingLen = 0;
        needed = 0;
        return 1;
    }

    /** Whether bytes of an incomplete character are held back. */
    public boolean hasPending() {
        return pendingLen > 0;
    }

    /** Drops any pending bytes and starts again as if just made by {@link Tokenizer#newDecoder(int)}. */
    public void reset(int previousToken) {
        if (previousToken != -1) {
            tokenizer.checkId(previousToken);
        }
        previous = previousToken;
        pendingLen = 0;
        needed = 0;
    }

    private void push(int b, StringBuilder out) {
        if (needed == 0) {
            if (b < 0x80) {
                out.append((char) b);
                return;
            }
            int more = b >= 0xC2 && b <= 0xDF ? 1 : b >= 0xE0 && b <= 0xEF ? 2 : b >= 0xF0 && b <= 0xF4 ? 3 : -1;
            if (more < 0) {
                out.append(REPLACEMENT);   // a continuation byte out of place, or a lead byte UTF-8 never uses
                return;
            }
            pending[0] = (byte) b;
            pendingLen = 1;
            needed = more;
            return;
        }
        int lo = 0x80;
        int hi = 0xBF;
        if (pendingLen == 1) {   // the second byte's range excludes overlongs, surrogates and > U+10FFFF
            switch (pending[0] & 0xFF) {
                case 0xE0: lo = 0xA0; break;
                case 0xED: hi = 0x9F; break;
                case 0xF0: lo = 0x90; break;
                case 0xF4: hi = 0x8F; break;
                default: break;
            }
        }
        if (b < lo || b > hi) {
            out.append(REPLACEMENT);
            pendingLen = 0;
            needed = 0;
            push(b, out);   // the offending byte starts afresh
            return;
        }
        pending[pendingLen++] = (byte) b;
        if (--needed > 0) {
            return;
        }
        int cp;
        switch (pendingLen) {
            case 2: cp = ((pending[0] & 0x1F) << 6) | (pending[1] & 0x3F); break;
            case 3: cp = ((pending[0] & 0x0F) << 12) | ((pending[1] & 0x3F) << 6) | (pending[2] & 0x3F); break;
            default: cp = ((pending[0] & 0x07) << 18) | ((pending[1] & 0x3F) << 12) | ((pending[2] & 0x3F) << 6) | (pending[3] & 0x3F); break;
        }
        pendingLen = 0;
        out.appendCodePoint(cp);
    }
}
