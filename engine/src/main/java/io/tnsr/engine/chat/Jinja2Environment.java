package io.tnsr.engine.chat;

import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.el.JinjavaObjectUnwrapper;
import com.hubspot.jinjava.el.TruthyTypeConverter;
import com.hubspot.jinjava.interpret.Context;
import com.hubspot.jinjava.interpret.AutoCloseableSupplier.AutoCloseableImpl;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.NullValue;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.exptest.ExpTest;
import com.hubspot.jinjava.lib.expression.ExpressionStrategy;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.lib.tag.IfTag;
import com.hubspot.jinjava.lib.tag.Tag;
import com.hubspot.jinjava.loader.ResourceNotFoundException;
import com.hubspot.jinjava.mode.ExecutionMode;
import com.hubspot.jinjava.objects.SafeString;
import com.hubspot.jinjava.tree.Node;
import com.hubspot.jinjava.tree.TagNode;
import com.hubspot.jinjava.tree.output.RenderedOutputNode;
import com.hubspot.jinjava.tree.parse.ExpressionToken;
import java.time.Clock;
import java.time.ZonedDateTime;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Predicate;
import jinjava.de.odysseus.el.ExpressionFactoryImpl;
import jinjava.de.odysseus.el.tree.TreeStore;
import jinjava.de.odysseus.el.tree.impl.Cache;
import jinjava.javax.el.CompositeELResolver;
import jinjava.javax.el.ELException;
import jinjava.javax.el.ExpressionFactory;

/**
 * One Jinjava engine set up to behave as Python jinja2 does in Hugging Face transformers'
 * {@code apply_chat_template}: the globals and filters it adds, Python's methods and printing, and errors
 * that stop rendering. Shared by every {@link ChatTemplate}; Jinjava is safe for concurrent renders, and each
 * render gets its own context.
 *
 * <p>What differs from a stock Jinjava, and why:
 * <ul>
 *   <li>whitespace: {@link Jinja2Source} applies jinja2's trim_blocks / lstrip_blocks / {@code -} rules to the
 *       text first, so Jinjava's own trimming is off;</li>
 *   <li>{@link PyMethodResolver} first in the EL resolver chain: Python's str / dict / list methods;</li>
 *   <li>{@link Jinja2Filters}: tojson, trim, length, items, ... as jinja2 and Hugging Face define them;</li>
 *   <li>{@code raise_exception(msg)} and {@code strftime_now(fmt)} are functions and also variables, so
 *       {@code strftime_now is defined} is true as it is for a jinja2 global;</li>
 *   <li>{@code is iterable} / {@code is sequence} hold for strings, {@code is callable} for those globals;</li>
 *   <li>{@code for x in xs if cond} filters before looping, {@code for ... else} ({@link Jinja2ForTag});</li>
 *   <li>Hugging Face's {@code {% generation %}} block tag;</li>
 *   <li>{@code {{ v }}} prints Python's {@code str(v)} (True, 1.5, ['a']) and never renders its output again
 *       as a template (Jinjava's "nested interpretation" would run template code found in a message);</li>
 *   <li>{@link Jinja2Parser}: jinja2's precedence of {@code not}, filters and tests, Python's operators and
 *       truth, slices with steps;</li>
 *   <li>{@code if} and {@code elif} use Python's truth (Jinjava's treats the string "false" as false);</li>
 *   <li>an unknown filter or test is an error (Jinjava would give None);</li>
 *   <li>the first error stops the render, as jinja2 raises it; Jinjava would log it and go on;</li>
 *   <li>nothing is loaded from outside the template ({@code include}, {@code import}, {@code from},
 *       {@code extends} are disabled, as Hugging Face's environment has no loader), and Jinjava's
 *       {@code render} filter, which would run a message as template code, is off.</li>
 * </ul>
 */
final class Jinja2Environment {
    /** Where a render keeps its {@link RenderState} in the Jinjava context: not a name a template can write. */
    private static final String STATE_KEY = "chat template render state";

    static final Jinja2Environment INSTANCE = new Jinja2Environment();

    private final Jinjava jinjava;
    private final JinjavaConfig config;

    private Jinja2Environment() {
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PyMethodResolver());
        resolver.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_WRITE);
        config = JinjavaConfig.newBuilder()
                .withLocale(Locale.ENGLISH)
                .withTrimBlocks(false)
                .withLstripBlocks(false)
                .withNestedInterpretationEnabled(false)
                .withFailOnUnknownTokens(false)
                .withElResolver(resolver)
                .withExecutionMode(new Jinja2ExecutionMode())
                .withObjectUnwrapper(new NoneUnwrapper())
                .withDisabled(Map.of(Context.Library.TAG, Set.of("include", "import", "from", "extends"),
                        Context.Library.FILTER, Set.of("render")))
                .withLegacyOverrides(LegacyOverrides.newBuilder()
                        .withEvaluateMapKeys(true)
                        .withIterateOverMapKeys(true)
                        .withUsePyishObjectMapper(true)
                        .withKeepNullableLoopValues(true)
                        .withUseNaturalOperatorPrecedence(true)
                        .withParseWhitespaceControlStrictly(true)
                        .build())
                .build();
        jinjava = new Jinja2Jinjava(config);
        jinjava.setResourceLocator((name, charset, interpreter) -> {
            throw new ResourceNotFoundException("a chat template cannot load other templates: " + name);
        });
        Context g = jinjava.getGlobalContext();
        for (Filter f : Jinja2Filters.all()) {
            g.registerFilter(f);
        }
        g.registerExpTest(test("iterable", v -> v instanceof Iterable || v instanceof Map || PyTypes.isString(v)));
        g.registerExpTest(test("sequence", v -> v instanceof List || v instanceof Map || PyTypes.isString(v)));
        g.registerExpTest(test("callable", v -> v instanceof PyFunction));
        g.registerFunction(new ELFunctionDefinition("", "raise_exception", Jinja2Environment.class, "raiseException", Object.class));
        g.registerFunction(new ELFunctionDefinition("", "strftime_now", Jinja2Environment.class, "strftimeNow", Object.class));
        g.registerExpTest(test("truthy", PyTypes::truthy));
        g.registerTag(new Jinja2ForTag());
        g.registerTag(new PyIfTag());
        g.registerTag(new GenerationTag());
    }

    /**
     * Parses {@code source} (already through {@link Jinja2Source}) to find syntax errors without rendering:
     * any error the parse reports fails (a stray end tag is only a warning to Jinjava, an error to jinja2).
     *
     * @throws ChatTemplateException naming the first error and its line
     */
    void check(String source) {
        Context context = new Context(jinjava.getGlobalContextCopy(), Map.of(), config.getDisabled());
        JinjavaInterpreter interpreter = new JinjavaInterpreter(jinjava, context, config);
        try (AutoCloseableImpl<JinjavaInterpreter> current = JinjavaInterpreter.closeablePushCurrent(interpreter).get()) {
            current.value().parse(source);
            for (TemplateError e : interpreter.getErrors()) {
                throw new ChatTemplateException("chat template syntax error" + at(e.getLineno()) + ": " + e.getMessage());
            }
        }
    }

    /**
     * Renders {@code source} with {@code variables}.
     *
     * @throws ChatTemplateException the template's {@code raise_exception} message, or what failed and where
     */
    String render(String source, Map<String, Object> variables, Clock clock) {
        RenderState state = new RenderState(clock);
        Map<String, Object> bindings = new HashMap<>(variables);
        bindings.put("raise_exception", new PyFunction("raise_exception"));
        bindings.put("strftime_now", new PyFunction("strftime_now"));
        bindings.put(STATE_KEY, state);
        Context context = new RootContext(jinjava.getGlobalContextCopy(), bindings, config.getDisabled());
        JinjavaInterpreter interpreter = new Interpreter(jinjava, context, config, state);
        try (AutoCloseableImpl<JinjavaInterpreter> current = JinjavaInterpreter.closeablePushCurrent(interpreter).get()) {
            String out = current.value().render(source);
            if (state.raised != null) {
                throw ChatTemplateException.raised(state.raised);
            }
            return out;
        } catch (ChatTemplateException e) {
            throw e;
        } catch (RuntimeException e) {
            if (state.raised != null) {
                throw ChatTemplateException.raised(state.raised);
            }
            if (state.error != null) {
                throw failure(at(state.error.getLineno()), state.error.getMessage(), e);
            }
            throw failure(at(interpreter.getLineNumber()), e.getMessage(), e);
        }
    }

    private static ChatTemplateException failure(String at, String message, Throwable cause) {
        return new ChatTemplateException("chat template failed" + at + ": " + message, cause);
    }

    /** " at line N", or "" when Jinjava does not know the line. */
    private static String at(int line) {
        return line > 0 ? " at line " + line : "";
    }

    /** {@code raise_exception(message)}: stops the render; the template's message becomes the exception's. */
    public static Object raiseException(Object message) {
        String text = PyTypes.str(message);
        RenderState s = state();
        if (s.raised == null) {
            s.raised = text;
        }
        throw new IllegalStateException(text);
    }

    /** {@code strftime_now(format)}: the render's clock, now, formatted as Python's strftime does. */
    public static String strftimeNow(Object format) {
        return Strftime.format(ZonedDateTime.now(state().clock), PyTypes.str(format));
    }

    private static RenderState state() {
        return (RenderState) JinjavaInterpreter.getCurrent().getContext().get(STATE_KEY);
    }

    private static ExpTest test(String name, Predicate<Object> p) {
        return new ExpTest() {
            @Override
            public String getName() {
                return name;
            }

            @Override
            public boolean evaluate(Object var, JinjavaInterpreter interpreter, Object... args) {
                return p.test(var);
            }
        };
    }

    /** Jinjava with {@link Jinja2Parser}'s grammar and Python's truth for {@code not}, {@code and}, {@code or}. */
    private static final class Jinja2Jinjava extends Jinjava {
        private final ExpressionFactory expressions = new ExpressionFactoryImpl(
                new TreeStore(new Jinja2Parser.SyntaxBuilder(), new Cache(1000)), new PyTypeConverter());

        Jinja2Jinjava(JinjavaConfig config) {
            super(config);
        }

        @Override
        public ExpressionFactory getExpressionFactory() {
            return expressions;
        }
    }

    /** Python's truth: "false" is a true string, as every non-empty string is (Jinjava's converter says false). */
    private static final class PyTypeConverter extends TruthyTypeConverter {
        private static final long serialVersionUID = 1L;

        @Override
        protected Boolean coerceToBoolean(Object value) {
            return PyTypes.truthy(value);
        }
    }

    /**
     * Hugging Face's {@code {% generation %}...{% endgeneration %}}, which marks the assistant's text for
     * training masks: rendering, it is just its body.
     */
    private static final class GenerationTag implements Tag {
        private static final long serialVersionUID = 1L;

        @Override
        public String getName() {
            return "generation";
        }

        @Override
        public String interpret(TagNode tagNode, JinjavaInterpreter interpreter) {
            StringBuilder b = new StringBuilder();
            for (Node n : tagNode.getChildren()) {
                b.append(n.render(interpreter).getValue());
            }
            return b.toString();
        }
    }

    /** {@code if} / {@code elif} with Python's truth of the condition. */
    private static final class PyIfTag extends IfTag {
        private static final long serialVersionUID = 1L;

        @Override
        public boolean isPositiveIfElseNode(TagNode tagNode, JinjavaInterpreter interpreter) {
            return PyTypes.truthy(interpreter.resolveELExpression(tagNode.getHelpers(), tagNode.getLineNumber(),
                    tagNode.getStartPosition()));
        }
    }

    /** A loop variable that is None is stored as Jinjava's NullValue (so it hides an outer one) and read as None. */
    private static final class NoneUnwrapper extends JinjavaObjectUnwrapper {
        @Override
        public Object unwrapObject(Object o) {
            return o instanceof NullValue ? null : super.unwrapObject(o);
        }
    }

    /**
     * The context a render starts from: a filter or test the template names but no library has is an error, as
     * in jinja2 (Jinjava would make the expression None).
     */
    private static final class RootContext extends Context {
        RootContext(Context parent, Map<String, ?> bindings, Map<Context.Library, Set<String>> disabled) {
            super(parent, bindings, disabled);
        }

        @Override
        public Filter getFilter(String name) {
            Filter f = super.getFilter(name);
            if (f == null) {
                throw new ELException("No filter named '" + name + "'.");
            }
            return f;
        }

        @Override
        public ExpTest getExpTest(String name) {
            ExpTest t = super.getExpTest(name);
            if (t == null) {
                throw new ELException("No test named '" + name + "'.");
            }
            return t;
        }
    }

    /**
     * Stops the render at its first fatal error, as jinja2 raises it (Jinjava would record it and go on), keeping
     * that error for the message; warnings (such as an attribute a value lacks, None to jinja2) are dropped.
     */
    private static final class Interpreter extends JinjavaInterpreter {
        private final RenderState state;

        Interpreter(Jinjava jinjava, Context context, JinjavaConfig config, RenderState state) {
            super(jinjava, context, config);
            this.state = state;
        }

        @Override
        public void addError(TemplateError error) {
            if (error == null || error.getSeverity() != TemplateError.ErrorType.FATAL) {
                return;
            }
            if (state.error == null) {
                state.error = error;
            }
            throw new RenderStopped(error.getMessage());
        }
    }

    /** Unwinds a render from its first error. */
    private static final class RenderStopped extends RuntimeException {
        private static final long serialVersionUID = 1L;

        RenderStopped(String message) {
            super(message, null, false, false);
        }
    }

    /** What one render carries besides the template's variables. */
    static final class RenderState {
        final Clock clock;
        String raised;
        TemplateError error;

        RenderState(Clock clock) {
            this.clock = clock;
        }
    }

    /** A global function as a value, so that {@code name is defined} holds; prints as Python prints a function. */
    record PyFunction(String name) {
        @Override
        public String toString() {
            return "<function " + name + ">";
        }
    }

    /** Jinjava's default mode, with expressions printed as Python's {@code str()}. */
    private static final class Jinja2ExecutionMode implements ExecutionMode {
        @Override
        public void prepareContext(Context context) {
            context.setExpressionStrategy(new PyPrint());
        }
    }

    /** {@code {{ expr }}}: Python's {@code str(value)}, never interpreted again. */
    private static final class PyPrint implements ExpressionStrategy {
        private static final long serialVersionUID = 1L;

        @Override
        public RenderedOutputNode interpretOutput(ExpressionToken master, JinjavaInterpreter interpreter) {
            Object v = interpreter.resolveELExpression(master.getExpr(), master.getLineNumber());
            return new RenderedOutputNode(v instanceof SafeString ? v.toString() : PyTypes.str(v));
        }
    }
}
