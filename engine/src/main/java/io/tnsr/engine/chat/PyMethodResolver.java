package io.tnsr.engine.chat;

import com.hubspot.jinjava.el.ext.NamedParameter;
import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;
import jinjava.javax.el.MethodNotFoundException;

/**
 * Method calls on strings, dicts and lists as Python has them ({@code content.strip()},
 * {@code message.get('tool_calls')}, {@code tool.items()}, {@code messages.index(m)}), and indexing of
 * strings ({@code content[0]}, {@code content[-1]}).
 *
 * <p>It comes first in Jinjava's resolver chain and answers every method call on a string, a mapping, a
 * list, a number or a boolean, so a template sees Python's methods and never Java's ({@code s.getBytes()},
 * {@code list.clear()}). Like Hugging Face's {@code ImmutableSandboxedEnvironment}, methods that would change
 * a list or dict ({@code append}, {@code pop}, {@code update}, ...) are refused. Calls on other objects (the
 * loop object, namespaces) go on to Jinjava's own resolvers.
 */
final class PyMethodResolver extends ELResolver {
    private static final Set<String> MUTATING = Set.of("append", "extend", "insert", "pop", "remove", "clear",
            "reverse", "sort", "update", "setdefault", "popitem", "add", "discard");

    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        if (base instanceof Jinja2Filters.PyGroup g && property != null
                && (property.toString().equals("grouper") || property.toString().equals("list"))) {
            context.setPropertyResolved(true);
            return property.toString().equals("grouper") ? g.grouper : g.items;
        }
        if (base instanceof String s && property != null) {
            context.setPropertyResolved(true);
            Long index = property instanceof Number || property instanceof Boolean ? (Long) PyStr.toLong(property)
                    : integer(property.toString());
            if (index != null) {
                long i = index;
                int n = PyStr.length(s);
                return i >= n || i < -n ? null : PyStr.charAt(s, i);
            }
            return null; // a str attribute that is not called: nothing a template can print
        }
        return null;
    }

    /** Jinjava passes {@code s[0]}'s index as the text "0". */
    private static Long integer(String s) {
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return null;
        }
    }

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (base == null || method == null) {
            return null;
        }
        String name = method.toString();
        Args a = new Args(name, params);
        Object r;
        if (PyTypes.isString(base)) {
            r = string(base.toString(), name, a);
        } else if (base instanceof Map<?, ?> m) {
            r = dict(m, name, a);
        } else if (base instanceof List<?> l) {
            r = list(l, name, a);
        } else if (base instanceof Number || base instanceof Boolean) {
            throw noAttribute(base, name);
        } else {
            return null;
        }
        context.setPropertyResolved(true);
        return r;
    }

    private static Object string(String s, String name, Args a) {
        switch (name) {
            case "strip":
                return PyStr.strip(s, a.optString(0, "chars"));
            case "lstrip":
                return PyStr.lstrip(s, a.optString(0, "chars"));
            case "rstrip":
                return PyStr.rstrip(s, a.optString(0, "chars"));
            case "split":
                return PyStr.split(s, a.optString(0, "sep"), a.optInt(1, "maxsplit", -1));
            case "rsplit":
                return PyStr.rsplit(s, a.optString(0, "sep"), a.optInt(1, "maxsplit", -1));
            case "splitlines":
                return PyStr.splitlines(s, a.optBool(0, "keepends"));
            case "startswith":
            case "endswith":
                return affix(s, name.equals("startswith"), a);
            case "upper":
                return PyStr.upper(s);
            case "lower":
            case "casefold":
                return PyStr.lower(s);
            case "title":
                return PyStr.title(s);
            case "capitalize":
                return PyStr.capitalize(s);
            case "swapcase":
                return PyStr.swapcase(s);
            case "replace":
                return PyStr.replace(s, a.string(0, "old"), a.string(1, "new"), a.optInt(2, "count", -1));
            case "find":
                return PyStr.find(s, a.string(0, "sub"), a.opt(1, "start"), a.opt(2, "end"), false);
            case "rfind":
                return PyStr.find(s, a.string(0, "sub"), a.opt(1, "start"), a.opt(2, "end"), true);
            case "index":
            case "rindex": {
                int k = PyStr.find(s, a.string(0, "sub"), a.opt(1, "start"), a.opt(2, "end"), name.equals("rindex"));
                if (k < 0) {
                    throw new IllegalArgumentException("substring not found");
                }
                return k;
            }
            case "count":
                return PyStr.count(s, a.string(0, "sub"));
            case "join": {
                StringBuilder b = new StringBuilder();
                boolean first = true;
                for (Object o : iterable(a.get(0, "iterable"))) {
                    if (!PyTypes.isString(o)) {
                        throw new IllegalArgumentException("sequence item: expected str instance, " + PyTypes.typeName(o) + " found");
                    }
                    b.append(first ? "" : s).append(o);
                    first = false;
                }
                return b.toString();
            }
            case "removeprefix": {
                String p = a.string(0, "prefix");
                return s.startsWith(p) ? s.substring(p.length()) : s;
            }
            case "removesuffix": {
                String p = a.string(0, "suffix");
                return s.endsWith(p) && !p.isEmpty() ? s.substring(0, s.length() - p.length()) : s;
            }
            case "partition":
            case "rpartition": {
                String sep = a.string(0, "sep");
                int k = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
                if (k < 0) {
                    return name.equals("partition") ? List.of(s, "", "") : List.of("", "", s);
                }
                return List.of(s.substring(0, k), sep, s.substring(k + sep.length()));
            }
            case "zfill": {
                int w = (int) PyStr.toLong(a.get(0, "width"));
                int pad = w - PyStr.length(s);
                if (pad <= 0) {
                    return s;
                }
                boolean sign = !s.isEmpty() && (s.charAt(0) == '+' || s.charAt(0) == '-');
                return sign ? s.charAt(0) + "0".repeat(pad) + s.substring(1) : "0".repeat(pad) + s;
            }
            case "isspace":
                return !s.isEmpty() && s.codePoints().allMatch(PyStr::isSpace);
            case "isalpha":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isdigit":
            case "isnumeric":
            case "isdecimal":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isalnum":
                return !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isupper":
                return s.codePoints().anyMatch(Character::isUpperCase) && s.codePoints().noneMatch(Character::isLowerCase);
            case "islower":
                return s.codePoints().anyMatch(Character::isLowerCase) && s.codePoints().noneMatch(Character::isUpperCase);
            default:
                throw noAttribute(s, name);
        }
    }

    private static boolean affix(String s, boolean start, Args a) {
        Object what = a.get(0, start ? "prefix" : "suffix");
        int n = PyStr.length(s);
        int from = PyStr.sliceIndex(a.opt(1, "start"), n, 0);
        int to = PyStr.sliceIndex(a.opt(2, "end"), n, n);
        String region = from > to ? null : s.substring(PyStr.offset(s, from), PyStr.offset(s, to));
        List<Object> options = what instanceof List<?> l ? new ArrayList<>(l) : List.of(what);
        for (Object o : options) {
            if (!PyTypes.isString(o)) {
                throw new IllegalArgumentException((start ? "startswith" : "endswith")
                        + " first arg must be str or a tuple of str, not " + PyTypes.typeName(o));
            }
            if (region != null && (start ? region.startsWith(o.toString()) : region.endsWith(o.toString()))) {
                return true;
            }
        }
        return false;
    }

    private static Object dict(Map<?, ?> m, String name, Args a) {
        switch (name) {
            case "get": {
                Object k = a.get(0, "key");
                Object v = m.get(k);
                return v != null || m.containsKey(k) ? v : a.opt(1, "default");
            }
            case "items": {
                List<Object> r = new ArrayList<>(m.size());
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    r.add(pair(e.getKey(), e.getValue()));
                }
                return r;
            }
            case "keys":
                return new ArrayList<Object>(m.keySet());
            case "values":
                return new ArrayList<Object>(m.values());
            case "copy":
                return new LinkedHashMap<Object, Object>(m);
            default:
                if (MUTATING.contains(name)) {
                    throw unsafe("dict", name);
                }
                throw noAttribute(m, name);
        }
    }

    private static Object list(List<?> l, String name, Args a) {
        switch (name) {
            case "index": {
                Object x = a.get(0, "value");
                for (int i = 0; i < l.size(); i++) {
                    if (PyTypes.equal(l.get(i), x)) {
                        return i;
                    }
                }
                throw new IllegalArgumentException(PyTypes.repr(x) + " is not in list");
            }
            case "count": {
                Object x = a.get(0, "value");
                return (int) l.stream().filter(e -> PyTypes.equal(e, x)).count();
            }
            case "copy":
                return new ArrayList<Object>(l);
            default:
                if (MUTATING.contains(name)) {
                    throw unsafe("list", name);
                }
                throw noAttribute(l, name);
        }
    }

    /** A Python 2-tuple: a list to Jinjava, which unpacks it in {@code for k, v in ...}. */
    private static List<Object> pair(Object k, Object v) {
        List<Object> p = new ArrayList<>(2);
        p.add(k);
        p.add(v);
        return p;
    }

    private static Iterable<?> iterable(Object o) {
        if (o instanceof Map<?, ?> m) {
            return m.keySet();
        }
        if (o instanceof Iterable<?> it) {
            return it;
        }
        if (PyTypes.isString(o)) {
            String s = o.toString();
            return s.codePoints().mapToObj(Character::toString).toList();
        }
        throw new IllegalArgumentException("'" + PyTypes.typeName(o) + "' object is not iterable");
    }

    private static MethodNotFoundException noAttribute(Object base, String name) {
        return new MethodNotFoundException("'" + PyTypes.typeName(base) + " object' has no attribute '" + name + "'");
    }

    private static MethodNotFoundException unsafe(String type, String name) {
        return new MethodNotFoundException("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
    }

    /** A call's arguments, positional then named, as Python binds them to a signature. */
    private static final class Args {
        private final String method;
        private final List<Object> positional = new ArrayList<>();
        private final Map<String, Object> named = new LinkedHashMap<>();

        Args(String method, Object[] params) {
            this.method = method;
            if (params != null) {
                for (Object p : params) {
                    if (p instanceof NamedParameter np) {
                        named.put(np.getName(), np.getValue());
                    } else {
                        positional.add(p);
                    }
                }
            }
        }

        boolean has(int i, String name) {
            return i < positional.size() || named.containsKey(name);
        }

        Object opt(int i, String name) {
            return i < positional.size() ? positional.get(i) : named.get(name);
        }

        Object get(int i, String name) {
            if (!has(i, name)) {
                throw new IllegalArgumentException(method + "() missing required argument '" + name + "' (pos " + (i + 1) + ")");
            }
            return opt(i, name);
        }

        String string(int i, String name) {
            Object v = get(i, name);
            if (!PyTypes.isString(v)) {
                throw new IllegalArgumentException(method + "() argument " + (i + 1) + " must be str, not " + PyTypes.typeName(v));
            }
            return v.toString();
        }

        String optString(int i, String name) {
            Object v = opt(i, name);
            return v == null ? null : string(i, name);
        }

        int optInt(int i, String name, int dflt) {
            Object v = opt(i, name);
            return v == null ? dflt : (int) PyStr.toLong(v);
        }

        boolean optBool(int i, String name) {
            return PyTypes.truthy(opt(i, name));
        }
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {
        // read-only: assignments go to Jinjava's resolvers
    }

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return true;
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return Collections.emptyIterator();
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }
}
