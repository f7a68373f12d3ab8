package io.tnsr.engine.chat;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Python's {@code json.dumps(obj, ensure_ascii, indent, separators, sort_keys)}, byte for byte: what Hugging
 * Face's {@code tojson} filter writes (it calls json.dumps with {@code ensure_ascii=False} by default, so
 * non-ASCII text stays as it is, and without jinja2's HTML escaping).
 *
 * <p>Separators default to {@code ", "} and {@code ": "}, or {@code ","} and {@code ": "} with an indent;
 * floats are written as Python's {@code repr}; dict keys that are numbers, booleans or None become strings.
 */
final class PyJson {
    private final boolean ensureAscii;
    private final String indent;
    private final String itemSeparator;
    private final String keySeparator;
    private final boolean sortKeys;

    /**
     * @param indent     null for one line, else the text of one level (Python: a number of spaces or a string)
     * @param separators null for the defaults, else {item separator, key separator}
     */
    PyJson(boolean ensureAscii, String indent, String[] separators, boolean sortKeys) {
        this.ensureAscii = ensureAscii;
        this.indent = indent;
        this.itemSeparator = separators != null ? separators[0] : indent != null ? "," : ", ";
        this.keySeparator = separators != null ? separators[1] : ": ";
        this.sortKeys = sortKeys;
    }

    String dumps(Object v) {
        StringBuilder b = new StringBuilder();
        write(b, v, 0);
        return b.toString();
    }

    private void write(StringBuilder b, Object v, int level) {
        if (v == null) {
            b.append("null");
        } else if (v instanceof Boolean bool) {
            b.append(bool ? "true" : "false");
        } else if (PyTypes.isString(v) || v instanceof Character) {
            string(b, v.toString());
        } else if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte || v instanceof BigInteger) {
            b.append(v);
        } else if (v instanceof Number n) {
            double d = n.doubleValue();
            b.append(Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyTypes.floatRepr(d));
        } else if (v instanceof Map<?, ?> m) {
            object(b, m, level);
        } else if (v instanceof Iterable<?> it) {
            array(b, it.iterator(), level);
        } else if (v instanceof Object[] a) {
            array(b, List.of(a).iterator(), level);
        } else {
            throw new IllegalArgumentException("Object of type " + PyTypes.typeName(v) + " is not JSON serializable");
        }
    }

    private void array(StringBuilder b, Iterator<?> it, int level) {
        if (!it.hasNext()) {
            b.append("[]");
            return;
        }
        b.append('[');
        boolean first = true;
        while (it.hasNext()) {
            Object e = it.next();
            if (!first) {
                b.append(itemSeparator);
            }
            newline(b, level + 1);
            write(b, e, level + 1);
            first = false;
        }
        newline(b, level);
        b.append(']');
    }

    private void object(StringBuilder b, Map<?, ?> m, int level) {
        if (m.isEmpty()) {
            b.append("{}");
            return;
        }
        List<Map.Entry<String, Object>> entries = new ArrayList<>(m.size());
        for (Map.Entry<?, ?> e : m.entrySet()) {
            entries.add(Map.entry(key(e.getKey()), e.getValue() == null ? NULL : e.getValue()));
        }
        if (sortKeys) {
            entries.sort(Map.Entry.comparingByKey(PyJson::compareCodePoints));
        }
        b.append('{');
        boolean first = true;
        for (Map.Entry<String, Object> e : entries) {
            if (!first) {
                b.append(itemSeparator);
            }
            newline(b, level + 1);
            string(b, e.getKey());
            b.append(keySeparator);
            write(b, e.getValue() == NULL ? null : e.getValue(), level + 1);
            first = false;
        }
        newline(b, level);
        b.append('}');
    }

    /** Map.entry refuses null values; this stands for None among them. */
    private static final Object NULL = new Object();

    private static String key(Object k) {
        if (k == null) {
            return "null";
        }
        if (k instanceof Boolean bool) {
            return bool ? "true" : "false";
        }
        if (PyTypes.isString(k) || k instanceof Integer || k instanceof Long || k instanceof BigInteger) {
            return k.toString();
        }
        if (k instanceof Number n) {
            double d = n.doubleValue();
            return Double.isNaN(d) ? "NaN" : Double.isInfinite(d) ? (d > 0 ? "Infinity" : "-Infinity") : PyTypes.floatRepr(d);
        }
        throw new IllegalArgumentException("keys must be str, int, float, bool or None, not " + PyTypes.typeName(k));
    }

    /** Python sorts str keys by code point. */
    private static int compareCodePoints(String a, String b) {
        return java.util.Arrays.compare(a.codePoints().toArray(), b.codePoints().toArray());
    }

    private void newline(StringBuilder b, int level) {
        if (indent != null) {
            b.append('\n').append(indent.repeat(level));
        }
    }

    private void string(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                case '\b' -> b.append("\\b");
                case '\f' -> b.append("\\f");
                default -> {
                    if (c < 0x20 || (ensureAscii && c > 0x7e)) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        b.append('"');
    }
}
