package io.tnsr.engine.chat;

/**
 * Rewrites a template's text the way Python jinja2's lexer reads it under Hugging Face's settings, so that
 * Jinjava, given the result, sees exactly the text jinja2 would output between the tags.
 *
 * <p>jinja2 (with {@code trim_blocks=True}, {@code lstrip_blocks=True}, {@code keep_trailing_newline=False}):
 * <ul>
 *   <li>turns every {@code \r\n} and {@code \r} into {@code \n}, and drops one newline at the very end;</li>
 *   <li>{@code {%-}, {@code {{-}, {@code {#-} remove all whitespace before the tag, and {@code -%}},
 *       {@code -}}}, {@code -#}} all whitespace after it;</li>
 *   <li>trim_blocks: the first newline after a block tag or comment ({@code %}}, {@code #}}) is removed,
 *       unless the tag ends in {@code +%}};</li>
 *   <li>lstrip_blocks: spaces and tabs between the start of a line and a block tag or comment (not a
 *       {@code {{ }}} expression) are removed, unless the tag starts with {@code {%+};</li>
 *   <li>a tag ends at its first end marker outside string literals and outside brackets;
 *       {@code {% raw %}...{% endraw %}} is kept literally.</li>
 * </ul>
 * Jinjava's own trim_blocks and lstrip_blocks differ from these in corner cases (a tag after a tag on the same
 * line, whitespace control next to them, comments), so the output here has every whitespace rule already
 * applied: tags keep their text without the {@code -}/{@code +} markers, comments are gone, and Jinjava is run
 * without trimming. String literals in tags are decoded as Python decodes them and written in the few escapes
 * Jinjava reads. A data {@code {} that would join the next tag into a new tag start is written as an expression.
 * Newlines that the rules remove are written back as empty Jinjava comments, so each line of the result is the
 * template's line of the same number and Jinjava's errors name the template's lines.
 */
final class Jinja2Source {
    private final String src;
    private final StringBuilder out;
    private int pos;
    /** jinja2's {@code line_starting}: the last thing consumed ended with a newline (or nothing was consumed). */
    private boolean lineStarting = true;
    /** Newlines of the template removed since the last output, still to be written as a comment. */
    private int removedNewlines;

    private Jinja2Source(String src) {
        this.src = src;
        this.out = new StringBuilder(src.length() + 16);
    }

    /**
     * The template text for Jinjava.
     *
     * @throws ChatTemplateException naming the line when a tag, comment or raw block is not closed
     */
    static String prepare(String template) {
        Jinja2Source s = new Jinja2Source(normalizeNewlines(template));
        s.run();
        return s.out.toString();
    }

    /** Newlines as jinja2 reads them: {@code \r\n}, {@code \r} become {@code \n}; one trailing newline is dropped. */
    static String normalizeNewlines(String t) {
        String n = t.indexOf('\r') < 0 ? t : t.replace("\r\n", "\n").replace('\r', '\n');
        return n.endsWith("\n") ? n.substring(0, n.length() - 1) : n;
    }

    private void run() {
        while (pos < src.length()) {
            int start = nextTagStart(pos);
            if (start < 0) {
                data(src.substring(pos));
                return;
            }
            String text = src.substring(pos, start);
            char kind = src.charAt(start + 1);
            int afterMarker = start + 2;
            char sign = afterMarker < src.length() && (src.charAt(afterMarker) == '-' || src.charAt(afterMarker) == '+')
                    ? src.charAt(afterMarker) : 0;
            int rawEnd = kind == '%' ? rawBeginEnd(start) : -1;
            String kept = stripBefore(text, sign, kind != '{');
            removed(text, kept.length(), text.length());
            data(kept);
            int bodyStart = afterMarker + (sign != 0 ? 1 : 0);
            if (rawEnd >= 0) {
                raw(start, rawEnd);
            } else if (kind == '#') {
                comment(start, bodyStart);
            } else {
                tag(start, kind, bodyStart);
            }
        }
    }

    /** The earliest {@code {%}, {@code {{} or {@code {#} at or after {@code from}, or -1. */
    private int nextTagStart(int from) {
        for (int i = src.indexOf('{', from); i >= 0 && i + 1 < src.length(); i = src.indexOf('{', i + 1)) {
            char c = src.charAt(i + 1);
            if (c == '%' || c == '{' || c == '#') {
                return i;
            }
        }
        return -1;
    }

    /** The text before a tag after its whitespace control and lstrip_blocks. */
    private String stripBefore(String text, char sign, boolean lstripApplies) {
        if (sign == '-') {
            return rstrip(text);
        }
        if (sign != '+' && lstripApplies) {
            int lineStart = text.lastIndexOf('\n') + 1;
            if ((lineStart > 0 || lineStarting) && lineStart < text.length() && isAllWhitespace(text, lineStart)) {
                return text.substring(0, lineStart);
            }
        }
        return text;
    }

    /** Notes the newlines of {@code s[from, to)}, template text that is not output. */
    private void removed(String s, int from, int to) {
        for (int i = from; i < to; i++) {
            if (s.charAt(i) == '\n') {
                removedNewlines++;
            }
        }
    }

    /** Before any output: the newlines removed since the last, as a comment that renders nothing. */
    private void keepLines() {
        if (removedNewlines > 0) {
            out.append("{#").append("\n".repeat(removedNewlines)).append("#}");
            removedNewlines = 0;
        }
    }

    /** Emits template data; a trailing '{' is written as an expression so it cannot form a tag with what follows. */
    private void data(String text) {
        if (text.isEmpty()) {
            return;
        }
        keepLines();
        if (text.endsWith("{")) {
            out.append(text, 0, text.length() - 1).append("{{ '{' }}");
        } else {
            out.append(text);
        }
    }

    /** {@code {#...#}}: dropped, with its whitespace control and trim_blocks. */
    private void comment(int start, int bodyStart) {
        int end = src.indexOf("#}", bodyStart);
        if (end < 0) {
            throw syntaxError(start, "missing end of comment tag");
        }
        removed(src, start, end);
        char sign = end > bodyStart ? src.charAt(end - 1) : 0;
        finishTag(end + 2, sign == '+' || sign == '-' ? sign : 0, true);
    }

    /**
     * {@code {%...%}} or {@code {{...}}}: copied without its whitespace markers (a body starting or ending with
     * '-' or '+' gets a space there, so that it is not read as one), with string literals rewritten by
     * {@link #jinjavaLiteral} and a space between two braces outside strings (Jinjava ends a tag at the first
     * {@code }}}, which in jinja2 may close two dict literals).
     */
    private void tag(int start, char kind, int bodyStart) {
        boolean block = kind == '%';
        char close = block ? '%' : '}';
        StringBuilder body = new StringBuilder();
        int depth = 0;
        int i = bodyStart;
        while (true) {
            if (i >= src.length()) {
                throw syntaxError(start, "unexpected end of template: " + (block ? "'%}'" : "'}}'") + " missing");
            }
            char c = src.charAt(i);
            if (depth == 0) {
                char sign = c == '-' || (c == '+' && block) ? c : 0;
                int m = sign != 0 ? i + 1 : i;
                if (m + 1 < src.length() && src.charAt(m) == close && src.charAt(m + 1) == '}') {
                    if (body.toString().isBlank()) {
                        throw syntaxError(start, block ? "tag name expected" : "expected an expression");
                    }
                    char first = body.charAt(0);
                    char last = body.charAt(body.length() - 1);
                    keepLines();
                    out.append(block ? "{%" : "{{").append(first == '-' || first == '+' ? " " : "").append(body)
                            .append(last == '-' || last == '+' ? " " : "").append(block ? "%}" : "}}");
                    finishTag(m + 2, sign, block);
                    return;
                }
            }
            if (c == '\'' || c == '"') {
                int end = skipString(start, i);
                body.append(jinjavaLiteral(src.substring(i + 1, end - 1), c));
                i = end;
                continue;
            }
            if ((c == '{' || c == '}') && body.length() > 0 && body.charAt(body.length() - 1) == c) {
                body.append(' ');
            }
            if (c == '(' || c == '[' || c == '{') {
                depth++;
            } else if ((c == ')' || c == ']' || c == '}') && depth > 0) {
                depth--;
            }
            body.append(c);
            i++;
        }
    }

    /** {@code {% raw %}...{% endraw %}} (begin tag ends at {@code beginEnd}): the body is kept literally. */
    private void raw(int start, int beginEnd) {
        keepLines();
        boolean stripAfterBegin = src.charAt(beginEnd - 3) == '-';
        int p = beginEnd;
        if (stripAfterBegin) {
            p = skipWhitespace(p);
            removed(src, beginEnd, p);
        }
        // The begin tag ends the line only if it consumed a newline (it never trims one itself).
        lineStarting = p > 0 && src.charAt(p - 1) == '\n';
        for (int i = src.indexOf("{%", p); i >= 0; i = src.indexOf("{%", i + 1)) {
            int j = i + 2;
            char sign = j < src.length() && (src.charAt(j) == '-' || src.charAt(j) == '+') ? src.charAt(j) : 0;
            if (sign != 0) {
                j++;
            }
            j = skipWhitespace(j);
            if (!src.startsWith("endraw", j)) {
                continue;
            }
            j = skipWhitespace(j + 6);
            char endSign = j < src.length() && (src.charAt(j) == '-' || src.charAt(j) == '+') ? src.charAt(j) : 0;
            int k = endSign != 0 ? j + 1 : j;
            if (!src.startsWith("%}", k)) {
                continue;
            }
            String text = src.substring(p, i);
            String body = stripBefore(text, sign, true);
            removed(text, body.length(), text.length()); // written after the block, which must stay literal
            out.append("{% raw %}").append(body).append("{% endraw %}");
            finishTag(k + 2, endSign, true);
            return;
        }
        throw syntaxError(start, "missing end of raw directive");
    }

    /** Where {@code {% raw %}} starting at {@code start} ends (after {@code %}} and any whitespace it strips), or -1. */
    private int rawBeginEnd(int start) {
        int j = start + 2;
        if (j < src.length() && (src.charAt(j) == '-' || src.charAt(j) == '+')) {
            j++;
        }
        j = skipWhitespace(j);
        if (!src.startsWith("raw", j)) {
            return -1;
        }
        j = skipWhitespace(j + 3);
        if (src.startsWith("-%}", j)) {
            return j + 3;
        }
        return src.startsWith("%}", j) ? j + 2 : -1;
    }

    /** After a tag's end marker at {@code end}: its whitespace control, then trim_blocks for blocks and comments. */
    private void finishTag(int end, char sign, boolean trimsNewline) {
        int p = end;
        if (sign == '-') {
            p = skipWhitespace(p);
        } else if (sign != '+' && trimsNewline && p < src.length() && src.charAt(p) == '\n') {
            p++;
        }
        removed(src, end, p);
        lineStarting = p > 0 && src.charAt(p - 1) == '\n';
        pos = p;
    }

    /** The index after the string literal opening at {@code i} (backslash escapes as in jinja2's lexer). */
    private int skipString(int tagStart, int i) {
        char q = src.charAt(i);
        for (int j = i + 1; j < src.length(); j++) {
            char c = src.charAt(j);
            if (c == '\\') {
                j++;
            } else if (c == q) {
                return j + 1;
            }
        }
        throw syntaxError(tagStart, "unterminated string literal");
    }

    /**
     * A jinja2 string literal's text as a Jinjava literal of the same value, in {@code quote}s. The value is
     * Python's {@code unicode-escape} decoding, which jinja2 applies after turning non-ASCII characters into
     * backslash escapes: {@code \n}, {@code \t}, {@code \xhh}, {@code \\u} and four hex digits, {@code \N{name}},
     * octal; an unknown escape keeps its backslash. Jinjava reads only a few escapes, so the value is written
     * with backslashes, the quote and control characters escaped and everything else as it is; a newline
     * written as such in the template stays one, so lines keep their numbers.
     */
    static String jinjavaLiteral(String raw, char quote) {
        StringBuilder r = new StringBuilder(raw.length() + 2).append(quote);
        for (int i = 0; i < raw.length(); i++) {
            char c = raw.charAt(i);
            if (c == '\n') {
                r.append(c);
                continue;
            }
            if (c != '\\' || i + 1 >= raw.length()) {
                appendEscaped(r, c, quote);
                continue;
            }
            char e = raw.charAt(++i);
            switch (e) {
                case '\n' -> { } // a backslash-newline continues the line
                case '\\', '\'', '"' -> appendEscaped(r, e, quote);
                case 'a' -> r.append('\u0007');
                case 'b' -> r.append("\\b");
                case 'f' -> r.append("\\f");
                case 'n' -> r.append("\\n");
                case 'r' -> r.append("\\r");
                case 't' -> r.append("\\t");
                case 'v' -> r.append('\u000b');
                case 'x', 'u', 'U' -> {
                    int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    int cp = hex(raw, i + 1, len);
                    if (cp < 0 || cp > Character.MAX_CODE_POINT) {
                        throw new ChatTemplateException("chat template syntax error: bad \\" + e + " escape in a string literal");
                    }
                    appendEscaped(r, cp, quote);
                    i += len;
                }
                case 'N' -> {
                    int close = raw.indexOf('}', i);
                    if (i + 1 >= raw.length() || raw.charAt(i + 1) != '{' || close < 0) {
                        throw new ChatTemplateException("chat template syntax error: bad \\N escape in a string literal");
                    }
                    try {
                        appendEscaped(r, Character.codePointOf(raw.substring(i + 2, close)), quote);
                    } catch (IllegalArgumentException ex) {
                        throw new ChatTemplateException("chat template syntax error: unknown character name in \\N{"
                                + raw.substring(i + 2, close) + "}");
                    }
                    i = close;
                }
                default -> {
                    if (e >= '0' && e <= '7') {
                        int v = 0;
                        int k = i;
                        while (k < raw.length() && k < i + 3 && raw.charAt(k) >= '0' && raw.charAt(k) <= '7') {
                            v = v * 8 + (raw.charAt(k) - '0');
                            k++;
                        }
                        appendEscaped(r, v, quote);
                        i = k - 1;
                    } else if (e >= 0x80) {
                        // jinja2 first writes e as \xhh, \\uhhhh or \Uhhhhhhhh: this backslash escapes that one
                        int cp = raw.codePointAt(i);
                        appendEscaped(r, '\\', quote);
                        r.append(cp <= 0xFF ? String.format("x%02x", cp)
                                : cp <= 0xFFFF ? String.format("u%04x", cp) : String.format("U%08x", cp));
                        i += Character.charCount(cp) - 1;
                    } else {
                        appendEscaped(r, '\\', quote);
                        appendEscaped(r, e, quote);
                    }
                }
            }
        }
        return r.append(quote).toString();
    }

    /** One character of a literal's value, escaped as Jinjava needs. */
    private static void appendEscaped(StringBuilder r, int cp, char quote) {
        switch (cp) {
            case '\\' -> r.append("\\\\");
            case '\n' -> r.append("\\n");
            case '\r' -> r.append("\\r");
            case '\t' -> r.append("\\t");
            case '\b' -> r.append("\\b");
            case '\f' -> r.append("\\f");
            default -> {
                if (cp == quote) {
                    r.append('\\');
                }
                r.appendCodePoint(cp);
            }
        }
    }

    private static int hex(String s, int from, int len) {
        if (from + len > s.length()) {
            return -1;
        }
        int v = 0;
        for (int k = from; k < from + len; k++) {
            int d = Character.digit(s.charAt(k), 16);
            if (d < 0) {
                return -1;
            }
            v = v * 16 + d;
        }
        return v;
    }

    private int skipWhitespace(int p) {
        while (p < src.length() && isPythonWhitespace(src.charAt(p))) {
            p++;
        }
        return p;
    }

    private ChatTemplateException syntaxError(int at, String what) {
        int line = 1;
        for (int i = 0; i < at && i < src.length(); i++) {
            if (src.charAt(i) == '\n') {
                line++;
            }
        }
        return new ChatTemplateException("chat template syntax error at line " + line + ": " + what);
    }

    private static boolean isAllWhitespace(String s, int from) {
        for (int i = from; i < s.length(); i++) {
            if (!isPythonWhitespace(s.charAt(i))) {
                return false;
            }
        }
        return true;
    }

    /** Python's {@code str.rstrip()}. */
    static String rstrip(String s) {
        int e = s.length();
        while (e > 0 && isPythonWhitespace(s.charAt(e - 1))) {
            e--;
        }
        return s.substring(0, e);
    }

    /** Python's {@code str.isspace()} for one character (also what {@code \s} matches in a str regex). */
    static boolean isPythonWhitespace(char c) {
        switch (c) {
            case ' ', '\t', '\n', '\r', '\u000b', '\u000c', '\u001c', '\u001d', '\u001e', '\u001f', '\u0085', '\u00a0',
                    '\u1680', '\u2028', '\u2029', '\u202f', '\u205f', '\u3000':
                return true;
            default:
                return c >= '\u2000' && c <= '\u200a';
        }
    }
}
