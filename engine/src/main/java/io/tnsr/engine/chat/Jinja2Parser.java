package io.tnsr.engine.chat;

import com.hubspot.jinjava.el.ext.AdditionOperator;
import com.hubspot.jinjava.el.ext.AstNamedParameter;
import com.hubspot.jinjava.el.ext.ExtendedParser;
import com.hubspot.jinjava.el.ext.PowerOfOperator;
import com.hubspot.jinjava.el.ext.TruncDivOperator;
import com.hubspot.jinjava.el.ExtendedSyntaxBuilder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import jinjava.de.odysseus.el.tree.Bindings;
import jinjava.de.odysseus.el.tree.impl.Builder;
import jinjava.de.odysseus.el.tree.impl.Parser;
import jinjava.de.odysseus.el.tree.impl.Scanner;
import jinjava.de.odysseus.el.tree.impl.Scanner.Symbol;
import jinjava.de.odysseus.el.tree.impl.ast.AstBinary;
import jinjava.de.odysseus.el.tree.impl.ast.AstBracket;
import jinjava.de.odysseus.el.tree.impl.ast.AstDot;
import jinjava.de.odysseus.el.tree.impl.ast.AstNode;
import jinjava.de.odysseus.el.tree.impl.ast.AstParameters;
import jinjava.de.odysseus.el.tree.impl.ast.AstRightValue;
import jinjava.de.odysseus.el.tree.impl.ast.AstUnary;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELException;

/**
 * Jinjava's expression parser with jinja2's grammar where chat templates need it:
 * <ul>
 *   <li>{@code not} binds looser than comparisons: {@code not x|length == 1} is {@code not (x|length == 1)}
 *       (EL's {@code not} takes only the next operand);</li>
 *   <li>{@code a and b} returns {@code a} when it is false, else {@code b}, as Python's does (EL returns a
 *       boolean);</li>
 *   <li>arithmetic and comparisons are Python's ({@link PyOperators});</li>
 *   <li>{@code f(name=a - 1)} passes {@code a - 1} as {@code name};</li>
 *   <li>slices take a step and follow Python's bounds: {@code messages[::-1]}, {@code s[-10:]} (EL has no
 *       step, and Jinjava's slice fails on a start before the beginning of a string).</li>
 * </ul>
 * Filters and tests bind to the value before them ({@code -x|abs} is {@code (-x)|abs}); that is Jinjava's
 * "natural operator precedence", which {@link Jinja2Environment} turns on.
 */
final class Jinja2Parser extends ExtendedParser {

    private static final Map<AstBinary.Operator, AstBinary.Operator> PYTHON_OPERATORS = Map.ofEntries(
            Map.entry(AstBinary.ADD, PyOperators.of("+")),
            Map.entry(AdditionOperator.OP, PyOperators.of("+")),
            Map.entry(AstBinary.SUB, PyOperators.of("-")),
            Map.entry(AstBinary.MUL, PyOperators.of("*")),
            Map.entry(AstBinary.DIV, PyOperators.of("/")),
            Map.entry(AstBinary.MOD, PyOperators.of("%")),
            Map.entry(AstBinary.EQ, PyOperators.of("==")),
            Map.entry(AstBinary.NE, PyOperators.of("!=")),
            Map.entry(AstBinary.LT, PyOperators.of("<")),
            Map.entry(AstBinary.LE, PyOperators.of("<=")),
            Map.entry(AstBinary.GT, PyOperators.of(">")),
            Map.entry(AstBinary.GE, PyOperators.of(">=")));

    Jinja2Parser(Builder context, String input) {
        super(context, input);
        putExtensionHandler(TruncDivOperator.TOKEN, binary(ExtensionPoint.MUL, PyOperators.of("//")));
        putExtensionHandler(PowerOfOperator.TOKEN, binary(ExtensionPoint.MUL, PyOperators.of("**")));
    }

    private static ExtensionHandler binary(ExtensionPoint point, AstBinary.Operator op) {
        return new ExtensionHandler(point) {
            @Override
            public AstNode createAstNode(AstNode... children) {
                return new AstBinary(children[0], children[1], op);
            }
        };
    }

    /** Every arithmetic and comparison operator computes as Python does ({@link PyOperators}). */
    @Override
    protected AstBinary createAstBinary(AstNode left, AstNode right, AstBinary.Operator operator) {
        return super.createAstBinary(left, right, PYTHON_OPERATORS.getOrDefault(operator, operator));
    }

    /** Builds {@link Jinja2Parser}s, with the features Jinjava's own builder has. */
    static final class SyntaxBuilder extends ExtendedSyntaxBuilder {
        private static final long serialVersionUID = 1L;

        SyntaxBuilder() {
            super(Builder.Feature.METHOD_INVOCATIONS, Builder.Feature.VARARGS);
        }

        @Override
        protected Parser createParser(String expression) {
            return new Jinja2Parser(this, expression);
        }
    }

    @Override
    protected AstNode and(boolean required) throws Scanner.ScanException, ParseException {
        AstNode v = not(required);
        if (v == null) {
            return null;
        }
        while (true) {
            Scanner.Token t = getToken();
            if (t.getSymbol() == Symbol.AND) {
                consumeToken();
                v = createAstBinary(v, not(true), PY_AND);
            } else if (t.getSymbol() == Symbol.EXTENSION && getExtensionHandler(t) != null
                    && getExtensionHandler(t).getExtensionPoint() == ExtensionPoint.AND) {
                v = getExtensionHandler(consumeToken()).createAstNode(v, not(true));
            } else {
                return v;
            }
        }
    }

    /** jinja2's {@code not}: above {@code and}, below the comparisons. */
    private AstNode not(boolean required) throws Scanner.ScanException, ParseException {
        if (getToken().getSymbol() == Symbol.NOT) {
            consumeToken();
            return createAstUnary(not(true), AstUnary.NOT);
        }
        return eq(required);
    }

    /**
     * Call arguments, list and tuple items: {@code name=value} is a named argument whatever operators its value
     * has (Jinjava's {@code =} binds like {@code +}, so {@code f(n=a - 1)} was {@code (n=a) - 1}), and a
     * trailing comma is allowed, as in Python.
     */
    @Override
    protected AstParameters params(Symbol left, Symbol right) throws Scanner.ScanException, ParseException {
        consumeToken(left);
        List<AstNode> items = new ArrayList<>();
        AstNode v = param();
        while (v != null) {
            items.add(v);
            if (getToken().getSymbol() != Symbol.COMMA) {
                break;
            }
            consumeToken();
            v = param();
        }
        consumeToken(right);
        return createAstParameters(items);
    }

    private AstNode param() throws Scanner.ScanException, ParseException {
        if (getToken().getSymbol() == Symbol.IDENTIFIER && lookahead(0).getSymbol() == Symbol.EXTENSION
                && "=".equals(lookahead(0).getImage())) {
            String name = consumeToken().getImage();
            consumeToken();
            return new AstNamedParameter(identifier(name), expr(true));
        }
        return expr(false);
    }

    /** A value and its postfix operators ({@code .name}, {@code .name(...)}, {@code [i]}, {@code [a:b:c]}). */
    @Override
    protected AstNode value() throws Scanner.ScanException, ParseException {
        boolean lvalue = true;
        AstNode v = nonliteral();
        if (v == null) {
            v = literal();
            if (v == null) {
                return null;
            }
            lvalue = false;
        }
        while (true) {
            switch (getToken().getSymbol()) {
                case DOT: {
                    consumeToken();
                    String name = consumeToken(Symbol.IDENTIFIER).getImage();
                    AstDot dot = createAstDot(v, name, lvalue);
                    v = getToken().getSymbol() == Symbol.LPAREN && context.isEnabled(Builder.Feature.METHOD_INVOCATIONS)
                            ? createAstMethod(dot, params()) : dot;
                    break;
                }
                case LBRACK: {
                    consumeToken();
                    AstNode first = expr(false);
                    if (getToken().getSymbol() == Symbol.COLON) {
                        consumeToken();
                        AstNode stop = expr(false);
                        AstNode step = null;
                        if (getToken().getSymbol() == Symbol.COLON) {
                            consumeToken();
                            step = expr(false);
                        }
                        consumeToken(Symbol.RBRACK);
                        v = new PySlice(v, first, stop, step);
                    } else {
                        if (first == null) {
                            fail("an index");
                        }
                        consumeToken(Symbol.RBRACK);
                        AstBracket bracket = createAstBracket(v, first, lvalue, !context.isEnabled(Builder.Feature.NULL_PROPERTIES));
                        v = getToken().getSymbol() == Symbol.LPAREN && context.isEnabled(Builder.Feature.METHOD_INVOCATIONS)
                                ? createAstMethod(bracket, params()) : bracket;
                    }
                    break;
                }
                default:
                    return v;
            }
        }
    }

    /** Python's {@code and}: the first false operand, else the last; the right one is evaluated only if needed. */
    static final AstBinary.Operator PY_AND = new AstBinary.Operator() {
        @Override
        public Object eval(Bindings bindings, ELContext context, AstNode left, AstNode right) {
            Object l = left.eval(bindings, context);
            return bindings.convert(l, Boolean.class) ? right.eval(bindings, context) : l;
        }

        @Override
        public String toString() {
            return "and";
        }
    };

    /** {@code base[start:stop:step]} with Python's {@code slice.indices} bounds, on strings (by code point) and sequences. */
    static final class PySlice extends AstRightValue {
        private final AstNode base;
        private final AstNode start;
        private final AstNode stop;
        private final AstNode step;

        PySlice(AstNode base, AstNode start, AstNode stop, AstNode step) {
            this.base = base;
            this.start = start;
            this.stop = stop;
            this.step = step;
        }

        @Override
        public Object eval(Bindings bindings, ELContext context) {
            Object b = base.eval(bindings, context);
            Object st = step == null ? null : step.eval(bindings, context);
            long by = st == null ? 1 : PyStr.toLong(st);
            if (by == 0) {
                throw new ELException("slice step cannot be zero");
            }
            Object from = start == null ? null : start.eval(bindings, context);
            Object to = stop == null ? null : stop.eval(bindings, context);
            if (PyTypes.isString(b)) {
                int[] cps = b.toString().codePoints().toArray();
                StringBuilder r = new StringBuilder();
                for (long i : indices(cps.length, from, to, by)) {
                    r.appendCodePoint(cps[(int) i]);
                }
                return r.toString();
            }
            List<?> items;
            if (b instanceof List<?> l) {
                items = l;
            } else if (b instanceof Object[] a) {
                items = Arrays.asList(a);
            } else if (b instanceof Iterable<?> it) {
                List<Object> copy = new ArrayList<>();
                it.forEach(copy::add);
                items = copy;
            } else {
                throw new ELException("'" + PyTypes.typeName(b) + "' object is not subscriptable");
            }
            List<Object> r = new ArrayList<>();
            for (long i : indices(items.size(), from, to, by)) {
                r.add(items.get((int) i));
            }
            return r;
        }

        /** The indexes {@code slice(from, to, step).indices(len)} selects, in order. */
        private static long[] indices(int len, Object from, Object to, long step) {
            long lower = step > 0 ? 0 : -1;
            long upper = step > 0 ? len : len - 1;
            long a = bound(from, len, lower, upper, step > 0 ? lower : upper);
            long b = bound(to, len, lower, upper, step > 0 ? upper : lower);
            int n = (int) Math.max(0, step > 0 ? (b - a + step - 1) / step : (a - b - step - 1) / -step);
            long[] r = new long[n];
            for (int k = 0; k < n; k++) {
                r[k] = a + k * step;
            }
            return r;
        }

        private static long bound(Object v, int len, long lower, long upper, long dflt) {
            if (v == null) {
                return dflt;
            }
            long i = PyStr.toLong(v);
            if (i < 0) {
                i += len;
                return Math.max(i, lower);
            }
            return Math.min(i, upper);
        }

        @Override
        public void appendStructure(StringBuilder b, Bindings bindings) {
            base.appendStructure(b, bindings);
            b.append('[');
            if (start != null) {
                start.appendStructure(b, bindings);
            }
            b.append(':');
            if (stop != null) {
                stop.appendStructure(b, bindings);
            }
            if (step != null) {
                b.append(':');
                step.appendStructure(b, bindings);
            }
            b.append(']');
        }

        @Override
        public int getCardinality() {
            return 4;
        }

        @Override
        public AstNode getChild(int i) {
            return switch (i) {
                case 0 -> base;
                case 1 -> start;
                case 2 -> stop;
                case 3 -> step;
                default -> null;
            };
        }

        @Override
        public String toString() {
            return "[::]";
        }
    }
}
