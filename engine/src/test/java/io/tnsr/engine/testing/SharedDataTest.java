package io.tnsr.engine.testing;

import org.junit.jupiter.api.Test;
import org.opentest4j.AssertionFailedError;
import org.opentest4j.TestAbortedException;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

class SharedDataTest {

    @Test
    void findsNothingForAMissingFile() {
        assertTrue(SharedData.find("no/such/file.gguf").isEmpty());
    }

    /** Missing data skips a test on a developer's machine and fails it in CI. */
    @Test
    void missingDataSkipsLocallyAndFailsInCi() {
        boolean ci = "true".equalsIgnoreCase(System.getenv("CI"));
        Class<? extends Throwable> expected = ci ? AssertionFailedError.class : TestAbortedException.class;
        Throwable t = assertThrows(expected, () -> SharedData.path("no/such/file.gguf"));
        assertTrue(t.getMessage().contains("no/such/file.gguf") && t.getMessage().contains("shared"), t.getMessage());
    }

    /** The data beside this checkout is the one found (skipped when there is none here, failed in CI). */
    @Test
    void findsTheSharedDataBesideTheRepository() {
        Path readme = SharedData.path("README.md");
        assertTrue(Files.isRegularFile(readme), readme::toString);
        assertEquals(SharedData.root().orElseThrow(), readme.getParent());
        String repo = System.getenv("TNSR_REPO_ROOT");
        if (repo != null && !repo.isBlank()) {
            assertEquals(Path.of(repo).toAbsolutePath().normalize().resolveSibling("shared"), readme.getParent(),
                    "shared/ beside the repository comes first");
        }
        assertTrue(Files.isDirectory(SharedData.path("models")), "the models are there too");
    }
}
