package io.tnsr.engine.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Finds the read-only test data in {@code shared/} (models, golden outputs, tokenizer vocabularies), which
 * lives beside the project's checkout and is never committed.
 *
 * <pre>{@code
 * Path model = SharedData.path("models/stories260K.gguf");   // skips (or, in CI, fails) the test if absent
 * }</pre>
 *
 * <p>Where: {@code $TNSR_REPO_ROOT/../shared} (surefire sets {@code TNSR_REPO_ROOT} to the repository root),
 * else the first {@code shared} directory found in the working directory or one of its ancestors (so
 * {@code ../shared} of the checkout when run from the root or from a module).
 *
 * <p>When the file is missing: with the environment variable {@code CI=true} the test <b>fails</b> (CI must
 * have the data); otherwise it is skipped with a message saying what is missing and where it was looked
 * for, which is also printed to stderr.
 */
public final class SharedData {
    private SharedData() {
    }

    /** The file or directory {@code relative} under shared/; skips the calling test (fails it in CI) if absent. */
    public static Path path(String relative) {
        Optional<Path> p = find(relative);
        if (p.isPresent()) {
            return p.get();
        }
        String msg = "shared test data '" + relative + "' not found (looked in " + describeSearch()
                + "); see shared/README.md";
        return Prerequisites.missing(msg, "missing data is a failure");
    }

    /** The file or directory {@code relative} under shared/, if it exists; never skips or fails. */
    public static Optional<Path> find(String relative) {
        return candidates().stream().map(r -> r.resolve(relative)).filter(Files::exists).findFirst();
    }

    /** The shared/ directory, if one is found. */
    public static Optional<Path> root() {
        return candidates().stream().findFirst();
    }

    /** Existing shared/ directories in search order. */
    private static List<Path> candidates() {
        List<Path> dirs = new ArrayList<>();
        String repo = System.getenv("TNSR_REPO_ROOT");
        if (repo != null && !repo.isBlank()) {
            dirs.add(Paths.get(repo).toAbsolutePath().normalize().resolveSibling("shared"));
        }
        for (Path d = Paths.get("").toAbsolutePath().normalize(); d != null; d = d.getParent()) {
            dirs.add(d.resolve("shared"));
        }
        return dirs.stream().filter(Files::isDirectory).distinct().toList();
    }

    private static String describeSearch() {
        String repo = System.getenv("TNSR_REPO_ROOT");
        String first = repo == null || repo.isBlank() ? "TNSR_REPO_ROOT not set"
                : "$TNSR_REPO_ROOT/../shared = " + Paths.get(repo).toAbsolutePath().normalize().resolveSibling("shared");
        return first + ", then shared/ in " + Paths.get("").toAbsolutePath().normalize() + " and its parents";
    }
}
