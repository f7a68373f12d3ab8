package io.tnsr.engine.util;

import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonLocation;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.util.DefaultIndenter;
import com.fasterxml.jackson.core.util.DefaultPrettyPrinter;
import com.fasterxml.jackson.core.util.Separators;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonMappingException;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.ObjectWriter;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.cfg.CoercionAction;
import com.fasterxml.jackson.databind.cfg.CoercionInputShape;
import com.fasterxml.jackson.databind.type.LogicalType;
import com.fasterxml.jackson.databind.exc.MismatchedInputException;
import com.fasterxml.jackson.databind.exc.UnrecognizedPropertyException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The one Jackson mapper every JSON file and line goes through: unknown keys are errors (a typo in a config file must
 * not be ignored), a missing value for a primitive is an error, a number or a boolean written as a string ("16") is
 * an error rather than quietly converted, anything after the one value a file or body holds is an error, and output
 * keeps the order in which keys were put.
 */
public final class Jackson {
    /** Reads and writes; thread-safe once configured. */
    public static final ObjectMapper MAPPER = strictScalars(new ObjectMapper()
            .enable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)
            .enable(DeserializationFeature.FAIL_ON_NULL_FOR_PRIMITIVES)
            .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
            .disable(SerializationFeature.FAIL_ON_EMPTY_BEANS));

    private static ObjectMapper strictScalars(ObjectMapper m) {
        for (LogicalType t : new LogicalType[] {LogicalType.Integer, LogicalType.Float, LogicalType.Boolean}) {
            m.coercionConfigFor(t).setCoercion(CoercionInputShape.String, CoercionAction.Fail);
        }
        return m;
    }

    /** Spaces after ':' and ',', nothing else: {"text": "Hi", "ids": [1, 2]}. */
    private static final Separators SPACED = Separators.createDefaultInstance()
            .withObjectFieldValueSpacing(Separators.Spacing.AFTER)
            .withObjectEntrySpacing(Separators.Spacing.AFTER)
            .withArrayValueSpacing(Separators.Spacing.AFTER)
            .withObjectEmptySeparator("")
            .withArrayEmptySeparator("");

    private static final ObjectWriter LINE = MAPPER.writer(new DefaultPrettyPrinter(SPACED)
            .withObjectIndenter(new DefaultPrettyPrinter.NopIndenter())
            .withArrayIndenter(new DefaultPrettyPrinter.NopIndenter()));

    private static final ObjectWriter PRETTY = MAPPER.writer(new TwoLevels());

    /**
     * Objects of the outer two levels with one entry per line, indented by two spaces; anything deeper on one line:
     * one row per metric, diffable and greppable.
     */
    private static final class TwoLevels extends DefaultPrettyPrinter {
        private static final long serialVersionUID = 1L;

        TwoLevels() {
            indentObjectsWith(new DefaultIndenter("  ", "\n") {
                private static final long serialVersionUID = 1L;

                @Override
                public void writeIndentation(JsonGenerator g, int level) throws IOException {
                    if (level <= 2) {
                        super.writeIndentation(g, level);
                    } else {
                        g.writeRaw(' ');
                    }
                }
            });
            indentArraysWith(FixedSpaceIndenter.instance);
            _objectFieldValueSeparatorWithSpaces = ": ";
        }

        private TwoLevels(TwoLevels base) {
            super(base);
        }

        @Override
        public TwoLevels createInstance() {
            return new TwoLevels(this);
        }

        @Override
        public void writeEndObject(JsonGenerator g, int entries) throws IOException {
            if (_nesting > 2) {
                _nesting--;
                g.writeRaw(" }");
            } else {
                super.writeEndObject(g, entries);
            }
        }
    }

    private Jackson() {
    }

    /** One line of JSON, a space after each ':' and ','. */
    public static String write(Object value) {
        try {
            return LINE.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Objects of the outer two levels one entry per line, indented by two spaces; deeper values on their line. */
    public static String pretty(Object value) {
        try {
            return PRETTY.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * What was wrong with a JSON input, in one line for the user: an unknown key with the known ones; a value of the
     * wrong kind, led by the key it is in when that is known ("ring_size: must be a number at line 3, column 16");
     * else "not valid JSON: " and the {@link #problem parser's complaint}, led by the key when one is known.
     */
    public static String describe(JsonProcessingException e) {
        if (e instanceof UnrecognizedPropertyException u) {
            return "unknown key '" + u.getPropertyName() + "' (known: " + u.getKnownPropertyIds().stream()
                    .map(String::valueOf).sorted().collect(Collectors.joining(", ")) + ")";
        }
        String key = e instanceof JsonMappingException m ? key(m) : "";
        if (e instanceof MismatchedInputException m && m.getTargetType() != null && !trailing(e)) {
            String kind = kind(m.getTargetType());
            return (key.isEmpty() ? "expected " + kind : key + ": must be " + kind) + at(e.getLocation());
        }
        return (key.isEmpty() ? "not valid JSON: " : key + ": ") + problem(e);
    }

    /**
     * What the JSON parser met and where, in words for a user or a client: "unexpected end of input at line 1, column
     * 24". Jackson's own message names its token kinds and features, and where a structure began as a "[Source: ...]":
     * those parts are left out.
     */
    public static String problem(JsonProcessingException e) {
        return what(e) + at(e.getLocation());
    }

    /** " at line L, column C", or nothing where the location is not known. */
    private static String at(JsonLocation where) {
        return where == null || where.getLineNr() < 1 ? "" : " at line " + where.getLineNr() + ", column " + where.getColumnNr();
    }

    /**
     * {@link #problem} for JSON read one line of a file at a time, whose caller names the file's line: "unexpected end
     * of input at column 24".
     */
    public static String problemInLine(JsonProcessingException e) {
        JsonLocation where = e.getLocation();
        return where == null || where.getColumnNr() < 1 ? what(e) : what(e) + " at column " + where.getColumnNr();
    }

    private static String what(JsonProcessingException e) {
        String what = e.getOriginalMessage() == null ? "unreadable input" : e.getOriginalMessage();
        if (what.startsWith("Unexpected end-of-input")) {
            what = "unexpected end of input";
        } else if (trailing(e)) {
            what = "more data after the JSON value";
        }
        for (String tail : List.of("\n", ": was expecting (JSON String", " (for ", " (start marker at", ": enable `",
                " at [Source", "[Source")) {
            int at = what.indexOf(tail);
            if (at >= 0) {
                what = what.substring(0, at);
            }
        }
        what = what.replaceAll("\\(\\(CTRL-CHAR, code (\\d+)\\)\\)", "(control character $1)")
                .replaceAll(" \\(code \\d+\\)", "").strip();
        if (what.isEmpty()) {
            what = "unreadable input";
        }
        return Character.toLowerCase(what.charAt(0)) + what.substring(1);
    }

    /** Data after the one value ({@link DeserializationFeature#FAIL_ON_TRAILING_TOKENS}), which Jackson reports as a mismatch. */
    private static boolean trailing(JsonProcessingException e) {
        return e.getOriginalMessage() != null && e.getOriginalMessage().startsWith("Trailing token");
    }

    /** The path of keys and indexes to where a mapping failed ("stages[1].host"), or "" if none is known. */
    private static String key(JsonMappingException m) {
        StringBuilder key = new StringBuilder();
        for (JsonMappingException.Reference r : m.getPath()) {
            if (r.getFieldName() != null) {
                key.append(key.length() == 0 ? "" : ".").append(r.getFieldName());
            } else if (r.getIndex() >= 0) {
                key.append('[').append(r.getIndex()).append(']');
            }
        }
        return key.toString();
    }

    /** What a value of {@code type} looks like in JSON, for an error: "a number", "an object", ... */
    public static String kind(Class<?> type) {
        if (Number.class.isAssignableFrom(type) || type == int.class || type == long.class || type == double.class
                || type == float.class || type == short.class || type == byte.class) {
            return "a number";
        }
        if (type == boolean.class || type == Boolean.class) {
            return "true or false";
        }
        if (type == String.class || type.isEnum()) {
            return "a string";
        }
        if (type.isArray() || java.util.Collection.class.isAssignableFrom(type)) {
            return "a list ([...])";
        }
        return "an object ({...})";
    }
}
