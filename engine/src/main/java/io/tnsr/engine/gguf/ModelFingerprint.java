package io.tnsr.engine.gguf;

import io.tnsr.engine.util.TaskProgress;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A 32-byte SHA-256 fingerprint of a whole GGUF model file: header, metadata, tensor table and every tensor byte.
 * Pipeline stages exchange it in their handshake so that both ends of a link prove they loaded the same model; two
 * files that differ in any byte have different fingerprints. The file is not parsed, so any file can be fingerprinted.
 *
 * <h2>Definition</h2>
 * For a file of {@code L} bytes and the chunk size {@code C = 67108864} (64 MiB), chunk {@code i} is the bytes
 * {@code [i*C, min((i+1)*C, L))} for {@code i = 0 .. ceil(L/C)-1} (an empty file has no chunks), and
 * <pre>
 * fingerprint = SHA-256( "TNSR-FP1"            8 ASCII bytes: 54 4E 53 52 2D 46 50 31
 *                      ‖ u64le(L)             the file length, 8 bytes little-endian
 *                      ‖ u64le(C)             the chunk size, 8 bytes little-endian
 *                      ‖ SHA-256(chunk 0) ‖ SHA-256(chunk 1) ‖ ... ‖ SHA-256(chunk n-1) )   32 bytes each, in order
 * </pre>
 * Hashing chunks separately lets all cores work on one file; the prefix binds the scheme, the length and the chunk
 * size so that a different chunking can never produce the same value. On the wire the 32 bytes travel as
 * {@link #words()}: eight u32 words, word {@code k} being bytes {@code 4k..4k+3} read little-endian.
 *
 * <h2>Cache</h2>
 * Hashing a multi-gigabyte file takes seconds, so the result is kept in
 * {@code <cache dir>/fingerprints/<SHA-256 hex of the file's real path>.properties} (see {@link #defaultCacheDir()}),
 * UTF-8 text in the {@link Properties#load(java.io.Reader) java.util.Properties} syntax, one {@code key=value} a line:
 * {@code scheme} ({@code TNSR-FP1}), {@code path} (the real path), {@code size} (bytes), {@code modified} (the
 * last-modified time, an ISO-8601 instant to the nanosecond where the file system keeps it), {@code file_key}
 * ({@code (dev=...,ino=...)} on Linux; no line where the file system has no key), {@code chunk_bytes},
 * {@code fingerprint} (64 hex digits), {@code computed_at} (an ISO-8601 instant) and {@code compute_nanos}. It is not
 * JSON so that a cached lookup, which every stage makes as it starts, does not pay for loading a JSON library into a
 * fresh JVM. A later call uses an entry only when path, size, modified time and file key all still match the file (and
 * scheme and chunk size match); otherwise it computes again and overwrites the entry. A file rewritten in place with
 * the same size and the same last-modified time would not be noticed: tools that write models (and {@code cp},
 * {@code rsync}, downloads) change the one or the other. A missing, unreadable or corrupt cache entry is computed again
 * silently; a cache that cannot be written costs one line on stderr, never the call.
 * Entries are written to a temporary file in the same directory and moved into place atomically, so concurrent
 * stages starting on the same model never read a half-written entry.
 */
public final class ModelFingerprint {
    /** The number of bytes in a fingerprint. */
    public static final int BYTES = 32;
    /** The chunk size of the definition. */
    static final int DEFAULT_CHUNK_BYTES = 64 << 20;
    /** What starts the final hash's input: the name and version of this definition. */
    static final String SCHEME = "TNSR-FP1";
    /** Bytes read per positional read into a worker's direct buffer. */
    private static final int READ_BYTES = 1 << 20;
    private static final HexFormat HEX = HexFormat.of();

    private final byte[] digest;
    private final boolean cached;
    private final long computeNanos;

    private ModelFingerprint(byte[] digest, boolean cached, long computeNanos) {
        if (digest.length != BYTES) {
            throw new IllegalArgumentException("a fingerprint is " + BYTES + " bytes, not " + digest.length);
        }
        this.digest = digest;
        this.cached = cached;
        this.computeNanos = computeNanos;
    }

    /** The fingerprint of {@code model}, from or into the cache in {@link #defaultCacheDir()}. */
    public static ModelFingerprint of(Path model) {
        return of(model, defaultCacheDir());
    }

    /**
     * The fingerprint of {@code model}, read from the cache in {@code cacheDir} when an entry there still matches the
     * file, else computed and stored there.
     *
     * @param cacheDir the cache directory (its {@code fingerprints} subdirectory is created when missing), or null to
     *                 compute without a cache
     * @throws GgufException when the model file is missing, not a regular file or unreadable, or changed while it was
     *                       being read
     */
    public static ModelFingerprint of(Path model, Path cacheDir) {
        return of(model, cacheDir, DEFAULT_CHUNK_BYTES, System.err);
    }

    /** {@link #of(Path, Path)} with another chunk size (tests use small ones) and where to say that the cache failed. */
    static ModelFingerprint of(Path model, Path cacheDir, int chunkBytes, PrintStream warnings) {
        Objects.requireNonNull(model, "model");
        if (chunkBytes <= 0) {
            throw new IllegalArgumentException("chunk size must be positive, not " + chunkBytes);
        }
        long t0 = System.nanoTime();
        Path real;
        Stat stat;
        try {
            real = model.toRealPath();
            stat = Stat.of(real);
        } catch (NoSuchFileException e) {
            throw new GgufException(model, "no such file", e);
        } catch (IOException e) {
            throw new GgufException(model, "cannot read its attributes: " + e, e);
        }
        if (!stat.regularFile) {
            throw new GgufException(model, "not a regular file");
        }
        Path entryFile = cacheDir == null ? null : entryFile(cacheDir, real);
        if (entryFile != null) {
            byte[] hit = lookUp(entryFile, real, stat, chunkBytes);
            if (hit != null) {
                return new ModelFingerprint(hit, true, System.nanoTime() - t0);
            }
        }
        byte[] digest = compute(model, real, stat, chunkBytes);
        long nanos = System.nanoTime() - t0;
        if (entryFile != null) {
            StringBuilder entry = new StringBuilder(512).append("# model fingerprint cache entry (ModelFingerprint)\n");
            line(entry, "scheme", SCHEME);
            line(entry, "path", real.toString());
            line(entry, "size", Long.toString(stat.size));
            line(entry, "modified", stat.modified);
            if (stat.fileKey != null) {
                line(entry, "file_key", stat.fileKey);
            }
            line(entry, "chunk_bytes", Integer.toString(chunkBytes));
            line(entry, "fingerprint", HEX.formatHex(digest));
            line(entry, "computed_at", Instant.now().toString());
            line(entry, "compute_nanos", Long.toString(nanos));
            store(entryFile, entry.toString(), warnings);
        }
        return new ModelFingerprint(digest, false, nanos);
    }

    /**
     * Where fingerprints are cached by default: {@code $TNSR_CACHE_DIR} if set, else {@code $XDG_CACHE_HOME/tnsr} (if
     * set to an absolute path, as the XDG base directory specification asks), else {@code ~/.cache/tnsr}.
     */
    public static Path defaultCacheDir() {
        return defaultCacheDir(System.getenv(), System.getProperty("user.home"));
    }

    static Path defaultCacheDir(Map<String, String> env, String userHome) {
        String dir = env.get("TNSR_CACHE_DIR");
        if (dir != null && !dir.isEmpty()) {
            return Paths.get(dir);
        }
        String xdg = env.get("XDG_CACHE_HOME");
        if (xdg != null && !xdg.isEmpty() && Paths.get(xdg).isAbsolute()) {
            return Paths.get(xdg, "tnsr");
        }
        return Paths.get(userHome, ".cache", "tnsr");
    }

    /** The fingerprint whose {@link #words()} are {@code w}, as received in a handshake. */
    public static ModelFingerprint fromWords(int[] w) {
        if (w.length != BYTES / 4) {
            throw new IllegalArgumentException("a fingerprint is " + BYTES / 4 + " words, not " + w.length);
        }
        ByteBuffer b = ByteBuffer.allocate(BYTES).order(ByteOrder.LITTLE_ENDIAN);
        for (int x : w) {
            b.putInt(x);
        }
        return new ModelFingerprint(b.array(), false, 0);
    }

    /** The 32 bytes (a copy). */
    public byte[] bytes() {
        return digest.clone();
    }

    /** The 32 bytes as eight u32 words, word {@code k} being bytes {@code 4k..4k+3} little-endian: for a wire frame. */
    public int[] words() {
        ByteBuffer b = ByteBuffer.wrap(digest).order(ByteOrder.LITTLE_ENDIAN);
        int[] w = new int[BYTES / 4];
        for (int k = 0; k < w.length; k++) {
            w[k] = b.getInt(4 * k);
        }
        return w;
    }

    /** The 64 lower-case hex digits. */
    public String hex() {
        return HEX.formatHex(digest);
    }

    /** The first 12 hex digits: enough to tell models apart in a message. */
    public String shortHex() {
        return hex().substring(0, 12);
    }

    /** Whether this came from the cache rather than from reading the file. */
    public boolean cached() {
        return cached;
    }

    /** How long {@link #of} took, the cache lookup included; 0 for {@link #fromWords}. */
    public long computeNanos() {
        return computeNanos;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ModelFingerprint f && Arrays.equals(digest, f.digest);
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(digest);
    }

    @Override
    public String toString() {
        return shortHex();
    }

    /** The definition in the class javadoc, its chunks hashed on up to one thread per core. */
    private static byte[] compute(Path model, Path real, Stat before, int chunkBytes) {
        long size = before.size;
        long chunkCount = (size + chunkBytes - 1) / chunkBytes;
        if (chunkCount > Integer.MAX_VALUE) {
            throw new GgufException(model, size + " bytes is too many chunks of " + chunkBytes + " bytes");
        }
        byte[][] chunkDigests = new byte[(int) chunkCount][];
        try (FileChannel ch = FileChannel.open(real, StandardOpenOption.READ)) {
            if (chunkCount > 0) {
                hashChunks(model, ch, size, chunkBytes, chunkDigests);
            }
        } catch (NoSuchFileException e) {
            throw new GgufException(model, "no such file", e);
        } catch (AccessDeniedException e) {
            throw new GgufException(model, "cannot read: permission denied", e);
        } catch (IOException e) {
            throw new GgufException(model, "cannot read: " + e, e);
        }
        Stat after;
        try {
            after = Stat.of(real);
        } catch (IOException e) {
            throw new GgufException(model, "changed while its fingerprint was being computed: " + e, e);
        }
        if (after.size != size || !after.modified.equals(before.modified)
                || !Objects.equals(after.fileKey, before.fileKey)) {
            throw new GgufException(model, "changed while its fingerprint was being computed (" + size + " bytes, modified "
                    + before.modified + "; now " + after.size + " bytes, modified " + after.modified + ")");
        }
        MessageDigest md = sha256();
        md.update(SCHEME.getBytes(StandardCharsets.US_ASCII));
        md.update(ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(size).putLong(chunkBytes).array());
        for (byte[] d : chunkDigests) {
            md.update(d);
        }
        return md.digest();
    }

    /**
     * Fills {@code out[i]} with the SHA-256 of chunk {@code i}: one worker per core (at most one per chunk), each taking
     * the next chunk until none is left and reading it by positional reads into a direct buffer of its own.
     */
    private static void hashChunks(Path model, FileChannel ch, long size, int chunkBytes, byte[][] out)
            throws IOException {
        int workers = Math.max(1, Math.min(Runtime.getRuntime().availableProcessors(), out.length));
        AtomicInteger next = new AtomicInteger();
        AtomicInteger threadNo = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(workers, r -> {
            Thread t = new Thread(r, "tnsr-fingerprint-" + threadNo.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
        try (TaskProgress progress = TaskProgress.start("fingerprint " + model.getFileName(), size, TaskProgress.MIB)) {
            List<Future<Void>> futures = new ArrayList<>(workers);
            for (int w = 0; w < workers; w++) {
                futures.add(pool.submit(() -> {
                    ByteBuffer buf = ByteBuffer.allocateDirect((int) Math.min(READ_BYTES, chunkBytes));
                    MessageDigest md = sha256();
                    for (int i = next.getAndIncrement(); i < out.length; i = next.getAndIncrement()) {
                        long pos = (long) i * chunkBytes;
                        long end = Math.min(size, pos + chunkBytes);
                        while (pos < end) {
                            buf.clear().limit((int) Math.min(buf.capacity(), end - pos));
                            int n = ch.read(buf, pos);
                            if (n < 0) {
                                throw new GgufException(model, "changed while its fingerprint was being computed: it was "
                                        + size + " bytes, it ended at " + pos);
                            }
                            buf.flip();
                            md.update(buf);
                            pos += n;
                            progress.stepBy(n);
                        }
                        out[i] = md.digest();
                    }
                    return null;
                }));
            }
            for (Future<Void> f : futures) {
                f.get();
            }
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof GgufException g) {
                throw g;
            }
            if (c instanceof IOException io) {
                throw io;
            }
            throw new GgufException(model, "computing its fingerprint failed: " + c, c);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new GgufException(model, "interrupted while its fingerprint was being computed", e);
        } finally {
            pool.shutdownNow();
        }
    }

    private static MessageDigest sha256() {
        try {
            return MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java runtime has SHA-256", e);
        }
    }

    /** {@code <cacheDir>/fingerprints/<SHA-256 hex of the real path>.properties}. */
    private static Path entryFile(Path cacheDir, Path real) {
        String key = HEX.formatHex(sha256().digest(real.toString().getBytes(StandardCharsets.UTF_8)));
        return cacheDir.resolve("fingerprints").resolve(key + ".properties");
    }

    /**
     * Appends {@code key=value} and a newline, {@code value} escaped so that {@link Properties#load(java.io.Reader)}
     * gives it back as it was: a backslash doubled, a control character (a line break among them) or a leading space as
     * a backslash, {@code u} and four hex digits. Keys are plain identifiers and need no escaping.
     */
    private static void line(StringBuilder b, String key, String value) {
        b.append(key).append('=');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c == '\\') {
                b.append("\\\\");
            } else if (c < 0x20 || c == 0x7f || (i == 0 && c == ' ')) {
                b.append("\\u").append(HEX.toHexDigits(c));
            } else {
                b.append(c);
            }
        }
        b.append('\n');
    }

    /** The cached digest when {@code entryFile} holds one for this very file as it is now; null otherwise. */
    private static byte[] lookUp(Path entryFile, Path real, Stat stat, int chunkBytes) {
        try {
            if (!Files.isRegularFile(entryFile)) {
                return null;
            }
            Properties e = new Properties();
            try (BufferedReader r = Files.newBufferedReader(entryFile, StandardCharsets.UTF_8)) {
                e.load(r); // malformed UTF-8 or a malformed escape throws: corrupt
            }
            String fingerprint = e.getProperty("fingerprint", "");
            if (!SCHEME.equals(e.getProperty("scheme")) || !real.toString().equals(e.getProperty("path"))
                    || Long.parseLong(e.getProperty("size")) != stat.size
                    || !stat.modified.equals(e.getProperty("modified"))
                    || !Objects.equals(stat.fileKey, e.getProperty("file_key"))
                    || Long.parseLong(e.getProperty("chunk_bytes")) != chunkBytes
                    || fingerprint.length() != 2 * BYTES) {
                return null;
            }
            return HEX.parseHex(fingerprint);
        } catch (IOException | RuntimeException e) {
            return null; // unreadable or corrupt: computed again and overwritten
        }
    }

    /** Writes {@code entry} to a temporary file beside {@code entryFile} and moves it into place atomically. */
    private static void store(Path entryFile, String entry, PrintStream warnings) {
        Path tmp = null;
        try {
            Path dir = entryFile.getParent();
            Files.createDirectories(dir);
            tmp = Files.createTempFile(dir, entryFile.getFileName() + ".", ".tmp");
            Files.writeString(tmp, entry, StandardCharsets.UTF_8);
            Files.move(tmp, entryFile, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            tmp = null;
        } catch (IOException | RuntimeException e) {
            warnings.println("cannot write the model fingerprint cache " + entryFile + " (" + e
                    + "); the fingerprint will be computed again next time");
        } finally {
            if (tmp != null) {
                try {
                    Files.deleteIfExists(tmp);
                } catch (IOException | RuntimeException ignored) {
                    // the warning above has been printed; a stray temporary file is harmless
                }
            }
        }
    }

    /** What identifies a file's current content for the cache: a change to any of these makes an entry stale. */
    private static final class Stat {
        final long size;
        /** The last-modified time as an ISO-8601 instant, to the nanosecond where the file system keeps it. */
        final String modified;
        /** The file system's key (device and inode on Linux), or null where it has none. */
        final String fileKey;
        final boolean regularFile;

        private Stat(BasicFileAttributes a) {
            this.size = a.size();
            this.modified = a.lastModifiedTime().toInstant().toString();
            this.fileKey = a.fileKey() == null ? null : a.fileKey().toString();
            this.regularFile = a.isRegularFile();
        }

        static Stat of(Path p) throws IOException {
            return new Stat(Files.readAttributes(p, BasicFileAttributes.class));
        }
    }
}
