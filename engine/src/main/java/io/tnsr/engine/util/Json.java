package io.tnsr.engine.util;

import java.util.Iterator;
import java.util.Map;

/**
 * A tiny JSON writer for the command-line tools' machine-readable output: string escaping plus values built
 * from maps, lists, arrays, numbers, booleans and null. Output is one line, with {@code ", "} and {@code ": "}
 * separators, e.g. {@code {"text": "Hi", "ids": [1, 2]}}.
 *
 * <pre>{@code
 * Map<String, Object> row = new LinkedHashMap<>();   // keeps key order
 * row.put("text", text);
 * row.put("ids", ids);                               // int[] works as is
 * out.println(Json.write(row));
 * }</pre>
 *
 * Strings: {@code "} and {@code \} are escaped, control characters below U+0020 become {@code \n},
 * {@code \t}... or {@code \}{@code u00XX}, U+2028/U+2029 and unpaired surrogates become {@code \}{@code uXXXX}
 * (so the output is valid UTF-8 and safe to embed in JavaScript); everything else is written as is.
 */
public final class Json {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private Json() {
    }

    /** {@code s} as a JSON string literal, quotes included. */
    public static String quote(CharSequence s) {
        return appendString(new StringBuilder(s.length() + 2), s).toString();
    }

    /** Appends {@code s} as a JSON string literal, quotes included. */
    public static StringBuilder appendString(StringBuilder sb, CharSequence s) {
        sb.append('"');
        int n = s.length();
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if (c < 0x20 || c == '\u2028' || c == '\u2029') {
                        unicodeEscape(sb, c);
                    } else if (Character.isHighSurrogate(c) && i + 1 < n && Character.isLowSurrogate(s.charAt(i + 1))) {
                        sb.append(c).append(s.charAt(++i));
                    } else if (Character.isSurrogate(c)) {
                        unicodeEscape(sb, c);   // unpaired: cannot be written as UTF-8
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"');
    }

    private static void unicodeEscape(StringBuilder sb, char c) {
        sb.append("\\u").append(HEX[c >> 12]).append(HEX[(c >> 8) & 15]).append(HEX[(c >> 4) & 15]).append(HEX[c & 15]);
    }

    /** Appends {@code [1, 2, 3]}. */
    public static StringBuilder appendArray(StringBuilder sb, int[] values) {
        sb.append('[');
        for (int i = 0; i < values.length; i++) {
            if (i > 0) {
                sb.append(", ");
            }
            sb.append(values[i]);
        }
        return sb.append(']');
    }

    /** {@code value} as JSON text; see {@link #appendValue}. */
    public static String write(Object value) {
        return appendValue(new StringBuilder(), value).toString();
    }

    /**
     * Appends {@code value} as JSON: {@code null}, {@link Boolean}, {@link Number} (finite only),
     * {@link CharSequence}, {@link Character}, {@link Enum} (its name), {@link Map} (keys by {@code toString},
     * in the map's order), {@link Iterable}, {@code Object[]}, {@code int[]}, {@code long[]},
     * {@code float[]}, {@code double[]}, {@code boolean[]}.
     *
     * @throws IllegalArgumentException for a NaN or infinite number, or a value of another type
     */
    public static StringBuilder appendValue(StringBuilder sb, Object value) {
        if (value == null) {
            return sb.append("null");
        }
        if (value instanceof Boolean b) {
            return sb.append(b.booleanValue());
        }
        if (value instanceof Double || value instanceof Float) {
            double d = ((Number) value).doubleValue();
            checkFinite(d);
            return value instanceof Float ? sb.append(((Float) value).floatValue()) : sb.append(d);
        }
        if (value instanceof Number n) {
            return sb.append(n);   // Integer, Long, Short, Byte, BigInteger, BigDecimal: toString is valid JSON
        }
        if (value instanceof CharSequence s) {
            return appendString(sb, s);
        }
        if (value instanceof Character c) {
            return appendString(sb, String.valueOf(c));
        }
        if (value instanceof Enum<?> e) {
            return appendString(sb, e.name());
        }
        if (value instanceof int[] a) {
            return appendArray(sb, a);
        }
        if (value instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                appendString(sb, String.valueOf(e.getKey())).append(": ");
                appendValue(sb, e.getValue());
            }
            return sb.append('}');
        }
        if (value instanceof Iterable<?> it) {
            return appendIterator(sb, it.iterator());
        }
        if (value instanceof Object[] a) {
            return appendIterator(sb, java.util.Arrays.asList(a).iterator());
        }
        if (value instanceof long[] a) {
            return appendIterator(sb, java.util.Arrays.stream(a).boxed().iterator());
        }
        if (value instanceof double[] a) {
            return appendIterator(sb, java.util.Arrays.stream(a).boxed().iterator());
        }
        if (value instanceof float[] a) {
            sb.append('[');
            for (int i = 0; i < a.length; i++) {
                if (i > 0) {
                    sb.append(", ");
                }
                appendValue(sb, a[i]);
            }
            return sb.append(']');
        }
        if (value instanceof boolean[] a) {
            sb.append('[');
            for (int i = 0; i < a.length; i++) {
                sb.append(i > 0 ? ", " : "").append(a[i]);
            }
            return sb.append(']');
        }
        throw new IllegalArgumentException("cannot write a " + value.getClass().getName() + " as JSON");
    }

    private static StringBuilder appendIterator(StringBuilder sb, Iterator<?> it) {
        sb.append('[');
        boolean first = true;
        while (it.hasNext()) {
            if (!first) {
                sb.append(", ");
            }
            first = false;
            appendValue(sb, it.next());
        }
        return sb.append(']');
    }

    private static void checkFinite(double d) {
        if (Double.isNaN(d) || Double.isInfinite(d)) {
            throw new IllegalArgumentException("JSON has no representation for " + d);
        }
    }
}
