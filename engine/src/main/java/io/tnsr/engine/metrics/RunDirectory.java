package io.tnsr.engine.metrics;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import org.agrona.IoUtil;

/**
 * The directory a run's processes write their metrics into ({@link MetricsLog}'s histogram logs, {@link CounterFile}s):
 * either one the user named, which {@link #close()} leaves as it is, or a temporary one this process made, which
 * {@link #close()} deletes with everything in it, so that runs without a metrics directory leave nothing behind. A
 * temporary directory still open when the JVM ends (Ctrl-C, SIGTERM, an exit from another thread) is deleted by a
 * shutdown hook; only a process killed outright leaves it.
 */
public final class RunDirectory implements AutoCloseable {
    /** Temporary directories not closed yet, for the shutdown hook. */
    private static final Set<Path> OPEN = ConcurrentHashMap.newKeySet();
    private static final AtomicBoolean HOOKED = new AtomicBoolean();

    private final Path path;
    private final boolean temporary;

    private RunDirectory(Path path, boolean temporary) {
        this.path = path;
        this.temporary = temporary;
    }

    /** The user's directory, created if missing; kept after the run. */
    public static RunDirectory named(Path dir) throws IOException {
        return new RunDirectory(Files.createDirectories(dir), false);
    }

    /** A new directory under the system's temporary directory ({@code java.io.tmpdir}), deleted by {@link #close()}. */
    public static RunDirectory temporary(String prefix) throws IOException {
        if (HOOKED.compareAndSet(false, true)) {
            Runtime.getRuntime().addShutdownHook(new Thread(() -> OPEN.forEach(RunDirectory::delete),
                    "temporary-directories"));
        }
        Path dir = Files.createTempDirectory(prefix);
        OPEN.add(dir);
        return new RunDirectory(dir, true);
    }

    /** {@link #named} when {@code dir} is given, else {@link #temporary}. */
    public static RunDirectory namedOrTemporary(Path dir, String prefix) throws IOException {
        return dir != null ? named(dir) : temporary(prefix);
    }

    public Path path() {
        return path;
    }

    /** Whether {@link #close()} deletes it. */
    public boolean temporary() {
        return temporary;
    }

    /**
     * Deletes a temporary directory with its files, or says on stderr which could not be deleted and why (the run's
     * result stands either way). A named directory is left as it is.
     */
    @Override
    public void close() {
        if (temporary && OPEN.remove(path)) {
            delete(path);
        }
    }

    private static void delete(Path dir) {
        try {
            IoUtil.delete(dir.toFile(), false);
        } catch (Exception e) { // Agrona rethrows the IOException of Files.delete unchecked
            System.err.println("could not remove the temporary directory " + dir + ": " + e);
        }
    }

    @Override
    public String toString() {
        return path.toString();
    }
}
