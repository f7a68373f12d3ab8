package io.tnsr.engine.chat;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import jinjava.de.odysseus.el.tree.Bindings;
import jinjava.de.odysseus.el.tree.impl.ast.AstBinary;
import jinjava.de.odysseus.el.tree.impl.ast.AstNode;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELException;

/**
 * Python's binary operators on template values, in place of EL's (which coerce between types: in EL
 * {@code '1' == 1} is true, {@code 7 % -3} is 1 and {@code 'ab' * 2} fails): {@code + - * / // % **} and
 * {@code == != < <= > >=} with Python's results and its TypeErrors for mixed types.
 */
final class PyOperators {
    private PyOperators() {
    }

    /** The Python operator {@code symbol}. */
    static AstBinary.Operator of(String symbol) {
        return new Op(symbol);
    }

    private static final class Op implements AstBinary.Operator {
        private final String symbol;

        Op(String symbol) {
            this.symbol = symbol;
        }

        @Override
        public Object eval(Bindings bindings, ELContext context, AstNode left, AstNode right) {
            return apply(symbol, left.eval(bindings, context), right.eval(bindings, context));
        }

        @Override
        public String toString() {
            return symbol;
        }
    }

    static Object apply(String op, Object a, Object b) {
        switch (op) {
            case "==":
                return PyTypes.equal(a, b);
            case "!=":
                return !PyTypes.equal(a, b);
            case "<":
                return compare(op, a, b) < 0;
            case "<=":
                return compare(op, a, b) <= 0;
            case ">":
                return compare(op, a, b) > 0;
            case ">=":
                return compare(op, a, b) >= 0;
            default:
                break;
        }
        if (isNumber(a) && isNumber(b)) {
            return arithmetic(op, a, b);
        }
        if (op.equals("+")) {
            if (PyTypes.isString(a) && PyTypes.isString(b)) {
                return a.toString() + b;
            }
            if (a instanceof List<?> x && b instanceof List<?> y) {
                List<Object> r = new ArrayList<>(x);
                r.addAll(y);
                return r;
            }
            if (PyTypes.isString(a)) {
                throw new ELException("can only concatenate str (not \"" + PyTypes.typeName(b) + "\") to str");
            }
        }
        if (op.equals("*") && (isInteger(a) || isInteger(b))) {
            Object seq = isInteger(a) ? b : a;
            long n = Math.max(0, PyStr.toLong(isInteger(a) ? a : b));
            if (PyTypes.isString(seq)) {
                return seq.toString().repeat((int) n);
            }
            if (seq instanceof List<?> l) {
                List<Object> r = new ArrayList<>();
                for (long i = 0; i < n; i++) {
                    r.addAll(l);
                }
                return r;
            }
        }
        throw new ELException("unsupported operand type(s) for " + op + ": '" + PyTypes.typeName(a) + "' and '"
                + PyTypes.typeName(b) + "'");
    }

    private static boolean isInteger(Object v) {
        return v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte || v instanceof Boolean;
    }

    private static boolean isNumber(Object v) {
        return v instanceof Number || v instanceof Boolean;
    }

    private static Object arithmetic(String op, Object a, Object b) {
        if (isInteger(a) && isInteger(b)) {
            long x = PyStr.toLong(a);
            long y = PyStr.toLong(b);
            switch (op) {
                case "+":
                    return Math.addExact(x, y);
                case "-":
                    return Math.subtractExact(x, y);
                case "*":
                    return Math.multiplyExact(x, y);
                case "/":
                    zero(y == 0, "division by zero");
                    return (double) x / y;
                case "//":
                    zero(y == 0, "integer division or modulo by zero");
                    return Math.floorDiv(x, y);
                case "%":
                    zero(y == 0, "integer division or modulo by zero");
                    return Math.floorMod(x, y);
                case "**":
                    if (y >= 0) {
                        long r = 1;
                        for (long i = 0; i < y; i++) {
                            r = Math.multiplyExact(r, x);
                        }
                        return r;
                    }
                    zero(x == 0, "0.0 cannot be raised to a negative power");
                    return Math.pow(x, y);
                default:
                    break;
            }
        } else {
            double x = ((Number) (a instanceof Boolean t ? (t ? 1 : 0) : a)).doubleValue();
            double y = ((Number) (b instanceof Boolean t ? (t ? 1 : 0) : b)).doubleValue();
            switch (op) {
                case "+":
                    return x + y;
                case "-":
                    return x - y;
                case "*":
                    return x * y;
                case "/":
                    zero(y == 0, "float division by zero");
                    return x / y;
                case "//":
                    zero(y == 0, "float floor division by zero");
                    return Math.floor(x / y);
                case "%": {
                    zero(y == 0, "float modulo");
                    double m = x % y;
                    return m != 0 && (m < 0) != (y < 0) ? m + y : m;
                }
                case "**":
                    return Math.pow(x, y);
                default:
                    break;
            }
        }
        throw new ELException("unsupported operator " + op);
    }

    private static void zero(boolean isZero, String message) {
        if (isZero) {
            throw new ELException(message);
        }
    }

    /** Python's ordering of {@code a} and {@code b} ({@code sorted}, {@code max}): a TypeError for mixed types. */
    static int compare(Object a, Object b) {
        return compare("<", a, b);
    }

    /** Python's ordering: numbers by value, strings by code point, lists item by item; other mixes are a TypeError. */
    private static int compare(String op, Object a, Object b) {
        if (isNumber(a) && isNumber(b)) {
            if (isInteger(a) && isInteger(b)) {
                return Long.compare(PyStr.toLong(a), PyStr.toLong(b));
            }
            double x = a instanceof Boolean t ? (t ? 1 : 0) : ((Number) a).doubleValue();
            double y = b instanceof Boolean t ? (t ? 1 : 0) : ((Number) b).doubleValue();
            return Double.compare(x, y);
        }
        if (PyTypes.isString(a) && PyTypes.isString(b)) {
            return java.util.Arrays.compare(a.toString().codePoints().toArray(), b.toString().codePoints().toArray());
        }
        if (a instanceof List<?> x && b instanceof List<?> y) {
            Iterator<?> i = x.iterator();
            Iterator<?> j = y.iterator();
            while (i.hasNext() && j.hasNext()) {
                Object p = i.next();
                Object q = j.next();
                if (!PyTypes.equal(p, q)) {
                    return compare(op, p, q);
                }
            }
            return Integer.compare(x.size(), y.size());
        }
        throw new ELException("'" + op + "' not supported between instances of '" + PyTypes.typeName(a) + "' and '"
                + PyTypes.typeName(b) + "'");
    }
}
