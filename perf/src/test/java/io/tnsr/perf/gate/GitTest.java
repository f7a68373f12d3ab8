package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What counts as code for the gate, and the changes it sees in a real repository. */
class GitTest {
    @Test
    void codeIsBuildFilesModuleSourcesAndLaunchers() {
        for (String p : List.of("pom.xml", "engine/pom.xml", "engine/src/main/java/io/tnsr/engine/model/F32Matrix.java",
                "wire/src/main/resources/x.properties", "tools/lib/launch.sh", "tools/run-pipeline")) {
            assertTrue(Git.isCode(p), p);
        }
        for (String p : List.of("README.md", "docs/perf-gate.md", "engine/src/test/java/io/tnsr/engine/XTest.java",
                "perf/baseline.json", "config/four-stages.json", ".ci/run", ".gitignore")) {
            assertFalse(Git.isCode(p), p);
        }
    }

    @Test
    void seesCommittedUncommittedAndUntrackedCodeChanges(@TempDir Path dir) throws Exception {
        Git git = new Git(dir);
        git.run("init", "-q");
        git.run("config", "user.email", "gate@test");
        git.run("config", "user.name", "gate");
        Files.createDirectories(dir.resolve("engine/src/main"));
        Files.writeString(dir.resolve("engine/src/main/A.java"), "class A {}");
        Files.writeString(dir.resolve("README.md"), "hello");
        git.run("add", "-A");
        git.run("commit", "-q", "-m", "one");
        String first = git.commit("HEAD");
        assertEquals(40, first.length());
        assertNull(git.commit("0123456789abcdef0123456789abcdef01234567"), "a commit this repository lacks");
        assertEquals(List.of(), git.codeChangesSince(first));

        Files.writeString(dir.resolve("README.md"), "hello again");
        assertEquals(List.of(), git.codeChangesSince(first), "documentation is not code");
        Files.writeString(dir.resolve("engine/src/main/A.java"), "class A { int x; }");
        Files.writeString(dir.resolve("engine/src/main/B.java"), "class B {}");
        assertEquals(List.of("engine/src/main/A.java", "engine/src/main/B.java"), git.codeChangesSince(first),
                "an uncommitted edit and an untracked file");
        git.run("add", "-A");
        git.run("commit", "-q", "-m", "two");
        assertEquals(List.of("engine/src/main/A.java", "engine/src/main/B.java"), git.codeChangesSince(first));
        assertEquals(List.of(), git.codeChangesSince(git.commit("HEAD")));
    }
}
