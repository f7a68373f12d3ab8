package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The JDK the tools/ launchers pick (tools/lib/jdk.sh), against fake JDK homes (a release file and bin/ scripts):
 * JAVA_HOME first and as given, then the directories searched, the recommended release first; on an unsupported
 * JDK every command prints one line and exits 2, before any build or JVM.
 */
class JdkSelectionTest {
    private static final Path ROOT = Paths.get(System.getenv().getOrDefault("TNSR_REPO_ROOT", "..")).toAbsolutePath();

    @TempDir
    Path tmp;

    /** A JDK home reporting {@code version}, with javac unless it is a JRE; its java fails if ever run. */
    private Path jdk(String name, String version, boolean javac) throws IOException {
        Path home = tmp.resolve(name);
        Files.createDirectories(home.resolve("bin"));
        Files.writeString(home.resolve("release"), "JAVA_VERSION=\"" + version + "\"\n");
        for (String tool : javac ? List.of("java", "javac") : List.of("java")) {
            Path p = home.resolve("bin").resolve(tool);
            Files.writeString(p, "#!/bin/sh\necho 'fake JDK run' >&2\nexit 99\n");
            Files.setPosixFilePermissions(p, PosixFilePermissions.fromString("rwxr-xr-x"));
        }
        return home;
    }

    private record Run(int exit, String out, String err) {
    }

    /** Runs {@code script} under bash with {@code env} on top of a PATH whose only java is {@code pathJava}. */
    private Run run(String script, Map<String, String> env, Path pathJava) throws Exception {
        Path bin = Files.createDirectories(tmp.resolve("path-bin"));
        Path link = bin.resolve("java");
        Files.deleteIfExists(link);
        if (pathJava != null) {
            Files.createSymbolicLink(link, pathJava.resolve("bin").resolve("java"));
        }
        ProcessBuilder pb = new ProcessBuilder("bash", "-c", script).directory(ROOT.toFile());
        pb.environment().remove("JAVA_HOME");
        // The system's own java must not be found: a PATH of the fake bin and coreutils, without /usr/lib/jvm.
        pb.environment().put("PATH", bin + ":" + coreutilsWithoutJava());
        pb.environment().putAll(env);
        pb.redirectOutput(tmp.resolve("out").toFile()).redirectError(tmp.resolve("err").toFile());
        Process p = pb.start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the launcher returned within 60 s");
        return new Run(p.exitValue(), Files.readString(tmp.resolve("out"), StandardCharsets.UTF_8),
                Files.readString(tmp.resolve("err"), StandardCharsets.UTF_8));
    }

    /** A directory of links to the commands jdk.sh and launch.sh use before they run java: no java among them. */
    private String coreutilsWithoutJava() throws IOException {
        Path dir = Files.createDirectories(tmp.resolve("coreutils"));
        for (String c : List.of("bash", "awk", "sed", "head", "dirname", "readlink", "cat", "grep", "od", "find", "mkdir", "env")) {
            Path link = dir.resolve(c);
            if (!Files.exists(link, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
                for (String d : List.of("/usr/bin", "/bin")) {
                    if (Files.isExecutable(Path.of(d, c))) {
                        Files.createSymbolicLink(link, Path.of(d, c));
                        break;
                    }
                }
            }
        }
        return dir.toString();
    }

    private static final String PICK = "source tools/lib/jdk.sh; tnsr_find_jdk; echo \"$TNSR_JDK_MAJOR $TNSR_JDK\"";

    @Test
    void jdk17IsPreferredThenTheNewestAndUnsupportedOnesAreSkipped() throws Exception {
        Path j17 = jdk("jdk17", "17.0.15", true);
        Path j21 = jdk("jdk21", "21.0.5", true);
        Path j25 = jdk("jdk25", "25.0.3", true);
        Path j26 = jdk("jdk26", "26", true);
        Path jre25 = jdk("jre25", "25.0.3", false);
        Run all = run(PICK, Map.of("TNSR_JDK_DIRS", j21 + " " + j26 + " " + j25 + " " + j17), null);
        assertEquals(0, all.exit(), all.err());
        assertEquals("17 " + j17.toRealPath(), all.out().strip(), "the preferred release wins over newer ones");

        Run newest = run(PICK, Map.of("TNSR_JDK_DIRS", j21 + " " + j25 + " " + jre25 + " " + j26), null);
        assertEquals("26 " + j26.toRealPath(), newest.out().strip(), "then the newest; JDK 21 and a JRE are passed over");

        Run fromPath = run(PICK, Map.of("TNSR_JDK_DIRS", ""), j26);
        assertEquals("26 " + j26.toRealPath(), fromPath.out().strip(), "the java on the PATH, last");
    }

    @Test
    void javaHomeIsUsedAsGivenEvenWhenABetterJdkIsInstalled() throws Exception {
        Path j17 = jdk("jdk17", "17.0.2", true);
        Path j25 = jdk("jdk25", "25.0.3", true);
        Run r = run(PICK, Map.of("JAVA_HOME", j17.toString(), "TNSR_JDK_DIRS", j25.toString()), null);
        assertEquals(0, r.exit(), r.err());
        assertEquals("17 " + j17, r.out().strip());
    }

    @Test
    void everyCommandOnAnUnsupportedJdkPrintsOneLineAndExits2() throws Exception {
        Path j21 = jdk("jdk21", "21.0.5", true);
        for (String tool : List.of("generate", "run-pipeline", "engine-bench", "perf-gate", "tnsr-dump")) {
            Run r = run("tools/" + tool + " --help", Map.of("JAVA_HOME", j21.toString()), null);
            assertEquals(2, r.exit(), tool + ": " + r.err());
            assertEquals("", r.out(), tool);
            List<String> lines = r.err().lines().toList();
            assertEquals(1, lines.size(), tool + " prints one line: " + r.err());
            assertTrue(lines.get(0).contains("JAVA_HOME=" + j21 + " is JDK 21"), lines.get(0));
            assertTrue(lines.get(0).contains("JDK 17, or JDK 22 or later"), lines.get(0));
        }
    }

    @Test
    void withNoSuitableJdkAnywhereTheLineSaysWhatWasFound() throws Exception {
        Path j11 = jdk("jdk11", "11.0.24", true);
        Path jre17 = jdk("jre17", "17.0.15", false);
        Run r = run("tools/generate --help", Map.of("TNSR_JDK_DIRS", jre17.toString()), j11);
        assertEquals(2, r.exit(), r.err());
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), r.err());
        assertTrue(lines.get(0).contains("no suitable JDK found"), lines.get(0));
        assertTrue(lines.get(0).contains("JDK 11 (" + j11.toRealPath() + ")"), lines.get(0));
        assertTrue(lines.get(0).contains("JDK 17 (" + jre17.toRealPath() + ")"), lines.get(0));
    }

    @Test
    void aJavaHomeThatIsAJreOrNotAJdkIsRefusedByName() throws Exception {
        Path jre = jdk("jre25", "25.0.3", false);
        Run r = run(PICK, Map.of("JAVA_HOME", jre.toString()), null);
        assertEquals(2, r.exit());
        assertTrue(r.err().contains("is a JRE (no javac)"), r.err());
        Run none = run(PICK, Map.of("JAVA_HOME", tmp.resolve("nowhere").toString()), null);
        assertEquals(2, none.exit());
        assertTrue(none.err().contains("has no bin/java"), none.err());
    }
}
