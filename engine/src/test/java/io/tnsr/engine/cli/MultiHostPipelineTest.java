package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.process.ChildJvm;
import io.tnsr.engine.stage.StageMain;
import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.NetNamespaces;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * Four hosts made of network namespaces joined by veth links to a bridge: the coordinator ({@code run-pipeline}) on
 * host 0 and three {@code tools/stage} services (stories260K, layers 0:2, 2:4, 4:5) on hosts 1 to 3, with a shared
 * key. Only addresses inside those namespaces are used. A run gives the golden tokens; cutting stage 1's link in the
 * middle of a run is reported within the liveness bound, naming the link; once the link is back, the same services
 * serve the next run.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(300)
class MultiHostPipelineTest {
    private static final int PORT = 7001;
    private static final long LIVENESS_MS = 3000;

    private Path dir;
    private NetNamespaces net;
    private Path model;
    private Path key;
    private Path config;

    @BeforeAll
    void hosts() throws Exception {
        model = SharedData.path("models/stories260K.gguf");
        net = NetNamespaces.createOrSkip("multihost", 4);
        dir = Files.createTempDirectory("multihost");
        key = dir.resolve("pipeline.key");
        Files.writeString(key, "a key shared by the coordinator and the three stages\n");
        Files.setPosixFilePermissions(key, PosixFilePermissions.fromString("rw-------"));
        int[][] layers = {{0, 2}, {2, 4}, {4, 5}};
        StringBuilder stages = new StringBuilder();
        for (int i = 0; i < 3; i++) {
            int host = i + 1;
            List<String> cmd = java(StageMain.class.getName());
            cmd.addAll(List.of("--model", model.toString(), "--layers", layers[i][0] + ":" + layers[i][1],
                    "--listen", net.address(host) + ":" + PORT, "--key-file", key.toString(),
                    "--liveness-ms", String.valueOf(LIVENESS_MS), "--fingerprint-cache", dir.resolve("cache").toString()));
            net.start(host, cmd, dir.resolve("stage" + i + ".log"));
            stages.append(i == 0 ? "" : ",\n").append("    {\"layers\": [").append(layers[i][0]).append(", ").append(layers[i][1])
                    .append("], \"external\": \"").append(net.address(host)).append(':').append(PORT).append("\"}");
        }
        config = dir.resolve("three-hosts.json");
        Files.writeString(config, "{\n  \"stages\": [\n" + stages + "\n  ]\n}\n");
        for (int i = 0; i < 3; i++) {
            awaitLine(dir.resolve("stage" + i + ".log"), "READY", 90);
        }
    }

    @AfterAll
    void down() {
        if (net != null) {
            net.close();
        }
    }

    private static List<String> java(String mainClass) {
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.add("-Xmx512m");
        cmd.addAll(ChildJvm.classPath());
        cmd.add(mainClass);
        return cmd;
    }

    private static void awaitLine(Path log, String text, int seconds) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < deadline) {
            if (Files.exists(log) && Files.readString(log).contains(text)) {
                return;
            }
            Thread.sleep(100);
        }
        throw new AssertionError("no '" + text + "' in " + log + " within " + seconds + " s:\n"
                + (Files.exists(log) ? Files.readString(log) : "(no log)"));
    }

    /** run-pipeline on host 0 against the three stage services; stdout and stderr in files. */
    private Process coordinator(String name, String... args) throws IOException {
        List<String> cmd = java(RunPipelineCommand.class.getName());
        cmd.addAll(List.of("--config", config.toString(), "--model", model.toString(), "--key-file", key.toString(),
                "--liveness", String.valueOf(LIVENESS_MS / 1000.0)));
        cmd.addAll(List.of(args));
        return new ProcessBuilder(net.command(0, cmd)).redirectOutput(dir.resolve(name + ".out").toFile())
                .redirectError(dir.resolve(name + ".err").toFile()).start();
    }

    private String out(String name) throws IOException {
        return Files.readString(dir.resolve(name + ".out"), StandardCharsets.UTF_8);
    }

    private String err(String name) throws IOException {
        return Files.readString(dir.resolve(name + ".err"), StandardCharsets.UTF_8);
    }

    private void assertGoldenRun(String name) throws Exception {
        Golden.Case c = Golden.greedyCases().get(2);
        Process p = coordinator(name, "--prompt", c.prompt(), "--temperature", "0", "--max-tokens", String.valueOf(c.maxNewTokens()),
                "--json");
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the run ended");
        assertEquals(0, p.exitValue(), () -> uncheckedErr(name));
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(out(name).strip());
        Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
        assertArrayEquals(c.generatedTokens(), TestJson.ints(seq.get("generated_tokens")), () -> uncheckedErr(name));
        assertEquals(c.text(), c.prompt() + seq.get("text"));
    }

    private String uncheckedErr(String name) {
        try {
            return err(name);
        } catch (IOException e) {
            return e.toString();
        }
    }

    @Test
    void aRunAcrossFourHostsGivesTheGoldenTokensACutLinkIsReportedInTimeAndTheStagesServeTheNextRun() throws Exception {
        assertGoldenRun("first");

        Process long_ = coordinator("cut", "--prompt", "Once upon a time", "--requests", "8", "--max-tokens", "2000", "--ignore-eos",
                "--temperature", "0", "--json", "--recovery-timeout", "0");
        Path stage2Log = dir.resolve("stage2.log");
        long sessions = Files.readString(stage2Log).lines().filter(l -> l.contains("session started")).count();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (Files.readString(stage2Log).lines().filter(l -> l.contains("session started")).count() == sessions) {
            assertTrue(System.nanoTime() < deadline, "the second session never started:\n" + uncheckedErr("cut"));
            Thread.sleep(50);
        }
        Thread.sleep(500);   // generating
        assertTrue(long_.isAlive(), "still generating when the link is cut:\n" + uncheckedErr("cut"));
        long cut = System.nanoTime();
        net.cut(2);   // stage1's host
        try {
            assertTrue(long_.waitFor(30, TimeUnit.SECONDS), "the coordinator ended after the cut");
            double seconds = (System.nanoTime() - cut) / 1e9;
            assertEquals(3, long_.exitValue(), () -> uncheckedErr("cut"));
            Map<?, ?> json = (Map<?, ?>) TestJson.parse(out("cut").strip());
            String error = (String) json.get("error");
            assertTrue(error.contains("link stage1->stage2") && error.contains("no frame or heartbeat from stage1"), error);
            assertTrue(seconds < LIVENESS_MS / 1000.0 + 3, "reported " + seconds + " s after the cut (bound "
                    + LIVENESS_MS / 1000.0 + " s, plus the coordinator's exit)");
        } finally {
            net.restore(2);
        }
        assertGoldenRun("after");
    }

    @Test
    void aRunWhoseLinkIsCutAndRestoredRecoversAndGivesTheTokensOfAnUninterruptedRun() throws Exception {
        String[] run = {"--prompt", "Once upon a time", "--prompt", "One day", "--requests", "4", "--max-tokens", "400",
                "--ignore-eos", "--temperature", "0", "--json", "--recovery-timeout", "60"};
        Process whole = coordinator("whole", run);
        assertTrue(whole.waitFor(120, TimeUnit.SECONDS));
        assertEquals(0, whole.exitValue(), () -> uncheckedErr("whole"));
        List<?> want = (List<?>) ((Map<?, ?>) TestJson.parse(out("whole").strip())).get("sequences");

        Path stage2Log = dir.resolve("stage2.log");
        long sessions = Files.readString(stage2Log).lines().filter(l -> l.contains("session started")).count();
        Process p = coordinator("restored", run);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (Files.readString(stage2Log).lines().filter(l -> l.contains("session started")).count() == sessions) {
            assertTrue(System.nanoTime() < deadline, "the session never started:\n" + uncheckedErr("restored"));
            Thread.sleep(50);
        }
        Thread.sleep(300);
        net.cut(2);
        try {
            awaitLine(dir.resolve("restored.err"), "recovering", 15);
        } finally {
            net.restore(2);
        }
        assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the run ended");
        assertEquals(0, p.exitValue(), () -> uncheckedErr("restored"));
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(out("restored").strip());
        List<?> got = (List<?>) json.get("sequences");
        for (int i = 0; i < want.size(); i++) {
            assertEquals(((Map<?, ?>) want.get(i)).get("generated_tokens"), ((Map<?, ?>) got.get(i)).get("generated_tokens"),
                    "sequence " + i + " after the cut link was restored");
        }
        List<?> recoveries = (List<?>) json.get("recoveries");
        assertEquals(1, recoveries.size(), () -> uncheckedErr("restored"));
        assertTrue(((String) ((Map<?, ?>) recoveries.get(0)).get("cause")).contains("stage1"), recoveries::toString);
    }
}
