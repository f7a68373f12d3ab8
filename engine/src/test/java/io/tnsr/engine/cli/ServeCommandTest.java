package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import io.tnsr.engine.util.Jackson;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code tools/serve} as a real process with real stage processes, queried over HTTP, stopped by SIGTERM. */
@Timeout(180)
class ServeCommandTest {

    @Test
    void anAddressBeyondLoopbackNeedsAnApiKeyOrInsecure() {
        Object[] r = CliRun.run(new ServeCommand(), "--host", "0.0.0.0", "--port", "0");
        String err = (String) r[2];
        assertEquals(2, r[0], err);
        assertTrue(err.contains("--api-key-file") && err.contains("--insecure"), err);
    }

    @Test
    void aValueOutOfRangeIsRefusedNamingItsOptionBeforeTheModelLoads() {
        String[][] cases = {
            {"--micro-batches", "0", "--micro-batches must be from 1 to --max-sequences (16), got 0"},
            {"--micro-batches", "17", "--micro-batches must be from 1 to --max-sequences (16), got 17"},
            {"--port", "70000", "--port must be from 0 (any free port) to 65535, got 70000"},
            {"--max-sequences", "0", "--max-sequences must be 1 or more, got 0"},
            {"--prefill-chunk", "0", "--prefill-chunk must be 1 or more, got 0"},
            {"--max-queued", "-1", "--max-queued must be 0 or more, got -1"},
            {"--max-wait", "-2", "--max-wait must be 0 (no limit) or more seconds, got -2.0"}};
        for (String[] c : cases) {
            List<String> args = new ArrayList<>(List.of(c[0], c[1]));
            if (!c[0].equals("--max-sequences")) {
                args.addAll(List.of("--max-sequences", "16"));
            }
            Object[] r = CliRun.run(new ServeCommand(), args.toArray(String[]::new));
            String err = (String) r[2];
            assertEquals(2, r[0], err);
            assertEquals("serve: " + c[2], err.strip());
        }
    }

    @Test
    void anAddressBeyondLoopbackWithInsecureServesAndSaysSoLoudly() throws Exception {
        // 0.0.0.0, every address of the host, is not loopback: without a key it needs --insecure. One micro-batch
        // through two stages: they take turns, each with as many threads as the machine has CPUs.
        Path model = TestModels.get(ModelSpec.tiny());
        int cpus = Runtime.getRuntime().availableProcessors();
        Process serve = new ProcessBuilder(serve("--stages", "2", "--micro-batches", "1", "--threads-per-stage",
                String.valueOf(cpus), "--model", model.toString(), "--host", "0.0.0.0", "--port", "0", "--insecure"))
                .redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        BlockingQueue<String> lines = stderr(serve);
        try {
            Started started = awaitReady(lines, "0.0.0.0");
            String port = started.port();
            List<String> seen = started.lines();
            assertTrue(seen.stream().anyMatch(l -> l.startsWith("serve: listening on http://0.0.0.0:" + port)
                    && l.endsWith(", " + cpus + (cpus == 1 ? " thread" : " threads") + " each, 1 micro-batch;"
                    + " /health says when ready)")), () -> "the layout, on stderr: " + seen);
            assertTrue(seen.stream().anyMatch(l -> l.startsWith("serve: WARNING: --insecure: listening on 0.0.0.0 with no API key")
                    && l.contains("anyone who can reach this address can use the model")), () -> "the warning, on stderr: " + seen);
            HttpClient http = HttpClient.newHttpClient();
            URI base = URI.create("http://127.0.0.1:" + port);
            HttpResponse<String> models = http.send(HttpRequest.newBuilder(base.resolve("/v1/models")).timeout(Duration.ofSeconds(10))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, models.statusCode(), "served without a key: " + models.body());
            HttpResponse<String> health = http.send(HttpRequest.newBuilder(base.resolve("/health")).timeout(Duration.ofSeconds(10))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode(), health.body());
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                    .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"once\", \"max_tokens\": 6, \"temperature\": 0}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            assertTrue(Jackson.MAPPER.readTree(r.body()).at("/usage/completion_tokens").asInt() > 0, r.body());
            serve.destroy();                                   // SIGTERM
            assertTrue(serve.waitFor(60, TimeUnit.SECONDS), "serve ends");
            assertEquals(0, serve.exitValue(), () -> "exit status 0 after SIGTERM: " + String.join("\n", lines));
        } finally {
            serve.destroyForcibly();
        }
    }

    @Test
    void servesCompletionsUntilSigtermThenStopsEveryStageAndExitsZero(@TempDir Path dir) throws Exception {
        Path model = TestModels.get(ModelSpec.tiny());
        Path keyFile = Files.writeString(dir.resolve("key"), "k-123\n");
        Path tmp = Files.createDirectory(dir.resolve("tmp")); // serve's own temporary directory
        List<String> cmd = serve("--stages", "2", "--model", model.toString(), "--port", "0",
                "--max-sequences", "4", "--max-queued", "2", "--api-key-file", keyFile.toString(), "--chat-template", "chatml");
        cmd.add(cmd.indexOf("-cp"), "-Djava.io.tmpdir=" + tmp); // after the test JVM's own flags, so that it wins
        Process serve = new ProcessBuilder(cmd).start();
        BlockingQueue<String> lines = stderr(serve);
        java.util.concurrent.CompletableFuture<String> stdout = java.util.concurrent.CompletableFuture.supplyAsync(() -> {
            try {
                return new String(serve.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            } catch (java.io.IOException e) {
                return "(stdout not read: " + e + ")";
            }
        });
        try {
            Started started = awaitReady(lines, "127.0.0.1");
            String port = started.port();
            List<String> seen = started.lines();
            // The console at start: where it listens and that it is ready, no stage's start-up lines (--verbose has them).
            assertEquals(2, seen.size(), () -> "stderr at start: " + seen);
            int threads = Math.max(1, Runtime.getRuntime().availableProcessors() / 2);
            assertTrue(seen.get(0).startsWith("serve: listening on http://127.0.0.1:" + port + " (starting 2 stages of "), seen.get(0));
            assertTrue(seen.get(0).endsWith(", " + threads + (threads == 1 ? " thread" : " threads") + " each (auto);"
                    + " /health says when ready)"), "the threads auto gave each stage: " + seen.get(0));
            assertTrue(seen.get(1).matches("serve: 2 stages ready in [0-9.]+ s; up to 4 requests at once, 2 waiting"), seen.get(1));
            HttpClient http = HttpClient.newHttpClient();
            URI base = URI.create("http://127.0.0.1:" + port);
            HttpResponse<String> health = http.send(HttpRequest.newBuilder(base.resolve("/health")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(200, health.statusCode(), health.body());
            HttpResponse<String> anonymous = http.send(HttpRequest.newBuilder(base.resolve("/v1/models")).build(),
                    HttpResponse.BodyHandlers.ofString());
            assertEquals(401, anonymous.statusCode(), anonymous.body());
            HttpResponse<String> models = http.send(HttpRequest.newBuilder(base.resolve("/v1/models"))
                    .header("Authorization", "Bearer k-123").build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, models.statusCode(), models.body());
            assertEquals(model.getFileName().toString().replaceFirst("\\.gguf$", ""),
                    Jackson.MAPPER.readTree(models.body()).at("/data/0/id").asText(), "the model, named by its file: " + models.body());
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                    .timeout(Duration.ofSeconds(60)).header("Content-Type", "application/json").header("Authorization", "Bearer k-123")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"once upon a time\", \"max_tokens\": 12, \"temperature\": 0}"))
                    .build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, r.statusCode(), r.body());
            JsonNode body = Jackson.MAPPER.readTree(r.body());
            assertTrue(body.at("/usage/completion_tokens").asInt() > 0, r.body());
            List<ProcessHandle> stages = serve.descendants().toList();
            assertEquals(2, stages.size(), "two stage processes");

            HttpResponse<String> chat = http.send(HttpRequest.newBuilder(base.resolve("/v1/chat/completions"))
                    .timeout(Duration.ofSeconds(60)).header("Authorization", "Bearer k-123")
                    .POST(HttpRequest.BodyPublishers.ofString("{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], "
                            + "\"max_tokens\": 5}")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, chat.statusCode(), chat.body());
            assertEquals("assistant", Jackson.MAPPER.readTree(chat.body()).at("/choices/0/message/role").asText());
            HttpResponse<String> metrics = http.send(HttpRequest.newBuilder(base.resolve("/metrics"))
                    .header("Authorization", "Bearer k-123").build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(200, metrics.statusCode());
            assertTrue(metrics.body().contains("tnsr_generation_tokens_total " + (body.at("/usage/completion_tokens").asInt()
                    + Jackson.MAPPER.readTree(chat.body()).at("/usage/completion_tokens").asInt())), metrics.body());
            assertTrue(metrics.body().contains("tnsr_hop_latency_seconds_count{hop=\"stage0-stage1\"}"), metrics.body());
            assertTrue(metrics.body().contains("tnsr_kv_cache_pages_used{stage=\"1\"} 0"), metrics.body());

            // llama-server's tokenizer endpoints, and the chat prompt as rendered
            JsonNode ids = Jackson.MAPPER.readTree(post(http, base, "/tokenize", "{\"content\": \"once upon a time\"}")).get("tokens");
            assertTrue(ids.size() > 1, ids::toString);
            assertEquals("once upon a time", Jackson.MAPPER.readTree(post(http, base, "/detokenize", "{\"tokens\": " + ids + "}"))
                    .get("content").asText());
            assertEquals("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", Jackson.MAPPER.readTree(post(http, base,
                    "/apply-template", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}")).get("prompt").asText());

            // A client that leaves mid-stream: its place and every stage's KV cache pages are given back. ignore_eos: a sampled
            // end of text must not finish the request before the server sees the client gone.
            HttpResponse<java.io.InputStream> left = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                    .header("Authorization", "Bearer k-123").POST(HttpRequest.BodyPublishers.ofString(
                            "{\"prompt\": \"once upon a time\", \"max_tokens\": 240, \"stream\": true, \"ignore_eos\": true}")).build(),
                    HttpResponse.BodyHandlers.ofInputStream());
            assertTrue(left.body().read() >= 0, "the stream started");
            left.body().close();
            String freed = "";
            for (long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); System.nanoTime() < until; Thread.sleep(20)) {
                String m = http.send(HttpRequest.newBuilder(base.resolve("/metrics")).header("Authorization", "Bearer k-123").build(),
                        HttpResponse.BodyHandlers.ofString()).body();
                freed = m;
                if (m.contains("tnsr_requests_running 0") && m.contains("tnsr_kv_cache_pages_used{stage=\"0\"} 0")
                        && m.contains("tnsr_kv_cache_pages_used{stage=\"1\"} 0") && m.contains("finish_reason=\"cancelled\"")) {
                    break;
                }
            }
            assertTrue(freed.contains("tnsr_requests_total{finish_reason=\"cancelled\"} 1"), freed);
            assertTrue(freed.contains("tnsr_kv_cache_pages_used{stage=\"0\"} 0") && freed.contains("tnsr_kv_cache_pages_used{stage=\"1\"} 0"),
                    freed);

            // A stream in flight when SIGTERM comes is let finish: its events, its finish chunk, [DONE].
            HttpResponse<java.io.InputStream> stream = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                    .header("Authorization", "Bearer k-123").POST(HttpRequest.BodyPublishers.ofString(
                            "{\"prompt\": \"once upon a time\", \"max_tokens\": 200, \"stream\": true, \"ignore_eos\": true}")).build(),
                    HttpResponse.BodyHandlers.ofInputStream());
            assertEquals(200, stream.statusCode());
            List<String> events = new ArrayList<>();
            try (BufferedReader in = new BufferedReader(new InputStreamReader(stream.body(), StandardCharsets.UTF_8))) {
                String first = in.readLine();
                assertTrue(first.startsWith("data: {"), first);
                serve.destroy();                               // SIGTERM, mid-stream
                for (String l; (l = in.readLine()) != null; ) {
                    if (l.startsWith("data: ")) {
                        events.add(l.substring(6));
                    }
                }
            }
            assertEquals("[DONE]", events.get(events.size() - 1), "the stream ended cleanly: " + events);
            assertTrue(Jackson.MAPPER.readTree(events.get(events.size() - 2)).at("/choices/0/finish_reason").isTextual());
            assertTrue(serve.waitFor(60, TimeUnit.SECONDS), "serve ends");
            assertEquals(0, serve.exitValue(), () -> "exit status 0 after SIGTERM: " + String.join("\n", lines));
            assertEquals("", stdout.get(10, TimeUnit.SECONDS), "serve prints nothing on stdout: its console is stderr");
            for (ProcessHandle p : stages) {
                p.onExit().get(10, TimeUnit.SECONDS);
                assertFalse(p.isAlive(), "stage process " + p.pid() + " ended");
            }
            try (var files = Files.list(tmp)) { // the metrics directory of the run went with it
                assertEquals(List.of(), files.toList());
            }
        } finally {
            serve.destroyForcibly();
        }
    }

    /** The command line of {@code tools/serve} with {@code args}, on this JVM and class path. */
    /** What serve printed on stderr until it said it was ready, and the port it said it listens on. */
    record Started(String port, List<String> lines) {
    }

    /** Reads serve's stderr lines until "ready in" (at most 90 s), asserting that it named its port on {@code host}. */
    static Started awaitReady(BlockingQueue<String> lines, String host) throws InterruptedException {
        Pattern listening = Pattern.compile("listening on http://" + Pattern.quote(host) + ":(\\d+)");
        String port = null;
        boolean ready = false;
        List<String> seen = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
        while (!ready && System.nanoTime() < deadline) {
            String l = lines.poll(1, TimeUnit.SECONDS);
            if (l == null) {
                continue;
            }
            seen.add(l);
            Matcher m = listening.matcher(l);
            if (m.find()) {
                port = m.group(1);
            }
            ready = l.contains("ready in");
        }
        assertNotNull(port, () -> "serve said where it listens: " + seen);
        assertTrue(ready, () -> "serve said it is ready: " + seen);
        return new Started(port, seen);
    }

    private static List<String> serve(String... args) {
        List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-javaagent") && !a.startsWith("-agentlib")).toList());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), ServeCommand.class.getName()));
        cmd.addAll(List.of(args));
        return cmd;
    }

    /** The process's stderr lines as they come, read by a thread of their own. */
    private static BlockingQueue<String> stderr(Process p) {
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getErrorStream(), StandardCharsets.UTF_8))) {
                for (String l; (l = in.readLine()) != null; ) {
                    if (!l.startsWith("WARNING: Using incubator modules")) {   // the JVM's, which the launcher filters out
                        lines.add(l);
                    }
                }
            } catch (Exception ignored) {
                // the process ended
            }
        });
        reader.setDaemon(true);
        reader.start();
        return lines;
    }

    private static String post(HttpClient http, URI base, String path, String body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(30))
                .header("Authorization", "Bearer k-123").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertEquals(200, r.statusCode(), path + ": " + r.body());
        return r.body();
    }
}
