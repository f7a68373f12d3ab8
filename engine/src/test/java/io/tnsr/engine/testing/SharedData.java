package io.tnsr.engine.testing;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * Locates the read-only data in {@code ../shared} beside the checkout (models, golden files, tokenizer
 * vectors). When a file is missing: in CI ({@code CI=true}) the test fails; elsewhere it is skipped with a
 * visible message.
 */
public final class SharedData {
    private SharedData() {
    }

    /** The shared folder, or null. */
    public static Path root() {
        String repo = System.getenv("TNSR_REPO_ROOT");
        if (repo != null) {
            Path p = Paths.get(repo).toAbsolutePath().normalize().resolveSibling("shared");
            if (Files.isDirectory(p)) {
                return p;
            }
        }
        Path dir = Paths.get("").toAbsolutePath();
        while (dir != null) {
            Path p = dir.resolveSibling("shared");
            if (Files.isDirectory(p.resolve("models"))) {
                return p;
            }
            dir = dir.getParent();
        }
        return null;
    }

    /** {@code ../shared/relative}; fails (CI) or skips (elsewhere) the test when it is missing. */
    public static Path path(String relative) {
        Path root = root();
        Path p = root == null ? null : root.resolve(relative);
        if (p == null || !Files.exists(p)) {
            String msg = "shared test data missing: ../shared/" + relative
                    + " (expected beside the checkout; see the README)";
            if ("true".equals(System.getenv("CI"))) {
                Assertions.fail(msg);
            }
            System.err.println("SKIPPED: " + msg);
            Assumptions.abort(msg);
        }
        return p;
    }
}
