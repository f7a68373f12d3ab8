package io.tnsr.engine.kvcache;

import java.util.Locale;

/**
 * How a KV cache stores keys and values: as floats, exactly as computed (the default), or as IEEE half-precision
 * numbers, rounded to nearest even once when stored (as llama.cpp's default F16 cache does): half the memory per
 * position, so twice the positions in the same capacity, and half the bytes that attention reads per token.
 */
public enum KvCacheType {
    F32(Float.BYTES),
    F16(2);

    private final int bytes;

    KvCacheType(int bytes) {
        this.bytes = bytes;
    }

    /** Bytes per stored key or value element. */
    public int bytes() {
        return bytes;
    }

    /** The lower-case name used by flags and config files: {@code f32} or {@code f16}. */
    public String key() {
        return name().toLowerCase(Locale.ROOT);
    }

    /**
     * The type called {@code name} (f32 or f16, any case); otherwise an error naming {@code where} it was given (an
     * option, a config key), the value and the choices.
     */
    public static KvCacheType parse(String name, String where) {
        for (KvCacheType t : values()) {
            if (t.name().equalsIgnoreCase(name.trim())) {
                return t;
            }
        }
        throw new IllegalArgumentException(where + ": unknown KV cache type '" + name + "': f32 or f16");
    }
}
