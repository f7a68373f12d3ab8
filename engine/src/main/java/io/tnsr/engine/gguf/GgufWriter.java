package io.tnsr.engine.gguf;

import io.tnsr.engine.util.TaskProgress;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

/**
 * Writes GGUF files: used by the synthetic model generator and by tests that need files of any shape
 * (or deliberately broken ones).
 *
 * <pre>{@code
 * GgufWriter w = new GgufWriter();
 * w.putString("general.architecture", "llama");
 * w.putU32("llama.block_count", 2);
 * w.addTensor("token_embd.weight", GgmlType.F32, new long[] {dim, vocab}, buf -> fillRandom(buf));
 * w.write(path);   // written to a temporary file, then moved into place
 * }</pre>
 * Tensor bytes are produced by the {@link TensorFiller} at write time, one tensor at a time, so a large
 * model is never held in memory whole.
 */
public final class GgufWriter {

    /** Produces a tensor's bytes: fills {@code dst} (little-endian, exactly the tensor's byte size) completely. */
    @FunctionalInterface
    public interface TensorFiller {
        void fill(ByteBuffer dst);
    }

    private record Entry(String key, int type, Object value) { }

    private record Tensor(String name, GgmlType type, long[] dims, long bytes, TensorFiller filler) { }

    private final List<Entry> metadata = new ArrayList<>();
    private final List<Tensor> tensors = new ArrayList<>();
    private int version = 3;
    private int alignment = GgufFile.DEFAULT_ALIGNMENT;

    /** GGUF version to write (2 or 3; they differ only in the version number for what we write). */
    public GgufWriter version(int version) {
        this.version = version;
        return this;
    }

    public GgufWriter putString(String key, String value) {
        metadata.add(new Entry(key, 8, value));
        return this;
    }

    public GgufWriter putU32(String key, long value) {
        metadata.add(new Entry(key, 4, value));
        return this;
    }

    public GgufWriter putI32(String key, int value) {
        metadata.add(new Entry(key, 5, (long) value));
        return this;
    }

    public GgufWriter putF32(String key, float value) {
        metadata.add(new Entry(key, 6, value));
        return this;
    }

    public GgufWriter putBool(String key, boolean value) {
        metadata.add(new Entry(key, 7, value));
        return this;
    }

    public GgufWriter putStringArray(String key, String[] values) {
        metadata.add(new Entry(key, 9, values.clone()));
        return this;
    }

    public GgufWriter putFloatArray(String key, float[] values) {
        metadata.add(new Entry(key, 9, values.clone()));
        return this;
    }

    public GgufWriter putIntArray(String key, int[] values) {
        metadata.add(new Entry(key, 9, values.clone()));
        return this;
    }

    /** Sets {@code general.alignment} (a power of two); the default is 32. */
    public GgufWriter alignment(int alignment) {
        if (alignment <= 0 || Integer.bitCount(alignment) != 1) {
            throw new IllegalArgumentException("alignment must be a power of two: " + alignment);
        }
        this.alignment = alignment;
        putU32("general.alignment", alignment);
        return this;
    }

    /** Adds a tensor with ggml dims (innermost first) whose bytes {@code filler} produces at write time. */
    public GgufWriter addTensor(String name, GgmlType type, long[] dims, TensorFiller filler) {
        long elements = 1;
        for (long d : dims) {
            elements = Math.multiplyExact(elements, d);
        }
        long bytes = type.bytesFor(elements);
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("tensor " + name + " is too large to write: " + bytes + " bytes");
        }
        tensors.add(new Tensor(name, type, dims.clone(), bytes, filler));
        return this;
    }

    /** Adds an F32 tensor with the given values. */
    public GgufWriter addF32(String name, long[] dims, float[] values) {
        return addTensor(name, GgmlType.F32, dims, dst -> {
            for (float v : values) {
                dst.putFloat(v);
            }
        });
    }

    /**
     * Writes the file atomically: a temporary file in the same folder (created with the umask's permissions, as the
     * file itself would be), then a move; on any failure the temporary file is deleted and {@code path} is untouched.
     */
    public void write(Path path) throws IOException {
        if (Files.isDirectory(path)) {
            throw new java.nio.file.FileSystemException(path.toString(), null, "is a directory, not a file to write");
        }
        Path dir = path.toAbsolutePath().getParent();
        if (dir != null) {
            Files.createDirectories(dir);
        }
        Path tmp = path.toAbsolutePath().resolveSibling("." + path.getFileName() + "." + ProcessHandle.current().pid() + ".tmp");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            Out out = new Out(ch);
            out.i32(GgufFile.MAGIC);
            out.i32(version);
            out.i64(tensors.size());
            out.i64(metadata.size());
            for (Entry e : metadata) {
                out.string(e.key);
                out.i32(e.type);
                writeValue(out, e.type, e.value);
            }
            long offset = 0;
            for (Tensor t : tensors) {
                out.string(t.name);
                out.i32(t.dims.length);
                for (long d : t.dims) {
                    out.i64(d);
                }
                out.i32(t.type.id());
                out.i64(offset);
                offset = align(offset + t.bytes);
            }
            out.pad(align(out.position()) - out.position());
            try (TaskProgress progress = TaskProgress.start("writing " + path.getFileName(), offset, TaskProgress.MIB)) {
                for (Tensor t : tensors) {
                    ByteBuffer data = ByteBuffer.allocate((int) t.bytes).order(ByteOrder.LITTLE_ENDIAN);
                    t.filler.fill(data);
                    if (data.hasRemaining()) {
                        throw new IllegalStateException("tensor " + t.name + ": filler left " + data.remaining()
                                + " of " + t.bytes + " bytes unwritten");
                    }
                    data.flip();
                    out.bytes(data);
                    out.pad(align(out.position()) - out.position());
                    progress.stepBy(align(t.bytes));
                }
            }
            out.flush();
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
        try {
            Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException | RuntimeException e) {
            Files.deleteIfExists(tmp);
            throw e;
        }
    }

    private long align(long v) {
        return (v + alignment - 1) / alignment * alignment;
    }

    private static void writeValue(Out out, int type, Object value) throws IOException {
        switch (type) {
            case 4, 5 -> out.i32((int) (long) (Long) value);
            case 6 -> out.f32((Float) value);
            case 7 -> out.u8((Boolean) value ? 1 : 0);
            case 8 -> out.string((String) value);
            case 9 -> {
                if (value instanceof String[] a) {
                    out.i32(8);
                    out.i64(a.length);
                    for (String s : a) {
                        out.string(s);
                    }
                } else if (value instanceof float[] a) {
                    out.i32(6);
                    out.i64(a.length);
                    for (float f : a) {
                        out.f32(f);
                    }
                } else if (value instanceof int[] a) {
                    out.i32(5);
                    out.i64(a.length);
                    for (int i : a) {
                        out.i32(i);
                    }
                } else {
                    throw new IllegalArgumentException("unsupported array " + value.getClass());
                }
            }
            default -> throw new IllegalArgumentException("unsupported metadata type " + type);
        }
    }

    /** Buffered little-endian channel writer. */
    private static final class Out {
        private final FileChannel ch;
        private final ByteBuffer buf = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
        private long written;

        Out(FileChannel ch) {
            this.ch = ch;
        }

        long position() {
            return written + buf.position();
        }

        private void room(int n) throws IOException {
            if (buf.remaining() < n) {
                flush();
            }
        }

        void flush() throws IOException {
            buf.flip();
            while (buf.hasRemaining()) {
                written += ch.write(buf);
            }
            buf.clear();
        }

        void u8(int v) throws IOException {
            room(1);
            buf.put((byte) v);
        }

        void i32(int v) throws IOException {
            room(4);
            buf.putInt(v);
        }

        void i64(long v) throws IOException {
            room(8);
            buf.putLong(v);
        }

        void f32(float v) throws IOException {
            room(4);
            buf.putFloat(v);
        }

        void string(String s) throws IOException {
            byte[] b = s.getBytes(StandardCharsets.UTF_8);
            i64(b.length);
            bytes(ByteBuffer.wrap(b));
        }

        void pad(long n) throws IOException {
            for (long i = 0; i < n; i++) {
                u8(0);
            }
        }

        void bytes(ByteBuffer src) throws IOException {
            while (src.hasRemaining()) {
                if (!buf.hasRemaining()) {
                    flush();
                }
                int n = Math.min(buf.remaining(), src.remaining());
                ByteBuffer slice = src.duplicate();
                slice.limit(slice.position() + n);
                buf.put(slice);
                src.position(src.position() + n);
            }
        }
    }
}
