package io.tnsr.engine.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.objects.PyWrapper;
import java.util.AbstractList;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The filters whose Jinjava versions differ from jinja2's in what chat templates see, written as jinja2 (and
 * Hugging Face, for {@code tojson}) define them:
 * <ul>
 *   <li>{@code tojson}: Hugging Face's, {@code json.dumps(x, ensure_ascii=False, indent=None, separators=None,
 *       sort_keys=False)} (jinja2's own escapes HTML characters; Jinjava's writes Java's JSON);</li>
 *   <li>{@code trim}: Python's {@code str.strip(chars)} (Java's trim treats control characters as space and
 *       not Unicode spaces);</li>
 *   <li>{@code length}, {@code count}: strings count code points;</li>
 *   <li>{@code items}: a mapping's (key, value) pairs (jinja2 3.1; not in Jinjava);</li>
 *   <li>{@code string}: Python's {@code str()}; {@code upper}, {@code lower}, {@code capitalize},
 *       {@code title}: Python's case rules;</li>
 *   <li>{@code default} ({@code d}): with {@code boolean=true}, Python's truth (Jinjava's calls "false" false);</li>
 *   <li>{@code truncate}: jinja2's, which keeps text within {@code leeway} (5) of the length whole;</li>
 *   <li>{@code sort}, {@code groupby}, {@code max}, {@code min}: jinja2's, by {@code attribute} and ignoring case
 *       unless {@code case_sensitive} (Jinjava's sort ignores a named attribute; its groupby keeps first-seen
 *       order where jinja2 sorts; it has no max or min).</li>
 * </ul>
 */
final class Jinja2Filters {
    private Jinja2Filters() {
    }

    static List<Filter> all() {
        return List.of(
                new PyFilter("tojson", Jinja2Filters::tojson),
                new PyFilter("trim", (v, a) -> PyStr.strip(PyTypes.str(v), a.size() > 0 && a.get(0) != null ? PyTypes.str(a.get(0)) : null)),
                new PyFilter("length", (v, a) -> length(v)),
                new PyFilter("count", (v, a) -> length(v)),
                new PyFilter("items", (v, a) -> items(v)),
                new PyFilter("string", (v, a) -> PyTypes.str(v)),
                new PyFilter("upper", (v, a) -> PyStr.upper(PyTypes.str(v))),
                new PyFilter("lower", (v, a) -> PyStr.lower(PyTypes.str(v))),
                new PyFilter("capitalize", (v, a) -> PyStr.capitalize(PyTypes.str(v))),
                new PyFilter("title", (v, a) -> title(PyTypes.str(v))),
                new PyFilter("default", Jinja2Filters::dflt),
                new PyFilter("d", Jinja2Filters::dflt),
                new PyFilter("truncate", Jinja2Filters::truncate),
                new PyFilter("sort", Jinja2Filters::sort),
                new PyFilter("groupby", Jinja2Filters::groupby),
                new PyFilter("max", (v, a) -> extreme(v, a, 1)),
                new PyFilter("min", (v, a) -> extreme(v, a, -1)));
    }

    /** Hugging Face's tojson: positional arguments in its order (ensure_ascii, indent, separators, sort_keys). */
    private static Object tojson(Object v, Args a) {
        boolean ensureAscii = PyTypes.truthy(a.opt(0, "ensure_ascii"));
        Object indent = a.opt(1, "indent");
        Object separators = a.opt(2, "separators");
        boolean sortKeys = PyTypes.truthy(a.opt(3, "sort_keys"));
        String indentText = indent == null ? null
                : PyTypes.isString(indent) ? indent.toString() : " ".repeat((int) Math.max(0, PyStr.toLong(indent)));
        String[] seps = null;
        if (separators != null) {
            if (!(separators instanceof List<?> l) || l.size() != 2) {
                throw new IllegalArgumentException("tojson: separators must be an (item_separator, key_separator) pair");
            }
            seps = new String[] {PyTypes.str(l.get(0)), PyTypes.str(l.get(1))};
        }
        return new PyJson(ensureAscii, indentText, seps, sortKeys).dumps(v);
    }

    /** {@code default(value, default_value='', boolean=false)}. */
    private static Object dflt(Object v, Args a) {
        Object d = a.opt(0, "default_value");
        boolean bool = PyTypes.truthy(a.opt(1, "boolean"));
        return v == null || (bool && !PyTypes.truthy(v)) ? (d == null && !a.has(0, "default_value") ? "" : d) : v;
    }

    /** {@code truncate(s, length=255, killwords=false, end='...', leeway=5)}. */
    private static Object truncate(Object v, Args a) {
        String s = PyTypes.str(v);
        int length = a.opt(0, "length") == null ? 255 : (int) PyStr.toLong(a.opt(0, "length"));
        boolean killwords = PyTypes.truthy(a.opt(1, "killwords"));
        String end = a.opt(2, "end") == null ? "..." : PyTypes.str(a.opt(2, "end"));
        int leeway = a.opt(3, "leeway") == null ? 5 : (int) PyStr.toLong(a.opt(3, "leeway"));
        int n = PyStr.length(s);
        if (length < PyStr.length(end) || leeway < 0) {
            throw new IllegalArgumentException("truncate: expected length >= " + PyStr.length(end) + " and leeway >= 0");
        }
        if (n <= length + leeway) {
            return s;
        }
        String head = s.substring(0, PyStr.offset(s, length - PyStr.length(end)));
        if (killwords) {
            return head + end;
        }
        int space = head.lastIndexOf(' ');
        return (space < 0 ? head : head.substring(0, space)) + end;
    }

    /** {@code sort(value, reverse=false, case_sensitive=false, attribute=none)}: stable, as Python's sorted. */
    private static List<Object> sort(Object v, Args a) {
        boolean reverse = PyTypes.truthy(a.opt(0, "reverse"));
        Function<Object, Object> key = key(a.opt(2, "attribute"), PyTypes.truthy(a.opt(1, "case_sensitive")));
        List<Object> items = list(v);
        Comparator<Object> order = (x, y) -> PyOperators.compare(key.apply(x), key.apply(y));
        items.sort(reverse ? order.reversed() : order);
        return items;
    }

    /**
     * {@code groupby(value, attribute, default=none, case_sensitive=false)}: (grouper, list) pairs in sorted
     * order of the grouper, each grouper as its first item has it.
     */
    private static List<Object> groupby(Object v, Args a) {
        Object attribute = a.opt(0, "attribute");
        Object dflt = a.opt(1, "default");
        boolean caseSensitive = PyTypes.truthy(a.opt(2, "case_sensitive"));
        Function<Object, Object> exact = withDefault(key(attribute, true), dflt);
        Function<Object, Object> key = withDefault(key(attribute, caseSensitive), dflt);
        List<Object> items = list(v);
        items.sort((x, y) -> PyOperators.compare(key.apply(x), key.apply(y)));
        List<Object> groups = new ArrayList<>();
        List<Object> current = null;
        Object currentKey = null;
        for (Object item : items) {
            Object k = key.apply(item);
            if (current == null || !PyTypes.equal(k, currentKey)) {
                current = new ArrayList<>();
                currentKey = k;
                groups.add(new PyGroup(exact.apply(item), current));
            }
            current.add(item);
        }
        return groups;
    }

    /** {@code max} (sign 1) or {@code min} (sign -1): the first of the extreme items; undefined when empty. */
    private static Object extreme(Object v, Args a, int sign) {
        Function<Object, Object> key = key(a.opt(1, "attribute"), PyTypes.truthy(a.opt(0, "case_sensitive")));
        Object best = null;
        boolean first = true;
        for (Object item : list(v)) {
            if (first || sign * PyOperators.compare(key.apply(item), key.apply(best)) > 0) {
                best = item;
                first = false;
            }
        }
        return best;
    }

    private static Function<Object, Object> withDefault(Function<Object, Object> key, Object dflt) {
        return item -> {
            Object k = key.apply(item);
            return k == null ? dflt : k;
        };
    }

    /**
     * jinja2's attribute getter: {@code attribute} is a dotted path of keys (numbers index lists), several
     * separated by commas make a list key; strings are lower-cased unless {@code caseSensitive}.
     */
    private static Function<Object, Object> key(Object attribute, boolean caseSensitive) {
        Function<Object, Object> ignoreCase = k -> !caseSensitive && PyTypes.isString(k) ? PyStr.lower(k.toString()) : k;
        if (attribute == null) {
            return ignoreCase;
        }
        String path = PyTypes.str(attribute);
        if (path.contains(",")) {
            List<Function<Object, Object>> parts = new ArrayList<>();
            for (String p : path.split(",")) {
                parts.add(key(p, caseSensitive));
            }
            return item -> {
                List<Object> k = new ArrayList<>();
                parts.forEach(f -> k.add(f.apply(item)));
                return k;
            };
        }
        return item -> {
            Object o = item;
            for (String part : path.split("\\.")) {
                if (o instanceof Map<?, ?> m) {
                    o = m.get(part);
                } else if (o instanceof List<?> l && part.matches("-?\\d+")) {
                    int i = Integer.parseInt(part);
                    o = i >= 0 && i < l.size() ? l.get(i) : null;
                } else {
                    o = null;
                }
            }
            return ignoreCase.apply(o);
        };
    }

    private static List<Object> list(Object v) {
        List<Object> r = new ArrayList<>();
        if (v instanceof Map<?, ?> m) {
            r.addAll(m.keySet());
        } else if (v instanceof Iterable<?> it) {
            it.forEach(r::add);
        } else if (PyTypes.isString(v)) {
            v.toString().codePoints().forEach(cp -> r.add(Character.toString(cp)));
        } else if (v != null) {
            throw new IllegalArgumentException("'" + PyTypes.typeName(v) + "' object is not iterable");
        }
        return r;
    }

    /**
     * jinja2's {@code (grouper, list)} tuple: unpacks in a for loop, and has {@code .grouper} and {@code .list}
     * (a {@link PyWrapper}, so Jinjava does not wrap it into a plain list).
     */
    static final class PyGroup extends AbstractList<Object> implements PyWrapper {
        final Object grouper;
        final List<Object> items;

        PyGroup(Object grouper, List<Object> items) {
            this.grouper = grouper;
            this.items = items;
        }

        @Override
        public Object get(int i) {
            return switch (i) {
                case 0 -> grouper;
                case 1 -> items;
                default -> throw new IndexOutOfBoundsException("tuple index out of range");
            };
        }

        @Override
        public int size() {
            return 2;
        }
    }

    private static int length(Object v) {
        if (v == null) {
            return 0;
        }
        if (PyTypes.isString(v)) {
            return PyStr.length(v.toString());
        }
        if (v instanceof java.util.Collection<?> c) {
            return c.size();
        }
        if (v instanceof Map<?, ?> m) {
            return m.size();
        }
        throw new IllegalArgumentException("object of type '" + PyTypes.typeName(v) + "' has no len()");
    }

    private static List<Object> items(Object v) {
        List<Object> r = new ArrayList<>();
        if (v == null) {
            return r;
        }
        if (!(v instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException("Can only get item pairs from a mapping.");
        }
        for (Map.Entry<?, ?> e : m.entrySet()) {
            List<Object> p = new ArrayList<>(2);
            p.add(e.getKey());
            p.add(e.getValue());
            r.add(p);
        }
        return r;
    }

    private static final Pattern WORD_BEGINNING = Pattern.compile("([-\\s({\\[<]+)", Pattern.UNICODE_CHARACTER_CLASS);

    /** jinja2's {@code title}: each word (split at spaces, '-', and opening brackets) capitalized. */
    private static String title(String s) {
        StringBuilder b = new StringBuilder();
        Matcher m = WORD_BEGINNING.matcher(s);
        int last = 0;
        List<String> items = new ArrayList<>();
        while (m.find()) {
            items.add(s.substring(last, m.start()));
            items.add(m.group());
            last = m.end();
        }
        items.add(s.substring(last));
        for (String item : items) {
            if (!item.isEmpty()) {
                int cp = item.codePointAt(0);
                int n = Character.charCount(cp);
                b.append(PyStr.upper(item.substring(0, n))).append(PyStr.lower(item.substring(n)));
            }
        }
        return b.toString();
    }

    /** A filter's arguments: positional, then named. */
    record Args(List<Object> positional, Map<String, Object> named) {
        Object opt(int i, String name) {
            return i < positional.size() ? positional.get(i) : named.get(name);
        }

        int size() {
            return positional.size();
        }

        boolean has(int i, String name) {
            return i < positional.size() || named.containsKey(name);
        }

        Object get(int i) {
            return positional.get(i);
        }
    }

    /** A jinja2 filter over Python values: {@code fn(value, args)}. */
    private static final class PyFilter implements Filter {
        private final String name;
        private final BiFunction<Object, Args, Object> fn;

        PyFilter(String name, BiFunction<Object, Args, Object> fn) {
            this.name = name;
            this.fn = fn;
        }

        @Override
        public String getName() {
            return name;
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            return fn.apply(var, new Args(args == null ? List.of() : java.util.Arrays.asList(args), kwargs == null ? Map.of() : kwargs));
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            return filter(var, interpreter, args, Map.of());
        }
    }
}
