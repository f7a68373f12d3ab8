package io.tnsr.engine.stage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.process.ChildJvm;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code tools/stage} as a process: what it refuses to start with, and what it says. */
@Timeout(120)
class StageMainTest {
    @TempDir
    Path dir;

    private record Result(int status, String out, String err) {
    }

    private Result run(String... args) throws Exception {
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx256m");
        cmd.addAll(ChildJvm.classPath());
        cmd.add(StageMain.class.getName());
        cmd.addAll(List.of(args));
        Path out = dir.resolve("out");
        Path err = dir.resolve("err");
        Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile()).start();
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "ended");
        return new Result(p.exitValue(), Files.readString(out), Files.readString(err));
    }

    private String model() {
        return TestModels.get(ModelSpec.tiny()).toString();
    }

    @Test
    void aNonLoopbackAddressWithoutAKeyIsRefused() throws Exception {
        Result r = run("--model", model(), "--layers", "0:4", "--listen", "0.0.0.0:0");
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.startsWith("FAILED ") && r.out.contains("--key-file") && r.out.contains("--insecure"), r.out);
    }

    @Test
    void aKeyTooShortOrMissingIsRefusedNamingTheFile() throws Exception {
        Path key = dir.resolve("short.key");
        Files.writeString(key, "short\n");
        Result r = run("--model", model(), "--layers", "0:4", "--listen", "0.0.0.0:0", "--key-file", key.toString());
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains(key.toString()) && r.out.contains("at least 16"), r.out);
        r = run("--model", model(), "--layers", "0:4", "--key-file", dir.resolve("none.key").toString());
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains("none.key"), r.out);
    }

    @Test
    void optionsOutOfRangeAreRefusedNamingTheOption() throws Exception {
        Result r = run("--model", model(), "--layers", "0:4", "--ring-size", "3");
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains("--ring-size must be a power of two"), r.out);
        r = run("--model", model(), "--layers", "0:4", "--max-sequences-per-frame", "0");
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains("--max-sequences-per-frame"), r.out);
        r = run("--model", model(), "--layers", "0:4", "--liveness-ms", "10");
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains("liveness"), r.out);
        r = run("--model", model(), "--layers", "4:9");
        assertEquals(2, r.status, r.toString());
        assertTrue(r.out.contains("outside the model's 4 layers"), r.out);
    }

    @Test
    void insecureStartsAndSaysSoLoudlyThenStopsCleanlyOnSigterm() throws Exception {
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx256m");
        cmd.addAll(ChildJvm.classPath());
        cmd.addAll(List.of(StageMain.class.getName(), "--model", model(), "--layers", "0:4", "--listen", "0.0.0.0:0", "--insecure"));
        Path err = dir.resolve("err");
        Process p = new ProcessBuilder(cmd).redirectError(err.toFile()).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            assertTrue(out.readLine().startsWith("LISTENING "));
            assertEquals("READY", out.readLine());
            assertTrue(Files.readString(err).contains("WITHOUT AUTHENTICATION"), Files.readString(err));
            new ProcessBuilder("kill", "-TERM", String.valueOf(p.pid())).start().waitFor(5, TimeUnit.SECONDS);
            assertTrue(p.waitFor(20, TimeUnit.SECONDS));
            assertEquals("STOPPED", out.readLine());
        } finally {
            p.destroyForcibly();
        }
        assertEquals(128 + 15, p.exitValue(), "ended by SIGTERM, after a clean stop");
    }
}
