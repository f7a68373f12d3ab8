package io.tnsr.engine.chat;

import com.hubspot.jinjava.objects.SafeString;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/** Python's view of the values a template handles: type names, truth, equality, {@code str()} and {@code repr()}. */
final class PyTypes {
    private PyTypes() {
    }

    /** Python's name for the type of {@code v}: str, int, float, bool, NoneType, list, dict. */
    static String typeName(Object v) {
        if (v == null) {
            return "NoneType";
        }
        if (v instanceof String || v instanceof SafeString || v instanceof Character) {
            return "str";
        }
        if (v instanceof Boolean) {
            return "bool";
        }
        if (v instanceof Integer || v instanceof Long || v instanceof Short || v instanceof Byte || v instanceof BigInteger) {
            return "int";
        }
        if (v instanceof Number) {
            return "float";
        }
        if (v instanceof Map) {
            return "dict";
        }
        if (v instanceof Iterable || v.getClass().isArray()) {
            return "list";
        }
        return v.getClass().getSimpleName();
    }

    /** Whether {@code v} is a string to a template ({@code is string}). */
    static boolean isString(Object v) {
        return v instanceof String || v instanceof SafeString;
    }

    /** Python's truth of {@code v}: None, False, zero and empty strings, lists and dicts are false. */
    static boolean truthy(Object v) {
        if (v == null) {
            return false;
        }
        if (v instanceof Boolean b) {
            return b;
        }
        if (v instanceof Number n) {
            return n.doubleValue() != 0;
        }
        if (isString(v)) {
            return !v.toString().isEmpty();
        }
        if (v instanceof Collection<?> c) {
            return !c.isEmpty();
        }
        if (v instanceof Map<?, ?> m) {
            return !m.isEmpty();
        }
        return true;
    }

    /** Python's {@code a == b}: numbers by value (True == 1), strings by text, lists and dicts element by element. */
    static boolean equal(Object a, Object b) {
        if (a == null || b == null) {
            return a == b;
        }
        if ((a instanceof Number || a instanceof Boolean) && (b instanceof Number || b instanceof Boolean)) {
            return number(a) == number(b);
        }
        if (isString(a) && isString(b)) {
            return a.toString().equals(b.toString());
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            if (x.size() != y.size()) {
                return false;
            }
            Iterator<?> i = x.iterator();
            Iterator<?> j = y.iterator();
            while (i.hasNext()) {
                if (!equal(i.next(), j.next())) {
                    return false;
                }
            }
            return true;
        }
        if (a instanceof Map<?, ?> x && b instanceof Map<?, ?> y) {
            if (x.size() != y.size()) {
                return false;
            }
            for (Map.Entry<?, ?> e : x.entrySet()) {
                if (!y.containsKey(e.getKey()) || !equal(e.getValue(), y.get(e.getKey()))) {
                    return false;
                }
            }
            return true;
        }
        return Objects.equals(a, b);
    }

    private static double number(Object v) {
        return v instanceof Boolean b ? (b ? 1 : 0) : ((Number) v).doubleValue();
    }

    /** Python's {@code str(v)}, what {@code {{ v }}} prints: None is empty here (an undefined value looks the same). */
    static String str(Object v) {
        if (v == null) {
            return "";
        }
        if (isString(v)) {
            return v.toString();
        }
        return repr(v);
    }

    /** Python's {@code repr(v)} for the values templates build: str, int, float, bool, None, list, dict. */
    static String repr(Object v) {
        StringBuilder b = new StringBuilder();
        repr(b, v);
        return b.toString();
    }

    private static void repr(StringBuilder b, Object v) {
        if (v == null) {
            b.append("None");
        } else if (v instanceof Boolean bool) {
            b.append(bool ? "True" : "False");
        } else if (isString(v) || v instanceof Character) {
            reprString(b, v.toString());
        } else if (v instanceof Double || v instanceof Float) {
            b.append(floatRepr(((Number) v).doubleValue()));
        } else if (v instanceof Number) {
            b.append(v);
        } else if (v instanceof Map<?, ?> m) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(first ? "" : ", ");
                repr(b, e.getKey());
                b.append(": ");
                repr(b, e.getValue());
                first = false;
            }
            b.append('}');
        } else if (v instanceof Iterable<?> it) {
            b.append('[');
            boolean first = true;
            for (Object e : it) {
                b.append(first ? "" : ", ");
                repr(b, e);
                first = false;
            }
            b.append(']');
        } else {
            b.append(v);
        }
    }

    private static void reprString(StringBuilder b, String s) {
        char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        b.append(q);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == q || c == '\\') {
                b.append('\\').append(c);
            } else if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (c == '\t') {
                b.append("\\t");
            } else if (c < 0x20 || (c >= 0x7f && c <= 0xa0) || c == 0xad) {
                b.append(String.format("\\x%02x", (int) c));
            } else {
                b.append(c);
            }
        }
        b.append(q);
    }

    /** Python's {@code repr(float)}: the shortest digits that read back, {@code 1e+16} style from 1e16 and below 1e-4. */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) {
            return "nan";
        }
        if (Double.isInfinite(d)) {
            return d > 0 ? "inf" : "-inf";
        }
        if (d == 0) {
            return (1 / d < 0) ? "-0.0" : "0.0";
        }
        BigDecimal b = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        String digits = b.unscaledValue().toString();
        int exp = digits.length() - 1 - b.scale(); // decimal exponent of the first digit
        StringBuilder s = new StringBuilder(d < 0 ? "-" : "");
        if (exp < -4 || exp >= 16) {
            s.append(digits.charAt(0));
            if (digits.length() > 1) {
                s.append('.').append(digits, 1, digits.length());
            }
            s.append('e').append(exp < 0 ? '-' : '+');
            int a = Math.abs(exp);
            s.append(a < 10 ? "0" : "").append(a);
        } else if (exp < 0) {
            s.append("0.").append("0".repeat(-exp - 1)).append(digits);
        } else if (digits.length() <= exp + 1) {
            s.append(digits).append("0".repeat(exp + 1 - digits.length())).append(".0");
        } else {
            s.append(digits, 0, exp + 1).append('.').append(digits, exp + 1, digits.length());
        }
        return s.toString();
    }
}
