package io.tnsr.engine.gguf;

import java.nio.file.Path;
import java.util.Collections;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * The key/value metadata of a GGUF file, with typed getters that name the file and the key when a value is
 * missing or of the wrong type.
 *
 * <p>Values are held as: {@code Long} for every integer type (unsigned 64-bit values above
 * {@code Long.MAX_VALUE} wrap), {@code Double} for FLOAT32/FLOAT64, {@code Boolean}, {@code String}, and for
 * arrays {@code long[]}, {@code float[]} (FLOAT32), {@code double[]} (FLOAT64), {@code boolean[]},
 * {@code String[]} or {@code Object[]} (arrays of arrays).
 */
public final class GgufMetadata {
    /** The model's chat template: Jinja text, as Hugging Face's {@code tokenizer_config.json} has it. */
    public static final String KEY_CHAT_TEMPLATE = "tokenizer.chat_template";

    private final Path file;
    private final Map<String, Object> values;

    GgufMetadata(Path file, Map<String, Object> values) {
        this.file = file;
        this.values = Collections.unmodifiableMap(values);
    }

    public boolean has(String key) {
        return values.containsKey(key);
    }

    public Set<String> keys() {
        return values.keySet();
    }

    /** The raw value, or null. */
    public Object get(String key) {
        return values.get(key);
    }

    public String getString(String key) {
        return as(key, String.class);
    }

    public String getString(String key, String defaultValue) {
        return has(key) ? getString(key) : defaultValue;
    }

    /** The chat template ({@value #KEY_CHAT_TEMPLATE}), if the model has one. */
    public Optional<String> chatTemplate() {
        return has(KEY_CHAT_TEMPLATE) ? Optional.of(getString(KEY_CHAT_TEMPLATE)) : Optional.empty();
    }

    public long getLong(String key) {
        return as(key, Long.class);
    }

    public int getInt(String key) {
        long v = getLong(key);
        if (v < Integer.MIN_VALUE || v > Integer.MAX_VALUE) {
            throw new GgufException(file, "metadata key '" + key + "' = " + v + " does not fit a 32-bit integer");
        }
        return (int) v;
    }

    public int getInt(String key, int defaultValue) {
        return has(key) ? getInt(key) : defaultValue;
    }

    /** A u32 id where 0xFFFFFFFF (as stored by converters for "none") means absent: returns -1 then. */
    public int getTokenId(String key) {
        if (!has(key)) {
            return -1;
        }
        long v = getLong(key);
        return v == 0xFFFFFFFFL || v < 0 ? -1 : (int) v;
    }

    public float getFloat(String key) {
        Object v = require(key);
        if (v instanceof Double d) {
            return d.floatValue();
        }
        if (v instanceof Long l) {
            return l;
        }
        throw wrongType(key, "a number", v);
    }

    public float getFloat(String key, float defaultValue) {
        return has(key) ? getFloat(key) : defaultValue;
    }

    public boolean getBoolean(String key, boolean defaultValue) {
        return has(key) ? as(key, Boolean.class) : defaultValue;
    }

    public String[] getStringArray(String key) {
        return as(key, String[].class);
    }

    public float[] getFloatArray(String key) {
        Object v = require(key);
        if (v instanceof float[] f) {
            return f;
        }
        if (v instanceof double[] d) {
            float[] f = new float[d.length];
            for (int i = 0; i < d.length; i++) {
                f[i] = (float) d[i];
            }
            return f;
        }
        throw wrongType(key, "an array of floats", v);
    }

    /** An array of integers of any width, as ints (values must fit). */
    public int[] getIntArray(String key) {
        long[] l = as(key, long[].class);
        int[] r = new int[l.length];
        for (int i = 0; i < l.length; i++) {
            r[i] = (int) l[i];
        }
        return r;
    }

    /** Length of an array value. */
    public int arrayLength(String key) {
        Object v = require(key);
        if (v instanceof Object[] a) {
            return a.length;
        }
        if (v instanceof long[] a) {
            return a.length;
        }
        if (v instanceof float[] a) {
            return a.length;
        }
        if (v instanceof double[] a) {
            return a.length;
        }
        if (v instanceof boolean[] a) {
            return a.length;
        }
        throw wrongType(key, "an array", v);
    }

    private Object require(String key) {
        Object v = values.get(key);
        if (v == null) {
            throw new GgufException(file, "metadata key '" + key + "' is missing");
        }
        return v;
    }

    private <T> T as(String key, Class<T> type) {
        Object v = require(key);
        if (!type.isInstance(v)) {
            throw wrongType(key, type.getSimpleName(), v);
        }
        return type.cast(v);
    }

    private GgufException wrongType(String key, String expected, Object v) {
        return new GgufException(file, "metadata key '" + key + "' should be " + expected + " but is "
                + v.getClass().getSimpleName());
    }
}
