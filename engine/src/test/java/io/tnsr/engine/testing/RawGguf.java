package io.tnsr.engine.testing;

import io.tnsr.engine.gguf.GgufFile;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * GGUF bytes written exactly as told, little-endian, however wrong: for the crafted files the reader must refuse
 * (lengths beyond the file, arrays nested too deep, tensor offsets that overflow), which no GgufWriter would write.
 */
public final class RawGguf {
    private final ByteArrayOutputStream out = new ByteArrayOutputStream();
    private final ByteBuffer scratch = ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN);

    /** Magic, version 3, the tensor count and the metadata count. */
    public RawGguf header(long tensors, long keys) {
        return i32(GgufFile.MAGIC).i32(3).u64(tensors).u64(keys);
    }

    public RawGguf i32(int v) {
        out.write(scratch.clear().putInt(v).array(), 0, 4);
        return this;
    }

    public RawGguf u64(long v) {
        out.write(scratch.clear().putLong(v).array(), 0, 8);
        return this;
    }

    /** A GGUF string: its u64 byte length, then its UTF-8 bytes. */
    public RawGguf string(String s) {
        byte[] b = s.getBytes(StandardCharsets.UTF_8);
        u64(b.length);
        out.write(b, 0, b.length);
        return this;
    }

    public RawGguf zeros(int n) {
        out.write(new byte[n], 0, n);
        return this;
    }

    /** Zeros up to the next multiple of {@code alignment}. */
    public RawGguf pad(int alignment) {
        return zeros((alignment - out.size() % alignment) % alignment);
    }

    /** A key whose value is arrays nested {@code levels} deep, the innermost an empty array of u8. */
    public RawGguf nestedArrays(String key, int levels) {
        string(key).i32(9);
        for (int i = 1; i < levels; i++) {
            i32(9).u64(1);
        }
        return i32(0).u64(0);
    }

    public Path write(Path p) throws IOException {
        return Files.write(p, out.toByteArray());
    }
}
