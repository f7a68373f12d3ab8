package io.tnsr.engine.gguf;

import io.tnsr.engine.memory.MappedFile;
import io.tnsr.engine.memory.Region;
import io.tnsr.engine.memory.RegionTooLargeException;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A GGUF (v2 or v3) file: its metadata, its tensor table, and memory-mapped access to single tensors.
 *
 * <p>Opening reads only the header, the metadata and the tensor table. Tensor bytes are mapped one tensor
 * at a time by {@link #region(String)} (in place) and {@link #map(String)} (as a buffer, to read once), so a
 * pipeline stage that holds a quarter of the layers reads about a quarter of the weights ({@link #mappedBytes()}
 * tells how much was handed out). Files of any size are fine; on JDK 17 a single tensor must be under 2 GiB
 * (a {@code ByteBuffer} limit), which is reported by name if not.
 *
 * <pre>{@code
 * try (GgufFile gguf = GgufFile.open(path)) {
 *     int dim = gguf.metadata().getInt("llama.embedding_length");
 *     ByteBuffer wq = gguf.map("blk.0.attn_q.weight");   // little-endian, read-only
 * }
 * }</pre>
 * Regions and buffers stay valid after {@link #close()} (the mapping outlives the channel).
 */
public final class GgufFile implements AutoCloseable {
    /** "GGUF" read as a little-endian u32. */
    public static final int MAGIC = 0x46554747;
    public static final int DEFAULT_ALIGNMENT = 32;

    private final Path path;
    private final FileChannel channel;
    private final long fileSize;
    private final int version;
    private final GgufMetadata metadata;
    private final Map<String, GgufTensorInfo> tensors;
    private final long dataStart;
    private final int alignment;
    private final AtomicLong mappedBytes = new AtomicLong();
    /** The file's mapping(s), made on the first {@link #region}: opening reads only the header. */
    private MappedFile mapped;

    private GgufFile(Path path, FileChannel channel) throws IOException {
        this.path = path;
        this.channel = channel;
        this.fileSize = channel.size();
        HeaderReader in = new HeaderReader(path, channel);
        int magic = in.i32("magic");
        if (magic != MAGIC) {
            throw new GgufException(path, String.format(
                    "not a GGUF file: the first 4 bytes are %08x, expected 'GGUF' (47 47 55 46)", Integer.reverseBytes(magic)));
        }
        version = in.i32("version");
        if (version != 2 && version != 3) {
            throw new GgufException(path, "GGUF version " + version + " is not supported (2 and 3 are)");
        }
        long tensorCount = in.u64("tensor count");
        long kvCount = in.u64("metadata count");
        if (tensorCount < 0 || tensorCount > 1_000_000 || kvCount < 0 || kvCount > 1_000_000) {
            throw new GgufException(path, "implausible header: " + tensorCount + " tensors, " + kvCount + " metadata keys");
        }
        Map<String, Object> kv = new LinkedHashMap<>();
        for (long i = 0; i < kvCount; i++) {
            String key = in.string("metadata key #" + i);
            int valueType = in.i32("type of metadata key '" + key + "'");
            kv.put(key, in.value(valueType, key));
        }
        metadata = new GgufMetadata(path, kv);
        alignment = metadata.has("general.alignment") ? metadata.getInt("general.alignment") : DEFAULT_ALIGNMENT;
        if (alignment <= 0 || Integer.bitCount(alignment) != 1) {
            throw new GgufException(path, "general.alignment = " + alignment + " is not a power of two");
        }

        record Pending(String name, long[] dims, GgmlType type, long offset) { }
        if (tensorCount > in.remaining() / HeaderReader.MIN_TENSOR_INFO_BYTES) {
            throw new GgufException(path, "the header claims " + tensorCount + " tensors (at least "
                    + HeaderReader.MIN_TENSOR_INFO_BYTES + " bytes each in the tensor table) but only " + in.remaining()
                    + " bytes are left in the file: it is truncated or corrupt");
        }
        Pending[] pending = new Pending[(int) tensorCount];
        for (int i = 0; i < tensorCount; i++) {
            String name = in.string("name of tensor #" + i);
            int nDims = in.i32("rank of tensor '" + name + "'");
            if (nDims < 1 || nDims > 4) {
                throw new GgufException(path, "tensor '" + name + "' has rank " + nDims + " (1..4 expected)");
            }
            long[] dims = new long[nDims];
            for (int d = 0; d < nDims; d++) {
                dims[d] = in.u64("dimension " + d + " of tensor '" + name + "'");
                if (dims[d] <= 0) {
                    throw new GgufException(path, "tensor '" + name + "' has dimension " + d + " = "
                            + Long.toUnsignedString(dims[d]));
                }
            }
            int typeId = in.i32("type of tensor '" + name + "'");
            GgmlType type = GgmlType.fromId(typeId);
            if (type == null) {
                throw new GgufException(path, "tensor '" + name + "' has unknown ggml type id " + typeId);
            }
            long offset = in.u64("offset of tensor '" + name + "'");
            pending[i] = new Pending(name, dims, type, offset);
        }
        long headerEnd = in.position();
        dataStart = (headerEnd + alignment - 1) / alignment * alignment;

        Map<String, GgufTensorInfo> table = new LinkedHashMap<>();
        for (Pending p : pending) {
            GgufTensorInfo t = locate(p.name, p.dims, p.type, p.offset);
            if (table.put(p.name, t) != null) {
                throw new GgufException(path, "tensor '" + p.name + "' appears twice in the tensor table");
            }
        }
        tensors = Collections.unmodifiableMap(table);
    }

    /**
     * Where a tensor's bytes lie, checked against the file: its element count and byte size computed without
     * overflow, its offset neither negative (a u64 of 2^63 or more) nor misaligned, and its end within the file.
     * A crafted offset or shape must be refused here, by the tensor's name, rather than wrap around and pass.
     */
    private GgufTensorInfo locate(String name, long[] dims, GgmlType type, long offset) {
        String shape = java.util.Arrays.toString(dims);
        long elements = 1;
        try {
            for (long d : dims) {
                elements = Math.multiplyExact(elements, d);
            }
        } catch (ArithmeticException e) {
            throw new GgufException(path, "tensor '" + name + "' of shape " + shape + " has more than 2^63 elements");
        }
        if (dims[0] % type.blockSize() != 0) {
            throw new GgufException(path, "tensor '" + name + "' of type " + type + " has a row of "
                    + dims[0] + " elements, not a multiple of the block size " + type.blockSize());
        }
        long bytes;
        try {
            bytes = Math.multiplyExact(elements / type.blockSize(), (long) type.blockBytes());
        } catch (ArithmeticException e) {
            throw new GgufException(path, "tensor '" + name + "' of type " + type + " and shape " + shape
                    + " takes more than 2^63 bytes");
        }
        if (offset < 0) {
            throw new GgufException(path, "tensor '" + name + "' has data offset " + Long.toUnsignedString(offset)
                    + ", beyond any file (2^63 or more)");
        }
        if (offset % alignment != 0) {
            throw new GgufException(path, "tensor '" + name + "' data offset " + offset + " is not aligned to " + alignment);
        }
        long start;
        long end;
        try {
            start = Math.addExact(dataStart, offset);
            end = Math.addExact(start, bytes);
        } catch (ArithmeticException e) {
            throw new GgufException(path, "tensor '" + name + "' at data offset " + offset + " with " + bytes
                    + " bytes ends beyond 2^63 (the file has " + fileSize + " bytes)");
        }
        if (end > fileSize) {
            throw new GgufException(path, "file is truncated: tensor '" + name + "' needs bytes "
                    + start + ".." + end + " but the file has " + fileSize);
        }
        return new GgufTensorInfo(name, dims, type, start, bytes);
    }

    /** Opens and parses {@code path}; throws {@link GgufException} for anything that is not a usable GGUF file. */
    public static GgufFile open(Path path) {
        FileChannel ch;
        try {
            ch = FileChannel.open(path, StandardOpenOption.READ);
        } catch (NoSuchFileException e) {
            throw new GgufException(path, "no such file");
        } catch (IOException e) {
            throw new GgufException(path, "cannot open: " + e.getMessage(), e);
        }
        try {
            return new GgufFile(path, ch);
        } catch (IOException | RuntimeException e) {
            try {
                ch.close();
            } catch (IOException suppressed) {
                e.addSuppressed(suppressed);
            }
            if (e instanceof GgufException g) {
                throw g;
            }
            throw new GgufException(path, "cannot read: " + e.getMessage(), e);
        }
    }

    public Path path() {
        return path;
    }

    public int version() {
        return version;
    }

    public long fileSize() {
        return fileSize;
    }

    public int alignment() {
        return alignment;
    }

    public GgufMetadata metadata() {
        return metadata;
    }

    /** The tensor table in file order. */
    public Map<String, GgufTensorInfo> tensors() {
        return tensors;
    }

    public boolean hasTensor(String name) {
        return tensors.containsKey(name);
    }

    /** The tensor's table entry; a {@link GgufException} naming the tensor if the file has none. */
    public GgufTensorInfo tensor(String name) {
        GgufTensorInfo t = tensors.get(name);
        if (t == null) {
            throw new GgufException(path, "tensor '" + name + "' is missing");
        }
        return t;
    }

    /**
     * One tensor's bytes in place, read-only, little-endian: on JDK 22 and later a slice of one mapping of the whole
     * file (any size), on JDK 17 a mapping of its own (under 2 GiB, else a {@link GgufException} naming it).
     */
    public Region region(String name) {
        GgufTensorInfo t = tensor(name);
        try {
            Region r = mapping().region(t.dataOffset(), t.byteSize());
            mappedBytes.addAndGet(t.byteSize());
            return r;
        } catch (RegionTooLargeException e) {
            throw new GgufException(path, "tensor '" + name + "' is " + e.getMessage(), e);
        } catch (IOException e) {
            throw new GgufException(path, "cannot map tensor '" + name + "': " + e.getMessage(), e);
        }
    }

    private synchronized MappedFile mapping() throws IOException {
        if (mapped == null) {
            mapped = new MappedFile(channel, fileSize);
        }
        return mapped;
    }

    /** One tensor's bytes as a read-only little-endian buffer, for reading it once at load: under 2 GiB. */
    public ByteBuffer map(String name) {
        Region r = region(name);
        try {
            return r.asByteBuffer();
        } catch (RegionTooLargeException e) {
            throw new GgufException(path, "tensor '" + name + "' is " + e.getMessage()
                    + ": its type is read in place only as F16", e);
        }
    }

    /** Total bytes of tensor data mapped so far through {@link #map(String)}. */
    public long mappedBytes() {
        return mappedBytes.get();
    }

    /** Total bytes of tensor data in the file. */
    public long tensorBytes() {
        long n = 0;
        for (GgufTensorInfo t : tensors.values()) {
            n += t.byteSize();
        }
        return n;
    }

    @Override
    public void close() {
        try {
            channel.close();
        } catch (IOException ignored) {
            // Read-only channel: nothing to flush, nothing lost.
        }
    }

    /**
     * Sequential little-endian reader of the header area, buffered, with truncation errors that say what was being
     * read. Every length the file claims (of a string, an array, the tensor table) is checked against the bytes left
     * in the file before anything is allocated for it, so a small crafted file cannot make the reader allocate more
     * than a small multiple of the file's size; arrays of arrays nest at most {@link #MAX_ARRAY_DEPTH} deep.
     */
    private static final class HeaderReader {
        private static final int MAX_STRING = 64 << 20;
        private static final long MAX_ARRAY = 1L << 28;
        /** Arrays of arrays nested deeper than this are refused; real files nest at most two levels. */
        static final int MAX_ARRAY_DEPTH = 8;
        /** The smallest tensor-table entry: an empty name's length, rank, one dimension, type and offset. */
        static final long MIN_TENSOR_INFO_BYTES = 8 + 4 + 8 + 4 + 8;

        private final Path path;
        private final FileChannel ch;
        private final long fileSize;
        private final ByteBuffer buf = ByteBuffer.allocate(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
        private long bufStart;

        HeaderReader(Path path, FileChannel ch) throws IOException {
            this.path = path;
            this.ch = ch;
            this.fileSize = ch.size();
            buf.limit(0);
        }

        long position() {
            return bufStart + buf.position();
        }

        /** Bytes of the file after the current position. */
        long remaining() {
            return Math.max(0, fileSize - position());
        }

        private void need(int n, String what) throws IOException {
            if (buf.remaining() >= n) {
                return;
            }
            bufStart += buf.position();
            buf.compact();
            while (buf.position() < n) {
                int r = ch.read(buf, bufStart + buf.position());
                if (r < 0) {
                    buf.flip();
                    throw new GgufException(path, "file is truncated while reading " + what
                            + " at byte " + position(), new EOFException());
                }
            }
            buf.flip();
        }

        int i32(String what) throws IOException {
            need(4, what);
            return buf.getInt();
        }

        long u64(String what) throws IOException {
            need(8, what);
            return buf.getLong();
        }

        String string(String what) throws IOException {
            long len = u64(what);
            if (len < 0 || len > remaining()) {
                throw new GgufException(path, "the " + what + " at byte " + (position() - 8) + " claims a string of "
                        + Long.toUnsignedString(len) + " bytes but only " + remaining()
                        + " bytes are left in the file: it is truncated or corrupt");
            }
            if (len > MAX_STRING) {
                throw new GgufException(path, "implausible string length " + len + " for " + what + " at byte "
                        + (position() - 8) + " (at most " + MAX_STRING + ")");
            }
            byte[] bytes = new byte[(int) len];
            int done = 0;
            while (done < len) {
                need(1, what);
                int n = Math.min(buf.remaining(), bytes.length - done);
                buf.get(bytes, done, n);
                done += n;
            }
            String s;
            try {
                s = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(bytes)).toString();
            } catch (CharacterCodingException e) {
                // Some vocabularies hold invalid UTF-8 pieces; keep them readable rather than fail the file.
                s = new String(bytes, StandardCharsets.UTF_8);
            }
            return s;
        }

        Object value(int type, String key) throws IOException {
            if (type == 9) {
                return array(key, 1);
            }
            return scalar(type, key, "value of '" + key + "'");
        }

        private Object scalar(int type, String key, String what) throws IOException {
            switch (type) {
                case 0: need(1, what); return (long) (buf.get() & 0xFF);
                case 1: need(1, what); return (long) buf.get();
                case 2: need(2, what); return (long) (buf.getShort() & 0xFFFF);
                case 3: need(2, what); return (long) buf.getShort();
                case 4: need(4, what); return buf.getInt() & 0xFFFFFFFFL;
                case 5: need(4, what); return (long) buf.getInt();
                case 6: need(4, what); return (double) buf.getFloat();
                case 7: need(1, what); return buf.get() != 0;
                case 8: return string(what);
                case 10: case 11: need(8, what); return buf.getLong();
                case 12: need(8, what); return buf.getDouble();
                default:
                    throw new GgufException(path, "metadata key '" + key + "' has unknown value type " + type);
            }
        }

        /**
         * Bytes one element of GGUF value type {@code type} takes in the file at least: its size, or for a string its
         * length field, for an array its type and length fields; -1 for an unknown type.
         */
        private static int minElementBytes(int type) {
            return switch (type) {
                case 0, 1, 7 -> 1;
                case 2, 3 -> 2;
                case 4, 5, 6 -> 4;
                case 8, 10, 11, 12 -> 8;
                case 9 -> 4 + 8;
                default -> -1;
            };
        }

        /** An array value of {@code key}, {@code depth} levels deep (1 for a key's own array). */
        private Object array(String key, int depth) throws IOException {
            if (depth > MAX_ARRAY_DEPTH) {
                throw new GgufException(path, "array '" + key + "' nests arrays more than " + MAX_ARRAY_DEPTH + " deep");
            }
            String what = "array '" + key + "'";
            int elemType = i32(what);
            long n = u64(what);
            int elemBytes = minElementBytes(elemType);
            if (elemBytes < 0) {
                throw new GgufException(path, "array '" + key + "' has unknown element type " + elemType);
            }
            long left = remaining();
            if (n < 0 || n > left / elemBytes) {
                throw new GgufException(path, "array '" + key + "' claims " + Long.toUnsignedString(n) + " elements of at least "
                        + elemBytes + " bytes each but only " + left + " bytes are left in the file: it is truncated or corrupt");
            }
            if (n > MAX_ARRAY) {
                throw new GgufException(path, "implausible length " + n + " of " + what + " (at most " + MAX_ARRAY + ")");
            }
            int len = (int) n;
            switch (elemType) {
                case 0: case 1: case 2: case 3: case 4: case 5: case 10: case 11: {
                    long[] a = new long[len];
                    for (int i = 0; i < len; i++) {
                        a[i] = (Long) scalar(elemType, key, what);
                    }
                    return a;
                }
                case 6: {
                    float[] a = new float[len];
                    for (int i = 0; i < len; i++) {
                        need(4, what);
                        a[i] = buf.getFloat();
                    }
                    return a;
                }
                case 12: {
                    double[] a = new double[len];
                    for (int i = 0; i < len; i++) {
                        need(8, what);
                        a[i] = buf.getDouble();
                    }
                    return a;
                }
                case 7: {
                    boolean[] a = new boolean[len];
                    for (int i = 0; i < len; i++) {
                        need(1, what);
                        a[i] = buf.get() != 0;
                    }
                    return a;
                }
                case 8: {
                    String[] a = new String[len];
                    for (int i = 0; i < len; i++) {
                        a[i] = string(what);
                    }
                    return a;
                }
                default: {
                    Object[] a = new Object[len];
                    for (int i = 0; i < len; i++) {
                        a[i] = array(key, depth + 1);
                    }
                    return a;
                }
            }
        }
    }
}
