package io.tnsr.engine.chat;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * Python's {@code str} methods on Java strings, with Python's meaning of whitespace, case and indexes (code
 * points, not UTF-16 units), for the methods chat templates call ({@code content.strip()},
 * {@code system_message.replace("/think", "")}, {@code text.split("\n")}, ...).
 */
final class PyStr {
    private PyStr() {
    }

    /** {@code s.strip(chars)}; {@code chars} null means whitespace. */
    static String strip(String s, String chars) {
        return rstrip(lstrip(s, chars), chars);
    }

    static String lstrip(String s, String chars) {
        int i = 0;
        while (i < s.length()) {
            int cp = s.codePointAt(i);
            if (!stripped(cp, chars)) {
                break;
            }
            i += Character.charCount(cp);
        }
        return s.substring(i);
    }

    static String rstrip(String s, String chars) {
        int e = s.length();
        while (e > 0) {
            int cp = s.codePointBefore(e);
            if (!stripped(cp, chars)) {
                break;
            }
            e -= Character.charCount(cp);
        }
        return s.substring(0, e);
    }

    private static boolean stripped(int cp, String chars) {
        return chars == null ? isSpace(cp) : chars.indexOf(Character.toString(cp)) >= 0;
    }

    /** Python's {@code str.isspace()} for one code point. */
    static boolean isSpace(int cp) {
        return cp <= 0xFFFF && Jinja2Source.isPythonWhitespace((char) cp);
    }

    /** {@code s.split(sep, maxsplit)}: {@code sep} null splits on runs of whitespace and drops empty ends. */
    static List<String> split(String s, String sep, int maxsplit) {
        List<String> r = new ArrayList<>();
        if (sep == null) {
            int i = 0;
            int n = s.length();
            while (true) {
                while (i < n && isSpace(s.charAt(i))) {
                    i++;
                }
                if (i >= n) {
                    return r;
                }
                if (maxsplit >= 0 && r.size() == maxsplit) {
                    r.add(rstrip(s.substring(i), null));
                    return r;
                }
                int j = i;
                while (j < n && !isSpace(s.charAt(j))) {
                    j++;
                }
                r.add(s.substring(i, j));
                i = j;
            }
        }
        requireNonEmptySeparator(sep);
        int from = 0;
        while (maxsplit < 0 || r.size() < maxsplit) {
            int k = s.indexOf(sep, from);
            if (k < 0) {
                break;
            }
            r.add(s.substring(from, k));
            from = k + sep.length();
        }
        r.add(s.substring(from));
        return r;
    }

    /** {@code s.rsplit(sep, maxsplit)}. */
    static List<String> rsplit(String s, String sep, int maxsplit) {
        if (maxsplit < 0) {
            return split(s, sep, -1);
        }
        List<String> r = new ArrayList<>();
        if (sep == null) {
            int j = s.length();
            while (true) {
                while (j > 0 && isSpace(s.charAt(j - 1))) {
                    j--;
                }
                if (j <= 0) {
                    break;
                }
                if (r.size() == maxsplit) {
                    r.add(lstrip(s.substring(0, j), null));
                    break;
                }
                int i = j;
                while (i > 0 && !isSpace(s.charAt(i - 1))) {
                    i--;
                }
                r.add(s.substring(i, j));
                j = i;
            }
        } else {
            requireNonEmptySeparator(sep);
            int end = s.length();
            while (r.size() < maxsplit) {
                int k = s.lastIndexOf(sep, end - sep.length());
                if (k < 0 || end - sep.length() < 0) {
                    break;
                }
                r.add(s.substring(k + sep.length(), end));
                end = k;
            }
            r.add(s.substring(0, end));
        }
        java.util.Collections.reverse(r);
        return r;
    }

    private static void requireNonEmptySeparator(String sep) {
        if (sep.isEmpty()) {
            throw new IllegalArgumentException("empty separator");
        }
    }

    /** {@code s.splitlines(keepends)}: every Python line boundary. */
    static List<String> splitlines(String s, boolean keepends) {
        List<String> r = new ArrayList<>();
        int i = 0;
        int start = 0;
        int n = s.length();
        while (i < n) {
            char c = s.charAt(i);
            int eol = -1;
            if (c == '\r' && i + 1 < n && s.charAt(i + 1) == '\n') {
                eol = i + 2;
            } else if (c == '\n' || c == '\r' || c == '\u000b' || c == '\u000c' || c == '\u001c' || c == '\u001d'
                    || c == '\u001e' || c == '\u0085' || c == '\u2028' || c == '\u2029') {
                eol = i + 1;
            }
            if (eol < 0) {
                i++;
                continue;
            }
            r.add(s.substring(start, keepends ? eol : i));
            start = eol;
            i = eol;
        }
        if (start < n) {
            r.add(s.substring(start));
        }
        return r;
    }

    /** {@code s.replace(old, new, count)}; count below 0 replaces all (an empty {@code old} inserts between characters). */
    static String replace(String s, String old, String rep, int count) {
        if (count < 0) {
            if (old.isEmpty()) {
                StringBuilder b = new StringBuilder(rep);
                s.codePoints().forEach(cp -> b.appendCodePoint(cp).append(rep));
                return b.toString();
            }
            return s.replace(old, rep);
        }
        StringBuilder b = new StringBuilder();
        int from = 0;
        int done = 0;
        if (old.isEmpty()) {
            int i = 0;
            while (done < count && i <= s.length()) {
                b.append(rep);
                done++;
                if (i < s.length()) {
                    int cp = s.codePointAt(i);
                    b.appendCodePoint(cp);
                    i += Character.charCount(cp);
                } else {
                    i++;
                }
            }
            return i <= s.length() ? b.append(s, i, s.length()).toString() : b.toString();
        }
        while (done < count) {
            int k = s.indexOf(old, from);
            if (k < 0) {
                break;
            }
            b.append(s, from, k).append(rep);
            from = k + old.length();
            done++;
        }
        return b.append(s, from, s.length()).toString();
    }

    static String upper(String s) {
        return s.toUpperCase(Locale.ROOT);
    }

    static String lower(String s) {
        return s.toLowerCase(Locale.ROOT);
    }

    /** {@code s.title()}: a letter after a non-letter is upper case, every other letter lower case. */
    static String title(String s) {
        StringBuilder b = new StringBuilder(s.length());
        boolean prevCased = false;
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            i += Character.charCount(cp);
            if (Character.isLetter(cp)) {
                b.append(prevCased ? Character.toString(cp).toLowerCase(Locale.ROOT) : titleCase(cp));
                prevCased = true;
            } else {
                b.appendCodePoint(cp);
                prevCased = false;
            }
        }
        return b.toString();
    }

    private static String titleCase(int cp) {
        int t = Character.toTitleCase(cp);
        return t != cp ? Character.toString(t) : Character.toString(cp).toUpperCase(Locale.ROOT);
    }

    /** {@code s.capitalize()}: the first character title-cased (as Python 3.8+), the rest lower case. */
    static String capitalize(String s) {
        if (s.isEmpty()) {
            return s;
        }
        int cp = s.codePointAt(0);
        return titleCase(cp) + s.substring(Character.charCount(cp)).toLowerCase(Locale.ROOT);
    }

    static String swapcase(String s) {
        StringBuilder b = new StringBuilder(s.length());
        s.codePoints().forEach(cp -> {
            String c = Character.toString(cp);
            b.append(Character.isUpperCase(cp) ? c.toLowerCase(Locale.ROOT)
                    : Character.isLowerCase(cp) ? c.toUpperCase(Locale.ROOT) : c);
        });
        return b.toString();
    }

    /** Number of code points: Python's {@code len(s)}. */
    static int length(String s) {
        return s.codePointCount(0, s.length());
    }

    /** The UTF-16 offset of code point index {@code cp} (clamped to the string). */
    static int offset(String s, int cp) {
        int n = length(s);
        if (cp <= 0) {
            return 0;
        }
        return cp >= n ? s.length() : s.offsetByCodePoints(0, cp);
    }

    /** A code point index as Python normalizes a slice bound: negative counts from the end, then clamped. */
    static int sliceIndex(Object v, int len, int dflt) {
        if (v == null) {
            return dflt;
        }
        long i = toLong(v);
        if (i < 0) {
            i += len;
        }
        return (int) Math.max(0, Math.min(len, i));
    }

    /** {@code s[i]}, by code point. */
    static String charAt(String s, long i) {
        int n = length(s);
        long k = i < 0 ? i + n : i;
        if (k < 0 || k >= n) {
            throw new IndexOutOfBoundsException("string index out of range");
        }
        int off = s.offsetByCodePoints(0, (int) k);
        return Character.toString(s.codePointAt(off));
    }

    /** {@code s.find(sub, start, end)}, by code point; -1 when absent. */
    static int find(String s, String sub, Object start, Object end, boolean last) {
        int n = length(s);
        int a = sliceIndex(start, n, 0);
        int b = sliceIndex(end, n, n);
        if (b - a < length(sub)) {
            return sub.isEmpty() && a <= b ? (last ? b : a) : -1;
        }
        String region = s.substring(offset(s, a), offset(s, b));
        int k = last ? region.lastIndexOf(sub) : region.indexOf(sub);
        return k < 0 ? -1 : a + region.codePointCount(0, k);
    }

    /** {@code s.count(sub)}: non-overlapping occurrences. */
    static int count(String s, String sub) {
        if (sub.isEmpty()) {
            return length(s) + 1;
        }
        int c = 0;
        for (int k = s.indexOf(sub); k >= 0; k = s.indexOf(sub, k + sub.length())) {
            c++;
        }
        return c;
    }

    /** A {@code long} from an integer-valued number (Python would reject a float index). */
    static long toLong(Object v) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        }
        if (v instanceof Boolean b) {
            return b ? 1 : 0;
        }
        throw new IllegalArgumentException("an integer is required, not " + PyTypes.typeName(v));
    }
}
