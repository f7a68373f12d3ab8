package io.tnsr.engine.testing;

import org.junit.jupiter.api.Test;
import org.opentest4j.AssertionFailedError;
import org.opentest4j.TestAbortedException;

import java.nio.file.Files;

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

    @Test
    void findsTheReadme() {
        SharedData.root().ifPresent(r -> assertTrue(Files.isDirectory(r)));
        SharedData.find("README.md").ifPresent(p -> assertTrue(Files.isRegularFile(p)));
    }
}
