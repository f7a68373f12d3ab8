package io.tnsr.engine.chat;

import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.JinjavaInterpreter.InterpreterScopeClosable;
import com.hubspot.jinjava.interpret.NullValue;
import com.hubspot.jinjava.lib.tag.ElseTag;
import com.hubspot.jinjava.lib.tag.ForTag;
import com.hubspot.jinjava.tree.Node;
import com.hubspot.jinjava.tree.TagNode;
import com.hubspot.jinjava.tree.parse.TagToken;
import com.hubspot.jinjava.util.ForLoop;
import com.hubspot.jinjava.util.LengthLimitingStringBuilder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import org.apache.commons.lang3.tuple.Pair;

/**
 * jinja2's {@code for}, with what Jinjava's lacks:
 * <ul>
 *   <li>the loop filter, {@code {% for k, v in d.items() if k != "x" %}}: items are filtered before the loop,
 *       so {@code loop.index}, {@code loop.length} and {@code loop.last} count only those kept (jinja2 parses
 *       the iterable without conditional expressions, so the first {@code if} outside brackets and strings
 *       starts the filter);</li>
 *   <li>{@code {% else %}}, rendered when nothing was iterated (Jinjava renders it inside every iteration);</li>
 *   <li>iteration over a string's characters, and {@code loop.previtem} / {@code loop.nextitem}.</li>
 * </ul>
 * {@code {% break %}} and {@code {% continue %}} work as in Jinjava.
 */
final class Jinja2ForTag extends ForTag {
    private static final long serialVersionUID = 1L;

    @Override
    @SuppressWarnings("try") // the scope is closed by try-with-resources, never read
    public String interpretUnchecked(TagNode tagNode, JinjavaInterpreter interpreter) {
        Pair<List<String>, String> varsAndExpr = getLoopVarsAndExpression((TagToken) tagNode.getMaster());
        List<String> vars = varsAndExpr.getLeft();
        String expr = varsAndExpr.getRight();
        int cut = filterStart(expr);
        Object collection = interpreter.resolveELExpression(cut < 0 ? expr : expr.substring(0, cut), tagNode.getLineNumber());
        List<Object> items = items(collection);
        if (cut >= 0) {
            items = filter(tagNode, interpreter, vars, items, expr.substring(cut + 3));
        }
        List<Node> body = new ArrayList<>();
        List<Node> orElse = new ArrayList<>();
        for (Node n : tagNode.getChildren()) {
            if (!orElse.isEmpty() || (n instanceof TagNode t && ElseTag.TAG_NAME.equals(t.getName()))) {
                orElse.add(n);
            } else {
                body.add(n);
            }
        }
        LengthLimitingStringBuilder out = new LengthLimitingStringBuilder(interpreter.getConfig().getMaxOutputSize());
        if (items.isEmpty()) {
            for (Node n : orElse.subList(Math.min(1, orElse.size()), orElse.size())) {
                out.append(n.render(interpreter).getValue());
            }
            return out.toString();
        }
        PyLoop loop = new PyLoop(items);
        try (InterpreterScopeClosable c = interpreter.enterScope()) {
            interpreter.getContext().put(LOOP, loop);
            while (loop.hasNext()) {
                Object item = interpreter.wrap(loop.next());
                bind(interpreter, vars, item);
                for (Node n : body) {
                    out.append(n.render(interpreter).getValue());
                    if (loop.isContinued()) {
                        break;
                    }
                }
            }
        }
        return out.toString();
    }

    /** What jinja2 iterates: a list's items, a dict's keys, a string's characters; nothing for undefined. */
    private static List<Object> items(Object collection) {
        if (collection == null) {
            return List.of();
        }
        if (PyTypes.isString(collection)) {
            return new ArrayList<>(collection.toString().codePoints().mapToObj(Character::toString).toList());
        }
        if (collection instanceof Map<?, ?> m) {
            return new ArrayList<>(m.keySet());
        }
        if (collection instanceof Iterable<?> it) {
            List<Object> r = new ArrayList<>();
            it.forEach(r::add);
            return r;
        }
        if (collection instanceof Object[] a) {
            return Arrays.asList(a);
        }
        throw new IllegalArgumentException("'" + PyTypes.typeName(collection) + "' object is not iterable");
    }

    /** The items for which {@code condition} holds with the loop variables bound to them. */
    @SuppressWarnings("try")
    private static List<Object> filter(TagNode tagNode, JinjavaInterpreter interpreter, List<String> vars, List<Object> items,
                                       String condition) {
        List<Object> kept = new ArrayList<>();
        for (Object item : items) {
            try (InterpreterScopeClosable c = interpreter.enterScope()) {
                bind(interpreter, vars, interpreter.wrap(item));
                if (PyTypes.truthy(interpreter.resolveELExpression(condition, tagNode.getLineNumber()))) {
                    kept.add(item);
                }
            }
        }
        return kept;
    }

    /** Binds the loop variables to {@code item}, unpacking a pair or list when there are several. */
    private static void bind(JinjavaInterpreter interpreter, List<String> vars, Object item) {
        if (vars.size() == 1) {
            put(interpreter, vars.get(0), item);
            return;
        }
        for (int i = 0; i < vars.size(); i++) {
            Object v = null;
            if (item instanceof Map.Entry<?, ?> e) {
                v = i == 0 ? e.getKey() : i == 1 ? e.getValue() : null;
            } else if (item instanceof List<?> l && i < l.size()) {
                v = l.get(i);
            }
            put(interpreter, vars.get(i), v);
        }
    }

    /** A None item hides a variable of the same name outside the loop, as in jinja2. */
    private static void put(JinjavaInterpreter interpreter, String name, Object v) {
        interpreter.getContext().put(name, v == null ? NullValue.INSTANCE : v);
    }

    /** Where " if " starts the loop filter in the loop expression, or -1. */
    static int filterStart(String expr) {
        int depth = 0;
        for (int i = 0; i < expr.length(); i++) {
            char c = expr.charAt(i);
            if (c == '\'' || c == '"') {
                int j = i + 1;
                while (j < expr.length() && expr.charAt(j) != c) {
                    j += expr.charAt(j) == '\\' ? 2 : 1;
                }
                i = j;
            } else if (c == '(' || c == '[' || c == '{') {
                depth++;
            } else if (c == ')' || c == ']' || c == '}') {
                depth--;
            } else if (depth == 0 && Character.isWhitespace(c) && expr.startsWith("if", i + 1)
                    && i + 3 < expr.length() && Character.isWhitespace(expr.charAt(i + 3))) {
                return i;
            }
        }
        return -1;
    }

    /** Jinjava's loop object over a known list, with jinja2's {@code previtem} and {@code nextitem}. */
    public static final class PyLoop extends ForLoop {
        private final List<Object> items;

        PyLoop(List<Object> items) {
            super(items.iterator(), items.size());
            this.items = items;
        }

        /** The previous item, or None on the first iteration. */
        public Object getPrevitem() {
            int i = getIndex0();
            return i > 0 ? items.get(i - 1) : null;
        }

        /** The next item, or None on the last iteration. */
        public Object getNextitem() {
            int i = getIndex0();
            return i + 1 < items.size() ? items.get(i + 1) : null;
        }
    }
}
