package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code tools/serve} with two stage processes, idle: it stays healthy past the liveness bound (heartbeats); a stage
 * stopped with SIGSTOP is noticed within the bound (not only at the next request), {@code /health} says the pipeline
 * is recovering and names the stage, the stage is replaced, and the server serves again.
 */
@Timeout(120)
class ServeLivenessTest {

    /** A process's arguments, NUL-separated, from /proc. */
    private static String commandLine(long pid) {
        try {
            return new String(java.nio.file.Files.readAllBytes(Path.of("/proc", String.valueOf(pid), "cmdline")), StandardCharsets.UTF_8);
        } catch (java.io.IOException e) {
            return "";
        }
    }

    @Test
    void aStageStoppedWhileTheServerIsIdleIsReportedWithinTheBoundAndReplaced() throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-javaagent") && !a.startsWith("-agentlib")).toList());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), ServeCommand.class.getName(),
                "--stages", "2", "--model", model.toString(), "--port", "0", "--liveness", "2"));
        Process serve = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(serve.getInputStream(), StandardCharsets.UTF_8))) {
                for (String l; (l = in.readLine()) != null; ) {
                    lines.add(l);
                }
            } catch (Exception ignored) {
                // the process ended
            }
        });
        reader.setDaemon(true);
        reader.start();
        List<ProcessHandle> stages = List.of();
        try {
            String port = ServeCommandTest.awaitReady(lines, "127.0.0.1").port();
            HttpClient http = HttpClient.newHttpClient();
            URI health = URI.create("http://127.0.0.1:" + port + "/health");
            assertEquals(200, http.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString()).statusCode());
            Thread.sleep(3000);   // idle for longer than the bound: heartbeats keep it healthy
            HttpResponse<String> idle = http.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, idle.statusCode(), idle.body());

            stages = serve.descendants().filter(p -> commandLine(p.pid()).contains("--layers\u00002:4")).toList();
            assertEquals(1, stages.size(), "the last stage's process");
            long stopped = System.nanoTime();
            new ProcessBuilder("kill", "-STOP", String.valueOf(stages.get(0).pid())).start().waitFor(5, TimeUnit.SECONDS);
            HttpResponse<String> r;
            do {
                Thread.sleep(50);
                r = http.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString());
            } while (r.statusCode() == 200 && System.nanoTime() - stopped < TimeUnit.SECONDS.toNanos(15));
            double seconds = (System.nanoTime() - stopped) / 1e9;
            assertEquals(503, r.statusCode(), r.body());
            assertTrue(r.body().contains("recovering") && r.body().contains("stage1"), r.body());
            assertTrue(seconds < 2 + 2, "reported " + seconds + " s after SIGSTOP (bound 2 s)");
            do {
                Thread.sleep(100);
                r = http.send(HttpRequest.newBuilder(health).build(), HttpResponse.BodyHandlers.ofString());
            } while (r.statusCode() != 200 && System.nanoTime() - stopped < TimeUnit.SECONDS.toNanos(60));
            assertEquals(200, r.statusCode(), () -> "recovered: " + lines);
            HttpResponse<String> completion = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/v1/completions"))
                    .header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"once upon a time\", \"max_tokens\": 8}")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, completion.statusCode(), completion.body());
            assertTrue(lines.stream().anyMatch(l -> l.contains("serve: the pipeline is recovering") && l.contains("stage1")),
                    lines::toString);
            assertTrue(lines.stream().anyMatch(l -> l.contains("serve: the pipeline recovered")), lines::toString);
            assertTrue(serve.isAlive());
        } finally {
            for (ProcessHandle s : stages) {
                s.destroyForcibly();
            }
            serve.destroyForcibly();
            serve.waitFor(10, TimeUnit.SECONDS);
        }
    }
}
