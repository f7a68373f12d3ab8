package io.tnsr.engine.metrics;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RunDirectoryTest {
    @TempDir
    Path tmp;

    @Test
    void aTemporaryDirectoryGoesWithEverythingTheRunWroteIntoIt() throws Exception {
        Path path;
        try (RunDirectory dir = RunDirectory.temporary("run-directory-test")) {
            path = dir.path();
            assertTrue(dir.temporary());
            // what a run leaves there: a mapped counters file, a histogram log, a subdirectory
            try (CounterFile counters = CounterFile.create(path, "stage0", CounterFile.SUFFIX)) {
                counters.counter("stage0_frames_total", "frames").increment();
            }
            Files.writeString(path.resolve("stage0-compute.hlog"), "#[metric: stage0-compute]\n");
            Files.createDirectories(path.resolve("nested")).resolve("x").toFile().createNewFile();
        }
        assertFalse(Files.exists(path), path + " is still there");
    }

    @Test
    void aNamedDirectoryIsCreatedAndKept() throws Exception {
        Path wanted = tmp.resolve("histograms/run1");
        try (RunDirectory dir = RunDirectory.named(wanted)) {
            assertFalse(dir.temporary());
            Files.writeString(dir.path().resolve("coordinator-step.hlog"), "x");
        }
        assertTrue(Files.isRegularFile(wanted.resolve("coordinator-step.hlog")));
    }

    @Test
    void namedOrTemporaryFollowsWhetherTheUserGaveADirectory() throws Exception {
        try (RunDirectory named = RunDirectory.namedOrTemporary(tmp.resolve("m"), "unused");
             RunDirectory temporary = RunDirectory.namedOrTemporary(null, "run-directory-test")) {
            assertFalse(named.temporary());
            assertTrue(temporary.temporary());
        }
    }

    @Test
    void closingTwiceOrAfterTheDirectoryWentIsQuiet() throws Exception {
        RunDirectory dir = RunDirectory.temporary("run-directory-test");
        dir.close();
        dir.close();
        assertFalse(Files.exists(dir.path()));
        RunDirectory gone = RunDirectory.temporary("run-directory-test");
        Files.delete(gone.path());
        gone.close();
    }
}
