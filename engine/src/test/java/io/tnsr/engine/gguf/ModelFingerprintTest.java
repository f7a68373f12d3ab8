package io.tnsr.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.Reader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Random;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ModelFingerprintTest {
    /** Small chunks, so that a file of a few KiB spans several of them and is hashed by several threads. */
    private static final int CHUNK = 4096;

    @TempDir
    Path tmp;

    private final ByteArrayOutputStream warningBytes = new ByteArrayOutputStream();
    private final PrintStream warnings = new PrintStream(warningBytes, true, StandardCharsets.UTF_8);

    private static byte[] randomBytes(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    private Path write(String name, byte[] content) throws IOException {
        return Files.write(tmp.resolve(name), content);
    }

    private ModelFingerprint uncached(Path p) {
        return ModelFingerprint.of(p, null, CHUNK, warnings);
    }

    private ModelFingerprint withCache(Path p, Path cacheDir) {
        return ModelFingerprint.of(p, cacheDir, CHUNK, warnings);
    }

    private String warnings() {
        return warningBytes.toString(StandardCharsets.UTF_8);
    }

    @Test
    void theSameBytesGiveTheSameFingerprint() throws IOException {
        byte[] content = randomBytes(5 * CHUNK + 123, 1);
        ModelFingerprint a = uncached(write("a.gguf", content));
        ModelFingerprint b = uncached(write("b.gguf", content));
        assertEquals(a, b);
        assertEquals(a.hashCode(), b.hashCode());
        assertEquals(a.hex(), b.hex());
        assertEquals(32, a.bytes().length);
        assertFalse(a.cached());
        assertTrue(a.computeNanos() > 0);
    }

    @Test
    void oneByteChangedAnywhereChangesTheFingerprint() throws IOException {
        int size = 7 * CHUNK + 517;
        byte[] content = randomBytes(size, 2);
        ModelFingerprint original = uncached(write("m.gguf", content));
        int[] positions = {0, 1, CHUNK - 1, CHUNK, 3 * CHUNK + 1000, size / 2, 7 * CHUNK, size - 1};
        Set<ModelFingerprint> seen = new HashSet<>(List.of(original));
        for (int pos : positions) {
            byte[] changed = content.clone();
            changed[pos] ^= 0x01;
            ModelFingerprint f = uncached(write("m.gguf", changed));
            assertNotEquals(original, f, "byte " + pos + " of " + size + " changed");
            assertTrue(seen.add(f), "byte " + pos + ": a fingerprint seen for another change");
        }
        assertEquals(original, uncached(write("m.gguf", content)), "the original bytes again");
    }

    @Test
    void aFileOfOneChunkOrLessAndAnEmptyFileHaveFingerprintsToo() throws IOException {
        ModelFingerprint empty = uncached(write("empty", new byte[0]));
        ModelFingerprint one = uncached(write("one", new byte[] {42}));
        ModelFingerprint exact = uncached(write("exact", randomBytes(CHUNK, 3)));
        assertEquals(reference(new byte[0], CHUNK), empty.hex());
        assertEquals(reference(new byte[] {42}, CHUNK), one.hex());
        assertEquals(reference(randomBytes(CHUNK, 3), CHUNK), exact.hex());
    }

    @Test
    void appendingOrTruncatingChangesTheFingerprint() throws IOException {
        byte[] content = randomBytes(2 * CHUNK, 4);
        ModelFingerprint original = uncached(write("m.gguf", content));
        byte[] longer = Arrays.copyOf(content, content.length + 1);
        byte[] shorter = Arrays.copyOf(content, content.length - 1);
        assertNotEquals(original, uncached(write("m.gguf", longer)), "a zero byte appended");
        assertNotEquals(original, uncached(write("m.gguf", shorter)), "the last byte cut off");
    }

    @Test
    void theChunkSizeIsPartOfTheDefinition() throws IOException {
        Path p = write("m.gguf", randomBytes(3 * CHUNK, 5));
        assertNotEquals(ModelFingerprint.of(p, null, CHUNK, warnings), ModelFingerprint.of(p, null, 2 * CHUNK, warnings));
        assertEquals(reference(Files.readAllBytes(p), ModelFingerprint.DEFAULT_CHUNK_BYTES),
                ModelFingerprint.of(p, null).hex(), "the default chunk size");
    }

    /** The definition in the class javadoc, computed here without the class. */
    private static String reference(byte[] file, int chunk) {
        try {
            MessageDigest outer = MessageDigest.getInstance("SHA-256");
            outer.update("TNSR-FP1".getBytes(StandardCharsets.US_ASCII));
            byte[] le = new byte[16];
            for (int i = 0; i < 8; i++) {
                le[i] = (byte) ((long) file.length >>> (8 * i));
                le[8 + i] = (byte) ((long) chunk >>> (8 * i));
            }
            outer.update(le);
            for (int start = 0; start < file.length; start += chunk) {
                MessageDigest inner = MessageDigest.getInstance("SHA-256");
                inner.update(file, start, Math.min(chunk, file.length - start));
                outer.update(inner.digest());
            }
            return HexFormat.of().formatHex(outer.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void whatIsComputedIsTheDocumentedDefinition() throws IOException {
        byte[] content = randomBytes(3 * CHUNK + 77, 6);
        Path p = write("m.gguf", content);
        assertEquals(reference(content, CHUNK), uncached(p).hex());
        // fixed values (computed with Python's hashlib), so that the definition cannot change along with the reference
        assertEquals("3e4f5cfcc7639698957de431398fc26b3794ee7d3e57f3af3148099f341c9c08",
                ModelFingerprint.of(write("abc", "abc".getBytes(StandardCharsets.US_ASCII)), null).hex());
        assertEquals("3588957e94e0880303a05997715d60573d922234e48122aa86f2a1fe14f57ca3",
                ModelFingerprint.of(write("empty", new byte[0]), null).hex());
    }

    @Test
    void theSecondCallIsServedFromTheCache() throws Exception {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(4 * CHUNK + 9, 7));
        ModelFingerprint first = withCache(p, cache);
        ModelFingerprint second = withCache(p, cache);
        assertFalse(first.cached());
        assertTrue(second.cached());
        assertEquals(first, second);
        assertEquals(first.hex(), second.hex());
        assertEquals("", warnings());

        try (Stream<Path> entries = Files.list(cache.resolve("fingerprints"))) {
            List<Path> files = entries.toList();
            assertEquals(1, files.size(), "one entry, no temporary file left: " + files);
            String name = files.get(0).getFileName().toString();
            String key = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                    .digest(p.toRealPath().toString().getBytes(StandardCharsets.UTF_8)));
            assertEquals(key + ".properties", name);
            Properties entry = load(files.get(0));
            assertEquals(p.toRealPath().toString(), entry.getProperty("path"));
            assertEquals(first.hex(), entry.getProperty("fingerprint"));
            assertEquals(Integer.toString(4 * CHUNK + 9), entry.getProperty("size"));
            assertEquals("TNSR-FP1", entry.getProperty("scheme"));
        }
    }

    private static Properties load(Path entry) throws IOException {
        Properties p = new Properties();
        try (Reader r = Files.newBufferedReader(entry, StandardCharsets.UTF_8)) {
            p.load(r);
        }
        return p;
    }

    private Path theOnlyEntry(Path cache) throws IOException {
        try (Stream<Path> entries = Files.list(cache.resolve("fingerprints"))) {
            List<Path> files = entries.toList();
            assertEquals(1, files.size(), files.toString());
            return files.get(0);
        }
    }

    @Test
    void aPathWithCharactersThePropertiesSyntaxEscapesIsCachedToo() throws IOException {
        Path cache = tmp.resolve("cache");
        Path dir = Files.createDirectory(tmp.resolve(" lead\\ing=a:b #c !d"));
        // letters beyond ASCII only where file names can hold them (not in the C locale)
        String letters = "UTF-8".equalsIgnoreCase(System.getProperty("sun.jnu.encoding")) ? "\u00fc\u6a21\u578b" : "";
        Path p = Files.write(dir.resolve("m\\odel\n\t" + letters + "\\.gguf"), randomBytes(CHUNK + 3, 18));
        ModelFingerprint first = withCache(p, cache);
        ModelFingerprint second = withCache(p, cache);
        assertTrue(second.cached(), "the path read back is the path written");
        assertEquals(first, second);
        assertEquals(p.toRealPath().toString(), load(theOnlyEntry(cache)).getProperty("path"));
        assertEquals("", warnings());
    }

    @Test
    void anEntryInTheFormerJsonFormatIsIgnored() throws Exception {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(CHUNK + 5, 19));
        ModelFingerprint expected = uncached(p);
        String key = HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256")
                .digest(p.toRealPath().toString().getBytes(StandardCharsets.UTF_8)));
        Path json = Files.createDirectories(cache.resolve("fingerprints")).resolve(key + ".json");
        String old = "{\"scheme\": \"TNSR-FP1\", \"path\": \"" + p.toRealPath() + "\", \"size\": " + Files.size(p)
                + ", \"modified\": \"" + Files.getLastModifiedTime(p).toInstant() + "\", \"file_key\": null"
                + ", \"chunk_bytes\": " + CHUNK + ", \"fingerprint\": \"" + "00".repeat(32) + "\"}\n";
        Files.writeString(json, old);
        ModelFingerprint f = withCache(p, cache);
        assertFalse(f.cached());
        assertEquals(expected, f);
        assertTrue(withCache(p, cache).cached(), "from the new entry");
        assertEquals(old, Files.readString(json), "left as it was");
    }

    @Test
    void aCachedEntryIsKeyedByTheRealPath() throws IOException {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(CHUNK + 1, 8));
        Path link = Files.createSymbolicLink(tmp.resolve("link.gguf"), p);
        ModelFingerprint first = withCache(p, cache);
        ModelFingerprint viaLink = withCache(link, cache);
        assertTrue(viaLink.cached(), "the same file through a symbolic link");
        assertEquals(first, viaLink);
    }

    @Test
    void touchingTheFileInvalidatesTheCache() throws IOException {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(3 * CHUNK, 9));
        ModelFingerprint first = withCache(p, cache);
        FileTime t = Files.getLastModifiedTime(p);
        Files.setLastModifiedTime(p, FileTime.fromMillis(t.toMillis() + 1000));
        ModelFingerprint touched = withCache(p, cache);
        assertFalse(touched.cached(), "the last-modified time changed");
        assertEquals(first, touched, "the bytes did not");
        assertTrue(withCache(p, cache).cached(), "the entry was overwritten with the new time");
    }

    @Test
    void changingTheContentInvalidatesTheCache() throws IOException {
        Path cache = tmp.resolve("cache");
        byte[] content = randomBytes(3 * CHUNK, 10);
        Path p = write("m.gguf", content);
        ModelFingerprint first = withCache(p, cache);

        byte[] sameSize = content.clone();
        sameSize[CHUNK + 5] ^= 0x40;
        FileTime t = Files.getLastModifiedTime(p);
        Files.write(p, sameSize);
        // on a file system with coarse times the rewrite might keep the time: move it on as any writer would
        Files.setLastModifiedTime(p, FileTime.fromMillis(t.toMillis() + 2000));
        ModelFingerprint rewritten = withCache(p, cache);
        assertFalse(rewritten.cached());
        assertNotEquals(first, rewritten);

        Files.write(p, Arrays.copyOf(sameSize, sameSize.length + 10));
        Files.setLastModifiedTime(p, FileTime.fromMillis(t.toMillis() + 2000));
        ModelFingerprint grown = withCache(p, cache);
        assertFalse(grown.cached(), "the size changed, the time did not");
        assertNotEquals(rewritten, grown);
    }

    @Test
    void aFileReplacedByAnotherWithTheSameSizeAndTimeIsNotTakenFromTheCache() throws IOException {
        Path cache = tmp.resolve("cache");
        byte[] content = randomBytes(2 * CHUNK, 11);
        Path p = write("m.gguf", content);
        FileTime t = Files.getLastModifiedTime(p);
        ModelFingerprint first = withCache(p, cache);
        byte[] other = content.clone();
        other[0] ^= 1;
        Path replacement = write("m.gguf.new", other);
        Files.setLastModifiedTime(replacement, t);
        Files.move(replacement, p, StandardCopyOption.ATOMIC_MOVE);
        ModelFingerprint replaced = withCache(p, cache);
        assertFalse(replaced.cached(), "another inode");
        assertNotEquals(first, replaced);
    }

    @Test
    void aCorruptCacheEntryIsComputedAgainAndOverwritten() throws IOException {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(2 * CHUNK + 3, 12));
        ModelFingerprint first = withCache(p, cache);
        Path entry = theOnlyEntry(cache);
        String good = Files.readString(entry, StandardCharsets.UTF_8);
        List<byte[]> bads = new ArrayList<>();
        for (String bad : List.of("", "=", "not an entry", "unknown=1", "# scheme=TNSR-FP1",
                good.substring(0, good.length() / 2),
                good.replace(first.hex(), "zz" + first.hex().substring(2)),
                good.replace(first.hex(), first.hex().substring(2)),
                good.replaceAll("(?m)^size=\\d+$", "size="),
                good.replaceAll("(?m)^size=(\\d+)$", "size=\"$1\""),
                good.replaceAll("(?m)^size=(\\d+)$", "size=$1 bytes"),
                good.replaceAll("(?m)^chunk_bytes=\\d+$", "chunk_bytes=x"),
                good.replaceAll("(?m)^file_key=.*\\R", ""),
                good.replaceAll("(?m)^path=", "path=\\\\uZZZZ"))) {
            bads.add(bad.getBytes(StandardCharsets.UTF_8));
        }
        byte[] notUtf8 = good.replaceAll("(?m)^path=", "path=\u00ff").getBytes(StandardCharsets.ISO_8859_1);
        bads.add(notUtf8);
        for (byte[] bad : bads) {
            String shown = new String(bad, StandardCharsets.UTF_8);
            assertNotEquals(good, shown);
            Files.write(entry, bad);
            ModelFingerprint again = withCache(p, cache);
            assertFalse(again.cached(), "entry: " + shown);
            assertEquals(first, again);
            assertTrue(withCache(p, cache).cached(), "overwritten after: " + shown);
        }
        Files.delete(entry);
        Files.createDirectory(entry);
        assertEquals(first, withCache(p, cache), "a directory where the entry should be");
        assertTrue(warnings().contains(entry.toString()), "it could not be replaced: " + warnings());
    }

    @Test
    void aCacheThatCannotBeWrittenCostsOneLineOnStderr() throws IOException {
        Path p = write("m.gguf", randomBytes(2 * CHUNK, 13));
        ModelFingerprint expected = uncached(p);

        Path notADir = write("cache-file", new byte[] {1});
        ModelFingerprint f = withCache(p, notADir);
        assertEquals(expected, f);
        assertFalse(f.cached());
        String said = warnings();
        assertEquals(1, said.lines().count(), said);
        assertTrue(said.contains(notADir.resolve("fingerprints").toString()), said);

        Path readOnly = Files.createDirectory(tmp.resolve("read-only"));
        Files.setPosixFilePermissions(readOnly, PosixFilePermissions.fromString("r-xr-xr-x"));
        try {
            ModelFingerprint a = withCache(p, readOnly);
            ModelFingerprint b = withCache(p, readOnly);
            assertEquals(expected, a);
            assertEquals(expected, b);
            if (!Files.isWritable(readOnly)) { // root may write anyway
                assertFalse(b.cached());
                assertEquals(3, warnings().lines().count(), warnings());
            }
        } finally {
            Files.setPosixFilePermissions(readOnly, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
    }

    @Test
    void anUnreadableCacheEntryIsComputedAgain() throws IOException {
        Path cache = tmp.resolve("cache");
        Path p = write("m.gguf", randomBytes(CHUNK, 14));
        ModelFingerprint first = withCache(p, cache);
        Path entry = theOnlyEntry(cache);
        Files.setPosixFilePermissions(entry, PosixFilePermissions.fromString("---------"));
        assertEquals(first, withCache(p, cache));
    }

    @Test
    void wordsRoundTrip() throws IOException {
        ModelFingerprint f = uncached(write("m.gguf", randomBytes(CHUNK + 100, 15)));
        int[] w = f.words();
        assertEquals(8, w.length);
        ByteBuffer b = ByteBuffer.wrap(f.bytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int k = 0; k < 8; k++) {
            assertEquals(b.getInt(4 * k), w[k], "word " + k + " is bytes " + 4 * k + ".." + (4 * k + 3) + " little-endian");
        }
        ModelFingerprint back = ModelFingerprint.fromWords(w);
        assertEquals(f, back);
        assertArrayEquals(f.bytes(), back.bytes());
        assertFalse(back.cached());
        assertThrows(IllegalArgumentException.class, () -> ModelFingerprint.fromWords(new int[7]));
    }

    @Test
    void hexAndShortHex() throws IOException {
        ModelFingerprint f = uncached(write("m.gguf", randomBytes(10, 16)));
        assertEquals(64, f.hex().length());
        assertTrue(f.hex().matches("[0-9a-f]{64}"));
        assertEquals(f.hex().substring(0, 12), f.shortHex());
        assertEquals(f.shortHex(), f.toString());
        byte[] copy = f.bytes();
        copy[0] ^= 1;
        assertNotEquals(copy[0], f.bytes()[0], "bytes() is a copy");
    }

    @Test
    void aMissingOrUnreadableModelIsAGgufExceptionNamingIt() throws IOException {
        Path missing = tmp.resolve("missing.gguf");
        GgufException e = assertThrows(GgufException.class, () -> uncached(missing));
        assertEquals(missing, e.file());
        assertTrue(e.getMessage().contains(missing.toString()), e.getMessage());
        assertThrows(GgufException.class, () -> withCache(missing, tmp.resolve("cache")));

        GgufException dir = assertThrows(GgufException.class, () -> uncached(tmp));
        assertTrue(dir.getMessage().contains(tmp.toString()) && dir.getMessage().contains("not a regular file"),
                dir.getMessage());

        Path unreadable = write("unreadable.gguf", randomBytes(100, 17));
        Files.setPosixFilePermissions(unreadable, PosixFilePermissions.fromString("---------"));
        if (!Files.isReadable(unreadable)) { // root may read anyway
            GgufException u = assertThrows(GgufException.class, () -> uncached(unreadable));
            assertTrue(u.getMessage().contains(unreadable.toString()), u.getMessage());
        }
    }

    @Test
    void theDefaultCacheDirectory() {
        String home = "/home/u";
        assertEquals(Paths.get("/c/t"), ModelFingerprint.defaultCacheDir(Map.of("TNSR_CACHE_DIR", "/c/t",
                "XDG_CACHE_HOME", "/x"), home));
        assertEquals(Paths.get("/x/tnsr"), ModelFingerprint.defaultCacheDir(Map.of("XDG_CACHE_HOME", "/x"), home));
        assertEquals(Paths.get("/x/tnsr"), ModelFingerprint.defaultCacheDir(Map.of("TNSR_CACHE_DIR", "",
                "XDG_CACHE_HOME", "/x"), home));
        assertEquals(Paths.get(home, ".cache", "tnsr"), ModelFingerprint.defaultCacheDir(Map.of(), home));
        assertEquals(Paths.get(home, ".cache", "tnsr"), ModelFingerprint.defaultCacheDir(Map.of("XDG_CACHE_HOME",
                "relative"), home), "a relative XDG_CACHE_HOME is ignored, as the specification asks");
    }
}
