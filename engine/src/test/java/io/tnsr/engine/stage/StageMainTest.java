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
    void anErrorInTheComputeThreadEndsTheStageWithStatus3AndAMessage() throws Exception {
        // Direct memory far smaller than the KV cache may grow to: the cache's page allocation throws
        // OutOfMemoryError on the compute thread once enough positions are held.
        Path model = TestModels.get(ModelSpec.tiny());
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx") || a.startsWith("-XX:MaxDirectMemorySize")));
        cmd.addAll(List.of("-Xmx256m", "-XX:MaxDirectMemorySize=6m"));
        cmd.addAll(ChildJvm.classPath());
        cmd.addAll(List.of(StageMain.class.getName(), "--model", model.toString(), "--layers", "0:4", "--ring-size", "4",
                "--max-tokens-per-frame", "32", "--max-sequences-per-frame", "8", "--max-frame-bytes", String.valueOf(1 << 20),
                "--kv-cache-tokens", "1000000"));
        Process p = new ProcessBuilder(cmd).redirectError(dir.resolve("err").toFile()).start();
        try (BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String listening = out.readLine();
            assertTrue(listening != null && listening.startsWith("LISTENING "), listening);
            assertEquals("READY", out.readLine());
            int port = Integer.parseInt(listening.substring("LISTENING ".length()));
            io.tnsr.engine.model.LlamaConfig config;
            try (io.tnsr.engine.gguf.GgufFile f = io.tnsr.engine.gguf.GgufFile.open(model)) {
                config = io.tnsr.engine.model.LlamaConfig.fromGguf(f);
            }
            io.tnsr.engine.pipeline.PipelineConfig pc = new io.tnsr.engine.pipeline.PipelineConfig("127.0.0.1",
                    List.of(new io.tnsr.engine.pipeline.StageSpec(0, 4, 0, List.of(), null)), 4, 1 << 20, 32, 8,
                    io.tnsr.engine.pipeline.WaitMode.BLOCK, 1_000_000, 0);
            io.tnsr.engine.coordinator.PipelineLinks.Links links = io.tnsr.engine.coordinator.PipelineLinks.open(
                    List.of("127.0.0.1:" + port), pc, config, io.tnsr.engine.gguf.ModelFingerprint.of(model).bytes(),
                    io.tnsr.engine.link.LinkOptions.defaults(), 20_000);
            java.nio.ByteBuffer b = java.nio.ByteBuffer.allocateDirect(4096).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            org.agrona.concurrent.UnsafeBuffer u = new org.agrona.concurrent.UnsafeBuffer(b);
            int[] ids = new int[32];
            java.util.Arrays.fill(ids, 5);
            try {
                for (int seq = 0; seq < 10_000 && p.isAlive(); seq++) {
                    for (int pos = 0; pos < 256; pos += 32) {   // each sequence fills the context: 16 pages
                        int len = io.tnsr.wire.FrameEncoder.encodeTokens(u, 0, seq * 8L + pos / 32 + 1, 0, ids, 0, 32, 1, 0);
                        io.tnsr.wire.FrameEncoder.putSequenceEntry(u, 0, 0, seq, pos, 32, 0);
                        links.toFirst().write(b, len);
                    }
                }
            } catch (java.io.IOException expected) {
                // the stage went away
            } finally {
                links.toFirst().closeQuietly();
                links.fromLast().closeQuietly();
            }
            assertTrue(p.waitFor(30, TimeUnit.SECONDS), "the stage ended");
            String rest = out.lines().collect(java.util.stream.Collectors.joining("\n"));
            assertEquals(3, p.exitValue(), rest);
            assertTrue(rest.startsWith("FAILED ") && rest.contains("compute thread") && rest.contains("OutOfMemoryError"), rest);
        } finally {
            p.destroyForcibly();
        }
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
            assertEquals("STOPPED", out.readLine(), Files.readString(err));
        } finally {
            p.destroyForcibly();
        }
        assertEquals(128 + 15, p.exitValue(), "ended by SIGTERM, after a clean stop");
    }
}
