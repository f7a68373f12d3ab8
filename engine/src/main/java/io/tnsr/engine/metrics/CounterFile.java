package io.tnsr.engine.metrics;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.LinkedHashMap;
import java.util.Map;
import org.agrona.IoUtil;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;
import org.agrona.concurrent.status.CountersReader;

/**
 * A process's event counters (frames, compute time, stalls) as Agrona counters in a memory-mapped file,
 * {@code DIR/<name>.counters}: the counting thread increments in place with no lock and no I/O, and any other process
 * reads the values, during the run or after it ({@link #read}). The file is the values buffer ({@link #CAPACITY}
 * counters of {@link CountersReader#COUNTER_LENGTH} bytes) followed by the metadata buffer; each counter's label is
 * {@code "<name>: <description>"}.
 */
public final class CounterFile implements AutoCloseable {
    /** File name suffix. */
    public static final String SUFFIX = ".counters";
    /** Counters one file holds. */
    public static final int CAPACITY = 64;

    private static final int VALUES_LENGTH = CAPACITY * CountersReader.COUNTER_LENGTH;
    private static final int METADATA_LENGTH = CAPACITY * CountersReader.METADATA_LENGTH;

    /** One counter as read back. */
    public record Reading(String name, long value, String description) {
    }

    private final Path file;
    private final MappedByteBuffer mapped;
    private final CountersManager counters;

    private CounterFile(Path file, MappedByteBuffer mapped) {
        this.file = file;
        this.mapped = mapped;
        this.counters = new CountersManager(new UnsafeBuffer(mapped, VALUES_LENGTH, METADATA_LENGTH),
                new UnsafeBuffer(mapped, 0, VALUES_LENGTH));
    }

    /** Creates (or replaces) {@code dir/<name>.counters}, every counter free. */
    public static CounterFile create(Path dir, String name) {
        return create(dir, name, SUFFIX);
    }

    /** Creates (or replaces) {@code dir/<name><suffix>}, every counter free: counters kept apart from the event counters. */
    public static CounterFile create(Path dir, String name, String suffix) {
        Path file = dir.resolve(name + suffix);
        try {
            Files.deleteIfExists(file);   // a run directory used again: this run's counters start from 0
            return new CounterFile(file, IoUtil.mapNewFile(file.toFile(), VALUES_LENGTH + METADATA_LENGTH));
        } catch (IOException e) {       // IoUtil rethrows its IOExceptions unchecked
            throw new UncheckedIOException("cannot create counters file " + file + ": " + e, e);
        }
    }

    /** A new counter at 0; {@code name} must not contain ": ". */
    public AtomicCounter counter(String name, String description) {
        if (name.contains(": ")) {
            throw new IllegalArgumentException("counter name '" + name + "' must not contain ': '");
        }
        if (counters.available() == 0) {
            throw new IllegalStateException(file + " holds " + CAPACITY + " counters, all taken");
        }
        return counters.newCounter(name + ": " + description);
    }

    /** The counters of a file written by {@link #create}, in allocation order. */
    public static Map<String, Reading> read(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            if (ch.size() != VALUES_LENGTH + METADATA_LENGTH) {
                throw new IOException(file + " is not a counters file (" + ch.size() + " bytes, expected "
                        + (VALUES_LENGTH + METADATA_LENGTH) + ")");
            }
            MappedByteBuffer m = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
            try {
                CountersReader r = new CountersReader(new UnsafeBuffer(m, VALUES_LENGTH, METADATA_LENGTH),
                        new UnsafeBuffer(m, 0, VALUES_LENGTH));
                Map<String, Reading> out = new LinkedHashMap<>();
                r.forEach((value, id, label) -> {
                    int colon = label.indexOf(": ");
                    String name = colon < 0 ? label : label.substring(0, colon);
                    out.put(name, new Reading(name, value, colon < 0 ? "" : label.substring(colon + 2)));
                });
                return out;
            } finally {
                IoUtil.unmap(m);
            }
        }
    }

    /** Unmaps the file; the values stay in it. Counters must not be used after this. */
    @Override
    public void close() {
        IoUtil.unmap(mapped);
    }
}
