package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.util.Jackson;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The OpenAI completions API over a serving pipeline, through a real HTTP client. */
@Timeout(120)
class OpenAiHttpServerTest {
    private static final String PROMPT = "once upon a time";

    private ServingPipeline pipeline;
    private OpenAiHttpServer server;
    private URI base;
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    @BeforeEach
    void start() throws Exception {
        pipeline = new ServingPipeline();
        server = new OpenAiHttpServer(pipeline.service, "tiny", "127.0.0.1", 0);
        base = URI.create("http://127.0.0.1:" + server.start());
    }

    /** Replaces the server and pipeline of {@link #start} with an HTTP server over {@code p}. */
    private void serveOn(ServingPipeline p) throws Exception {
        server.close();
        pipeline.close();
        pipeline = p;
        server = new OpenAiHttpServer(pipeline.service, "tiny", "127.0.0.1", 0);
        base = URI.create("http://127.0.0.1:" + server.start());
    }

    @AfterEach
    void stop() throws Exception {
        server.close();
        pipeline.close();
    }

    private HttpResponse<String> post(String path, String body) throws Exception {
        return http.send(HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private HttpResponse<String> get(String path) throws Exception {
        return http.send(HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(10)).GET().build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static JsonNode json(HttpResponse<String> r) throws Exception {
        return Jackson.MAPPER.readTree(r.body());
    }

    @Test
    void aCompletionAnswersWithGeneratesTextAndItsUsage() throws Exception {
        HttpResponse<String> r = post("/v1/completions", "{\"model\": \"tiny\", \"prompt\": \"" + PROMPT
                + "\", \"max_tokens\": 20, \"temperature\": 0}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode body = json(r);
        assertEquals("text_completion", body.get("object").asText());
        assertEquals(pipeline.alone(PROMPT, 20, SamplingConfig.GREEDY), body.at("/choices/0/text").asText());
        String finish = body.at("/choices/0/finish_reason").asText();
        assertTrue(finish.equals("length") || finish.equals("stop"), finish);
        JsonNode usage = body.get("usage");
        assertEquals(usage.get("prompt_tokens").asInt() + usage.get("completion_tokens").asInt(), usage.get("total_tokens").asInt());
    }

    @Test
    void aStreamIsReadEventByEventAndEndsWithTheFinishTheUsageAndDone() throws Exception {
        HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(
                        "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 20, \"temperature\": 0, \"stream\": true,"
                                + " \"stream_options\": {\"include_usage\": true}}")).build(), HttpResponse.BodyHandlers.ofInputStream());
        assertEquals(200, r.statusCode());
        assertTrue(r.headers().firstValue("Content-Type").orElse("").startsWith("text/event-stream"));
        List<String> events = new ArrayList<>();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null; ) {
                if (line.startsWith("data: ")) {
                    events.add(line.substring(6));
                } else {
                    assertEquals("", line, "events are separated by one blank line");
                }
            }
        }
        assertEquals("[DONE]", events.get(events.size() - 1));
        JsonNode usage = Jackson.MAPPER.readTree(events.get(events.size() - 2));
        assertEquals(0, usage.get("choices").size());
        assertTrue(usage.at("/usage/completion_tokens").asInt() > 0);
        JsonNode last = Jackson.MAPPER.readTree(events.get(events.size() - 3));
        assertTrue(last.at("/choices/0/finish_reason").isTextual());
        StringBuilder text = new StringBuilder();
        for (String e : events.subList(0, events.size() - 3)) {
            JsonNode chunk = Jackson.MAPPER.readTree(e);
            assertTrue(chunk.at("/choices/0/finish_reason").isNull());
            text.append(chunk.at("/choices/0/text").asText());
        }
        assertEquals(pipeline.alone(PROMPT, 20, SamplingConfig.GREEDY), text.toString(), "the stream is what the prompt gives alone");
    }

    /**
     * A request the model overflows on (NaN logits: here a NaN in the embedding of a token only its prompt holds)
     * fails alone with OpenAI's error object naming why; a request running beside it gets its usual text.
     */
    @Test
    void aRequestTheModelOverflowsOnFailsAloneAndTheOneBesideItIsServed() throws Exception {
        String other = "hi";
        String want = pipeline.alone(other, 12, SamplingConfig.GREEDY);
        int[] ids = pipeline.tok.encode(PROMPT, true);
        serveOn(new ServingPipeline(io.tnsr.engine.testing.TestModels.poisoned(io.tnsr.engine.synth.ModelSpec.tiny(),
                ids[ids.length - 1]), 2, 1, 0, true, true));
        var bad = http.sendAsync(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \""
                        + PROMPT + "\", \"max_tokens\": 12, \"temperature\": 0}")).build(), HttpResponse.BodyHandlers.ofString());
        HttpResponse<String> good = post("/v1/completions", "{\"prompt\": \"" + other + "\", \"max_tokens\": 12, \"temperature\": 0}");
        assertEquals(200, good.statusCode(), good.body());
        assertEquals(want, json(good).at("/choices/0/text").asText());
        HttpResponse<String> r = bad.get(60, TimeUnit.SECONDS);
        assertEquals(500, r.statusCode(), r.body());
        String message = json(r).at("/error/message").asText();
        assertTrue(message.contains("at position " + (ids.length - 1)) && message.contains("logits are NaN"), message);
        HttpResponse<String> again = post("/v1/completions", "{\"prompt\": \"" + other + "\", \"max_tokens\": 12, \"temperature\": 0}");
        assertEquals(200, again.statusCode(), "the server goes on serving: " + again.body());
        assertEquals(want, json(again).at("/choices/0/text").asText());
    }

    @Test
    void badRequestsGetOpenAisErrorObject() throws Exception {
        // param: the parameter the error is about; code: what is wrong with it (null when nothing more precise)
        record Case(String body, int status, String says, String param, String code) {
        }
        for (Case c : List.of(
                new Case("{\"prompt\": ", 400, "the body is not valid JSON: unexpected end of input at line 1, column 12", null, null),
                new Case("{\"max_tokens\": 5}", 400, "'prompt' is required", "prompt", "missing_required_parameter"),
                new Case("{\"prompt\": \"x\", \"max_tokens\": \"five\"}", 400, "'max_tokens' must be an integer", "max_tokens",
                        "invalid_type"),
                new Case("{\"prompt\": \"x\", \"n\": 2}", 400, "'n' must be 1", "n", "unsupported_value"),
                new Case("{\"prompt\": \"x\", \"temperature\": -1}", 400, "temperature", "temperature", "invalid_value"),
                new Case("{\"prompt\": \"x\", \"top_p\": 0}", 400, "'top_p' must be in (0, 1], got 0.0", "top_p", "invalid_value"),
                new Case("{\"prompt\": \"x\", \"temperature\": 1e39}", 400, "'temperature' must be a finite number >= 0, got 1.0E39",
                        "temperature", "invalid_value"),
                new Case("{\"prompt\": \"x\"} {\"prompt\": \"y\"}", 400,
                        "the body is not valid JSON: more data after the JSON value at line 1, column 17", null, null),
                new Case("{\"prompt\": \"x\", \"max_tokens\": " + pipeline.cfg.contextLength() + "}", 400,
                        "max_tokens is " + pipeline.cfg.contextLength() + ", but after the prompt's", "max_tokens",
                        "context_length_exceeded"),
                new Case("{\"prompt\": \"x\", \"stop\": [\"\"]}", 400, "stop string", "stop", "invalid_value"),
                new Case("{\"prompt\": \"x\", \"model\": \"gpt-4\"}", 404, "no model 'gpt-4'", "model", "model_not_found"),
                new Case("{\"prompt\": \"" + "a b ".repeat(pipeline.cfg.contextLength()) + "\"}", 400, "context holds", "prompt",
                        "context_length_exceeded"))) {
            HttpResponse<String> r = post("/v1/completions", c.body());
            assertEquals(c.status(), r.statusCode(), c.body() + " -> " + r.body());
            JsonNode error = json(r).get("error");
            String message = error.get("message").asText();
            assertTrue(message.contains(c.says()), message);
            assertEquals("invalid_request_error", error.get("type").asText(), r.body());
            assertTrue(error.has("param") && error.has("code"), r.body());
            assertEquals(c.param(), error.get("param").textValue(), r.body());
            assertEquals(c.code(), error.get("code").textValue(), r.body());
        }
        HttpResponse<String> nowhere = get("/v1/nothing");
        assertEquals(404, nowhere.statusCode());
        assertTrue(json(nowhere).at("/error/param").isNull() && json(nowhere).at("/error/code").isNull(), nowhere.body());
        HttpResponse<String> wrongMethod = get("/v1/completions");
        assertEquals(405, wrongMethod.statusCode());
        assertEquals("method_not_allowed", json(wrongMethod).at("/error/code").asText(), wrongMethod.body());
        assertEquals(0, pipeline.service.active(), "no request was left running");
    }

    @Test
    void theModelsAndHealthEndpointsAnswer() throws Exception {
        HttpResponse<String> models = get("/v1/models");
        assertEquals(200, models.statusCode());
        assertEquals("tiny", json(models).at("/data/0/id").asText());
        HttpResponse<String> health = get("/health");
        assertEquals(200, health.statusCode());
        assertEquals("ok", json(health).get("status").asText());
    }

    @Test
    void theGetEndpointsRefuseOtherMethodsWith405AndAllow() throws Exception {
        for (String[] c : List.of(new String[] {"DELETE", "/v1/models"}, new String[] {"POST", "/health"},
                new String[] {"PUT", "/metrics"}, new String[] {"POST", "/v1/models"})) {
            HttpResponse<String> r = http.send(HttpRequest.newBuilder(base.resolve(c[1])).timeout(Duration.ofSeconds(10))
                    .method(c[0], HttpRequest.BodyPublishers.ofString("{}")).build(), HttpResponse.BodyHandlers.ofString());
            assertEquals(405, r.statusCode(), c[0] + " " + c[1] + " -> " + r.body());
            assertEquals("GET, HEAD", r.headers().firstValue("Allow").orElse(""), c[0] + " " + c[1]);
            assertEquals("method_not_allowed", json(r).at("/error/code").asText(), r.body());
            assertEquals(c[1] + " takes GET, not " + c[0], json(r).at("/error/message").asText());
        }
        HttpResponse<String> head = http.send(HttpRequest.newBuilder(base.resolve("/health")).timeout(Duration.ofSeconds(10))
                .method("HEAD", HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(200, head.statusCode());
        assertEquals("", head.body());
        HttpResponse<String> delete = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(10))
                .DELETE().build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(405, delete.statusCode());
        assertEquals("POST", delete.headers().firstValue("Allow").orElse(""));
        assertEquals(200, get("/metrics").statusCode());
    }

    @Test
    void beyondEveryPlaceTheAnswerIs429WithRetryAfter() throws Exception {
        // places held by sequences that cannot end before the request arrives: no end of text, 4000 tokens to go
        serveOn(new ServingPipeline(io.tnsr.engine.synth.ModelSpec.tiny().withContext(4096), 2, 1, 0));
        List<Completion> running = new ArrayList<>();
        for (int i = 0; i < 3; i++) {   // 2 running + 1 waiting
            running.add(pipeline.service.submit(new CompletionService.Request(PROMPT, 4000, SamplingConfig.GREEDY, List.of(),
                    false, true, -1)));
        }
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 3}");
        assertEquals(429, r.statusCode(), r.body());
        assertEquals("1", r.headers().firstValue("Retry-After").orElse(""));
        assertEquals("rate_limit_exceeded", json(r).at("/error/type").asText());
        running.forEach(pipeline.service::cancel);
    }

    @Test
    void aClientThatLeavesMidStreamHasItsSequenceCancelled() throws Exception {
        HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 230, \"stream\": true}"))
                .build(), HttpResponse.BodyHandlers.ofInputStream());
        InputStream body = r.body();
        assertTrue(body.read() >= 0, "the stream started");
        body.close();                                        // the client goes away
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (pipeline.service.active() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, pipeline.service.active(), "its place was freed");
        while (java.util.Arrays.stream(pipeline.usedPages()).sum() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals("[0, 0]", java.util.Arrays.toString(pipeline.usedPages()), "every stage's KV cache is as before the request");
    }

    @Test
    void sixteenConcurrentRequestsEachGiveTheirSoloTokens() throws Exception {
        serveOn(new ServingPipeline(16, 0));
        List<java.util.concurrent.CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            String body = "{\"prompt\": \"" + PROMPT + " " + i + "\", \"max_tokens\": 24, "
                    + "\"temperature\": 0}";
            answers.add(http.sendAsync(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(90))
                    .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString()));
        }
        for (int i = 0; i < 16; i++) {
            HttpResponse<String> r = answers.get(i).get(90, TimeUnit.SECONDS);
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(pipeline.alone(PROMPT + " " + i, 24, SamplingConfig.GREEDY), json(r).at("/choices/0/text").asText(),
                    "request " + i);
        }
    }

    @Test
    void sixteenConcurrentSeededRequestsEachGiveTheTokensOfTheirSoloRun() throws Exception {
        serveOn(new ServingPipeline(16, 0));
        // Sampled, each with a seed, top_k and top_p of its own; ignore_eos: a drawn end of text must not cut one short,
        // so that every request runs its whole length beside the others. Every other one asks for its tokens (logprobs).
        int tokens = 32;
        List<SamplingConfig> configs = new ArrayList<>();
        List<java.util.concurrent.CompletableFuture<HttpResponse<String>>> answers = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            double topP = 0.8 + 0.01 * i;
            int topK = 10 + 5 * i;
            configs.add(new SamplingConfig(0.9f, topK, (float) topP, 1000 + i));
            String body = "{\"prompt\": \"" + PROMPT + " " + i + "\", \"max_tokens\": " + tokens + ", \"temperature\": 0.9, "
                    + "\"seed\": " + (1000 + i) + ", \"top_k\": " + topK + ", \"top_p\": " + topP + ", \"ignore_eos\": true"
                    + (i % 2 == 0 ? ", \"logprobs\": 0" : "") + "}";
            answers.add(http.sendAsync(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(90))
                    .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString()));
        }
        for (int i = 0; i < 16; i++) {
            HttpResponse<String> r = answers.get(i).get(90, TimeUnit.SECONDS);
            assertEquals(200, r.statusCode(), r.body());
            JsonNode body = json(r);
            List<Completion.TokenLogprob> solo = new ArrayList<>();
            String text = pipeline.alone(PROMPT + " " + i, tokens, configs.get(i), true, 0, solo);
            assertEquals(text, body.at("/choices/0/text").asText(), "request " + i + ": the text of its solo run");
            assertEquals(tokens, body.at("/usage/completion_tokens").asInt(), "request " + i);
            assertEquals("length", body.at("/choices/0/finish_reason").asText(), "request " + i);
            if (i % 2 == 0) {
                JsonNode served = body.at("/choices/0/logprobs/tokens");
                assertEquals(solo.size(), served.size(), "request " + i);
                for (int k = 0; k < solo.size(); k++) {
                    assertEquals(new String(pipeline.tok.tokenBytes(solo.get(k).token()), StandardCharsets.UTF_8),
                            served.get(k).asText(), "request " + i + ", token " + k + ": the token of its solo run");
                }
            }
        }
    }

    @Test
    void aBodyOverTheSizeLimitGets413AndTheServerGoesOnServing() throws Exception {
        // JSON may end in whitespace: a valid request padded to exactly the limit is taken, one byte more is not.
        String request = "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 3, \"temperature\": 0}";
        HttpResponse<String> atLimit = post("/v1/completions", request + " ".repeat(OpenAiHttpServer.MAX_BODY_BYTES - request.length()));
        assertEquals(200, atLimit.statusCode(), "a body of exactly the limit is served");
        for (int size : List.of(OpenAiHttpServer.MAX_BODY_BYTES + 1, 4 * OpenAiHttpServer.MAX_BODY_BYTES)) {
            HttpResponse<String> r = post("/v1/completions", request + " ".repeat(size - request.length()));
            assertEquals(413, r.statusCode(), size + " bytes: " + r.body());
            JsonNode error = json(r).get("error");
            assertEquals("invalid_request_error", error.get("type").asText(), r.body());
            assertTrue(error.get("message").asText().contains(String.valueOf(OpenAiHttpServer.MAX_BODY_BYTES)), r.body());
            assertTrue(error.has("code"), r.body());
        }
        assertEquals(0, pipeline.service.active(), "nothing was run for them");
        HttpResponse<String> after = post("/v1/completions", request);
        assertEquals(200, after.statusCode(), after.body());
        assertEquals(pipeline.alone(PROMPT, 3, SamplingConfig.GREEDY), json(after).at("/choices/0/text").asText());
        assertEquals(200, get("/health").statusCode());
        assertTrue(get("/metrics").body().lines().anyMatch(l -> l.matches("tnsr_requests_rejected_total\\{status=\"413\"} 2(\\.0)?")),
                "both refusals are counted");
    }

    /**
     * A client still sending an oversized body after the server has seen enough to refuse it: the rest arrives after
     * a pause, as from a slow or busy client. It must read the 413, not a reset.
     */
    @Test
    void aClientStillSendingAnOversizedBodyReadsThe413() throws Exception {
        int total = 4 * OpenAiHttpServer.MAX_BODY_BYTES;
        try (java.net.Socket socket = new java.net.Socket(base.getHost(), base.getPort())) {
            socket.setSoTimeout(30_000);
            java.io.OutputStream out = socket.getOutputStream();
            out.write(("POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + "Content-Length: " + total + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII));
            byte[] spaces = " ".repeat(64 * 1024).getBytes(StandardCharsets.US_ASCII);
            int sent = 0;
            while (sent <= OpenAiHttpServer.MAX_BODY_BYTES) {   // enough for the server to refuse it
                out.write(spaces);
                sent += spaces.length;
            }
            out.flush();
            Thread.sleep(300);   // the server answers now; the client has not noticed yet
            while (sent < total) {
                out.write(spaces, 0, Math.min(spaces.length, total - sent));
                sent += Math.min(spaces.length, total - sent);
            }
            out.flush();
            String status = new java.io.BufferedReader(new java.io.InputStreamReader(socket.getInputStream(),
                    StandardCharsets.US_ASCII)).readLine();
            assertEquals("HTTP/1.1 413 Payload Too Large", status);
        }
        assertEquals(200, get("/health").statusCode(), "the server goes on serving");
    }

    @Test
    void aClientThatLeavesBeforeAWholeAnswerHasItsSequenceCancelled() throws Exception {
        // a context long enough that the request runs far longer than the test waits for its cancellation
        serveOn(new ServingPipeline(io.tnsr.engine.synth.ModelSpec.tiny().withContext(4096), 2, 1, 0));
        byte[] body = ("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 4000, \"ignore_eos\": true}").getBytes(StandardCharsets.UTF_8);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        try (java.net.Socket client = new java.net.Socket(base.getHost(), base.getPort())) {
            client.getOutputStream().write(("POST /v1/completions HTTP/1.1\r\nHost: " + base.getAuthority()
                    + "\r\nContent-Type: application/json\r\nContent-Length: " + body.length + "\r\n\r\n")
                    .getBytes(StandardCharsets.US_ASCII));
            client.getOutputStream().write(body);
            client.getOutputStream().flush();
            while (java.util.Arrays.stream(pipeline.usedPages()).sum() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertTrue(java.util.Arrays.stream(pipeline.usedPages()).sum() > 0, "the request is running");
            assertEquals(0, client.getInputStream().available(), "no answer yet");
        }                                                    // the client goes away, waiting for the whole answer
        while (pipeline.service.active() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, pipeline.service.active(), "its place was freed");
        List<String> ended = get("/metrics").body().lines().filter(l -> l.startsWith("tnsr_requests_total{")).toList();
        assertTrue(ended.stream().anyMatch(l -> l.matches("tnsr_requests_total\\{finish_reason=\"cancelled\"} 1(\\.0)?")),
                () -> "it was cancelled, not run to its end: " + ended);
        while (java.util.Arrays.stream(pipeline.usedPages()).sum() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals("[0, 0]", java.util.Arrays.toString(pipeline.usedPages()), "every stage's KV cache is as before the request");
    }

    @Test
    void aRequestPipelinedBehindAWholeAnswerIsNotTakenForAClientThatLeft() throws Exception {
        byte[] first = ("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 200, \"temperature\": 0, \"ignore_eos\": true}")
                .getBytes(StandardCharsets.UTF_8);
        byte[] second = "{\"prompt\": \"x\", \"max_tokens\": 2}".getBytes(StandardCharsets.UTF_8);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        try (java.net.Socket client = new java.net.Socket(base.getHost(), base.getPort())) {
            client.setSoTimeout(30_000);
            client.getOutputStream().write(rawPost(first));
            client.getOutputStream().flush();
            while (java.util.Arrays.stream(pipeline.usedPages()).sum() == 0 && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            client.getOutputStream().write(rawPost(second));   // the next request, sent before the first is answered
            client.getOutputStream().flush();
            java.io.DataInputStream in = new java.io.DataInputStream(new java.io.BufferedInputStream(client.getInputStream()));
            List<String> head = new ArrayList<>();
            for (String l = line(in); !l.isEmpty(); l = line(in)) {
                head.add(l.toLowerCase(java.util.Locale.ROOT));
            }
            assertEquals("http/1.1 200 ok", head.get(0), head::toString);
            int length = head.stream().filter(h -> h.startsWith("content-length:")).mapToInt(h -> Integer.parseInt(h.substring(15).trim()))
                    .findFirst().orElseThrow();
            byte[] body = new byte[length];
            in.readFully(body);
            JsonNode answer = Jackson.MAPPER.readTree(body);
            assertEquals(200, answer.at("/usage/completion_tokens").asInt(), "the first request ran to its end: " + answer);
            assertEquals(pipeline.alone(PROMPT, 200, SamplingConfig.GREEDY, true, -1, new ArrayList<>()),
                    answer.at("/choices/0/text").asText());
            // Whether the second is answered or the connection is closed for the client to send it again depends on
            // whether it came before the first was handled; either is HTTP/1.1.
            if (head.contains("connection: close")) {
                assertEquals(-1, in.read(), "nothing more on a connection closed for the client to send the second again");
            } else {
                assertTrue(line(in).startsWith("HTTP/1.1 200"), "the second request is answered on the same connection");
            }
        }
    }

    private static byte[] rawPost(byte[] body) {
        byte[] head = ("POST /v1/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: "
                + body.length + "\r\n\r\n").getBytes(StandardCharsets.US_ASCII);
        byte[] all = java.util.Arrays.copyOf(head, head.length + body.length);
        System.arraycopy(body, 0, all, head.length, body.length);
        return all;
    }

    /** One line of an HTTP head, without its CRLF. */
    private static String line(InputStream in) throws java.io.IOException {
        StringBuilder l = new StringBuilder();
        for (int b = in.read(); b != '\n'; b = in.read()) {
            if (b < 0) {
                throw new java.io.EOFException("the connection ended in a line: " + l);
            }
            if (b != '\r') {
                l.append((char) b);
            }
        }
        return l.toString();
    }

    @Test
    void healthIs503AndCompletionsAreRefusedWhileTheStagesLoadThenBoth200() throws Exception {
        // As tools/serve runs: the HTTP server listens before the stages are started
        serveOn(new ServingPipeline(io.tnsr.engine.synth.ModelSpec.tiny(), 2, 1, 0, true, false));
        HttpResponse<String> loading = get("/health");
        assertEquals(503, loading.statusCode(), loading.body());
        assertEquals("the pipeline is starting", json(loading).at("/error/message").asText(), loading.body());
        HttpResponse<String> early = post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 3}");
        assertEquals(503, early.statusCode(), early.body());
        assertEquals(200, get("/v1/models").statusCode(), "what is served is known before it is up");
        pipeline.start();
        assertEquals(200, get("/health").statusCode());
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 3, \"temperature\": 0}");
        assertEquals(200, r.statusCode(), r.body());
    }

    @Test
    void stopStringsEndTheTextJustBeforeThem() throws Exception {
        int tokens = 40;
        String whole = pipeline.alone(PROMPT, tokens, SamplingConfig.GREEDY, true, -1, new ArrayList<>());
        // a stop string from the second half of the text; the answer is the text before its first occurrence
        String stop = whole.substring(whole.length() / 2, whole.length() / 2 + 3);
        String before = whole.substring(0, whole.indexOf(stop));
        assertTrue(!before.isEmpty() && before.length() < whole.length() - 3, () -> "a usable stop string in '" + whole + "'");
        String request = "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": " + tokens + ", \"temperature\": 0, \"ignore_eos\": true, ";
        for (String stops : List.of(Jackson.write(stop), Jackson.write(List.of("never in this text \u2603", stop)))) {
            HttpResponse<String> r = post("/v1/completions", request + "\"stop\": " + stops + "}");
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(before, json(r).at("/choices/0/text").asText(), "stop " + stops);
            assertEquals("stop", json(r).at("/choices/0/finish_reason").asText(), "stop " + stops);
            assertTrue(json(r).at("/usage/completion_tokens").asInt() < tokens, r.body());
        }
        HttpResponse<String> none = post("/v1/completions", request + "\"stop\": [\"never in this text \u2603\"]}");
        assertEquals(whole, json(none).at("/choices/0/text").asText(), "a stop string that never comes changes nothing");
        assertEquals("length", json(none).at("/choices/0/finish_reason").asText());
    }

    @Test
    void maxCompletionTokensBoundsTheAnswerAsMaxTokensDoes() throws Exception {
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_completion_tokens\": 7, "
                + "\"temperature\": 0, \"ignore_eos\": true}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(7, json(r).at("/usage/completion_tokens").asInt(), r.body());
        assertEquals("length", json(r).at("/choices/0/finish_reason").asText());
        assertEquals(pipeline.alone(PROMPT, 7, SamplingConfig.GREEDY, true, -1, new ArrayList<>()),
                json(r).at("/choices/0/text").asText());
    }

    @Test
    void withoutMaxTokensAChatAnswerRunsToTheFullContextAndACompletionStopsAt16TokensOrTheFullContext() throws Exception {
        chatServer();
        HttpResponse<String> chat = post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \""
                + PROMPT + "\"}], \"temperature\": 0, \"ignore_eos\": true}");
        assertEquals(200, chat.statusCode(), chat.body());
        JsonNode usage = json(chat).get("usage");
        // the context holds the prompt and every generated token but the last, which is never fed back
        assertEquals(pipeline.cfg.contextLength(), usage.get("prompt_tokens").asInt() + usage.get("completion_tokens").asInt() - 1,
                chat.body());
        assertEquals("length", json(chat).at("/choices/0/finish_reason").asText());
        HttpResponse<String> completion = post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"temperature\": 0, "
                + "\"ignore_eos\": true}");
        assertEquals(200, completion.statusCode(), completion.body());
        assertEquals(16, json(completion).at("/usage/completion_tokens").asInt(), completion.body());

        // a prompt that leaves room for fewer than 16: the default bound ends with the context, it is not refused
        String nearlyFull = "a b ".repeat((pipeline.cfg.contextLength() - 10) / 2);
        HttpResponse<String> tight = post("/v1/completions", "{\"prompt\": \"" + nearlyFull + "\", \"temperature\": 0, "
                + "\"ignore_eos\": true}");
        assertEquals(200, tight.statusCode(), tight.body());
        int room = pipeline.cfg.contextLength() - json(tight).at("/usage/prompt_tokens").asInt() + 1;
        assertTrue(room > 0 && room < 16, "the prompt leaves room for " + room);
        assertEquals(room, json(tight).at("/usage/completion_tokens").asInt(), tight.body());
        assertEquals("length", json(tight).at("/choices/0/finish_reason").asText());
        HttpResponse<String> asked = post("/v1/completions", "{\"prompt\": \"" + nearlyFull + "\", \"max_tokens\": 16}");
        assertEquals(400, asked.statusCode(), "a bound the client asks for is still checked: " + asked.body());
        assertEquals("context_length_exceeded", json(asked).at("/error/code").asText(), asked.body());
    }

    @Test
    void openAiParametersNotImplementedHereAre400UnlessTheyHoldTheirDefault() throws Exception {
        chatServer();
        String messages = "\"messages\": [{\"role\": \"user\", \"content\": \"" + PROMPT + "\"}], \"max_tokens\": 3";
        HttpResponse<String> defaults = post("/v1/chat/completions", "{" + messages + ", \"presence_penalty\": 0, "
                + "\"frequency_penalty\": 0, \"n\": 1, \"logit_bias\": {}, \"tools\": [], \"response_format\": {\"type\": \"text\"}, "
                + "\"mirostat\": 0}");
        assertEquals(200, defaults.statusCode(), defaults.body());
        HttpResponse<String> penalty = post("/v1/chat/completions", "{" + messages + ", \"presence_penalty\": 0.6}");
        assertEquals(400, penalty.statusCode(), penalty.body());
        JsonNode error = json(penalty).get("error");
        assertEquals("invalid_request_error", error.get("type").asText());
        assertEquals("presence_penalty", error.get("param").asText());
        assertEquals("unsupported_value", error.get("code").asText());
        assertTrue(error.get("message").asText().contains("not supported"), penalty.body());
        HttpResponse<String> echo = post("/v1/completions", "{\"prompt\": \"x\", \"echo\": true}");
        assertEquals(400, echo.statusCode(), echo.body());
        assertEquals("echo", json(echo).at("/error/param").asText());
        assertEquals(200, post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 2, \"echo\": false, \"best_of\": 1}")
                .statusCode());
        assertEquals(0, pipeline.service.active());
    }

    @Test
    void topKAndTopPChangeNothingForGreedyAndAreAppliedWhenSampling() throws Exception {
        String greedy = pipeline.alone(PROMPT, 24, SamplingConfig.GREEDY, true, -1, new ArrayList<>());
        String request = "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 24, \"ignore_eos\": true, ";
        HttpResponse<String> r = post("/v1/completions", request + "\"temperature\": 0, \"top_k\": 5, \"top_p\": 0.5}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(greedy, json(r).at("/choices/0/text").asText(), "greedy with top_k and top_p");
        // top_k 1 leaves only the most likely token to draw, whatever the temperature and seed
        for (int seed = 1; seed <= 3; seed++) {
            HttpResponse<String> k1 = post("/v1/completions", request + "\"temperature\": 1, \"top_k\": 1, \"seed\": " + seed + "}");
            assertEquals(200, k1.statusCode(), k1.body());
            assertEquals(greedy, json(k1).at("/choices/0/text").asText(), "top_k 1, seed " + seed);
        }
        HttpResponse<String> free = post("/v1/completions", request + "\"temperature\": 1, \"seed\": 1}");
        assertTrue(!greedy.equals(json(free).at("/choices/0/text").asText()), "without top_k the same seed draws other tokens");
        SamplingConfig nucleus = new SamplingConfig(1f, 0, 0.6f, 1);
        HttpResponse<String> p = post("/v1/completions", request + "\"temperature\": 1, \"top_p\": 0.6, \"seed\": 1}");
        assertEquals(pipeline.alone(PROMPT, 24, nucleus, true, -1, new ArrayList<>()), json(p).at("/choices/0/text").asText(),
                "top_p as one process applies it");
        assertTrue(!json(free).at("/choices/0/text").asText().equals(json(p).at("/choices/0/text").asText()),
                "top_p changed what the same seed draws");
    }

    @Test
    void tokenizeAndDetokenizeRoundTripAsTheCompletionRunsIt() throws Exception {
        HttpResponse<String> t = post("/tokenize", "{\"content\": \"" + PROMPT + "\", \"with_pieces\": true}");
        assertEquals(200, t.statusCode(), t.body());
        JsonNode tokens = json(t).get("tokens");
        int[] expected = pipeline.tok.encode(PROMPT, pipeline.tok.addsBos());
        assertEquals(expected.length, tokens.size());
        StringBuilder ids = new StringBuilder();
        for (int i = 0; i < expected.length; i++) {
            assertEquals(expected[i], tokens.get(i).get("id").asInt());
            assertEquals(pipeline.tok.piece(expected[i]), tokens.get(i).get("piece").asText());
            ids.append(i == 0 ? "" : ",").append(expected[i]);
        }
        HttpResponse<String> d = post("/detokenize", "{\"tokens\": [" + ids + "]}");
        assertEquals(200, d.statusCode(), d.body());
        assertEquals(PROMPT, json(d).get("content").asText());
        assertEquals(400, post("/detokenize", "{\"tokens\": [1, -5]}").statusCode());
        assertEquals(400, post("/tokenize", "{\"content\": 5}").statusCode());
    }

    @Test
    void metricsAreInPrometheusTextFormatAndCountWhatRan() throws Exception {
        assertEquals(200, post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 6, \"temperature\": 0}").statusCode());
        post("/v1/completions", "{\"prompt\": 5}");
        List<String> expected = List.of("tnsr_requests_running 0", "tnsr_requests_waiting 0",
                "tnsr_requests_total{finish_reason=\"length\"} 1", "tnsr_requests_rejected_total{status=\"400\"} 1",
                "tnsr_generation_tokens_total 6", "tnsr_time_to_first_token_seconds_count 1",
                "tnsr_time_per_output_token_seconds_count 1", "tnsr_request_duration_seconds_count 1",
                "tnsr_kv_cache_pages_used{stage=\"0\"} 0", "tnsr_kv_cache_pages_used{stage=\"1\"} 0");
        // The answer is complete when its last token reaches the coordinator; the end of its sequence then travels
        // through the stages, which free its KV cache pages as it passes: scrape again until it has, within 10 s.
        HttpResponse<String> m = get("/metrics");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!hasAll(m.body(), expected) && System.nanoTime() < deadline) {
            Thread.sleep(20);
            m = get("/metrics");
        }
        assertEquals(200, m.statusCode());
        assertTrue(m.headers().firstValue("Content-Type").orElse("").startsWith("text/plain"), m.headers().toString());
        String text = m.body();
        for (String line : expected) {
            assertTrue(hasAll(text, List.of(line)), () -> "'" + line + "' in\n" + text);
        }
        assertTrue(text.contains("tnsr_kv_cache_pages_capacity{stage=\"1\"}"), text);
        for (String hop : List.of("coordinator-stage0", "stage0-stage1", "stage1-coordinator")) {
            assertTrue(text.lines().anyMatch(l -> l.startsWith("tnsr_hop_latency_seconds_count{hop=\"" + hop + "\"}")
                    && !l.endsWith(" 0")), () -> "hop " + hop + " counted in\n" + text);
        }
    }

    /** Whether every line is in the scraped text, a value written either way (6 or 6.0). */
    private static boolean hasAll(String text, List<String> lines) {
        return lines.stream().allMatch(line -> text.lines().anyMatch(l -> l.equals(line) || l.startsWith(line + ".0")));
    }

    @Test
    void aRequestThatWaitsPastTheLimitGets503AndNeverRuns() throws Exception {
        // a context long enough that the requests holding both places run far longer than the wait limit
        serveOn(new ServingPipeline(io.tnsr.engine.synth.ModelSpec.tiny().withContext(4096), 1, 2, 150));
        List<Completion> hogs = new ArrayList<>();
        for (int i = 0; i < 2; i++) {   // one in each micro-batch's one place
            hogs.add(pipeline.service.submit(new CompletionService.Request(PROMPT, 4000, SamplingConfig.GREEDY, List.of())));
        }
        HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 3}");
        assertEquals(503, r.statusCode(), r.body());
        assertTrue(json(r).at("/error/message").asText().contains("waited longer"), r.body());
        HttpResponse<String> s = post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 3, \"stream\": true}");
        assertEquals(503, s.statusCode(), "a stream that never started is refused the same way: " + s.body());
        hogs.forEach(pipeline.service::cancel);
        assertEquals(200, post("/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 3}").statusCode(), "room again");
    }

    @Test
    void withAnApiKeyEveryEndpointButHealthNeedsIt() throws Exception {
        server.close();
        server = new OpenAiHttpServer(pipeline.service, "tiny", "127.0.0.1", 0, "s3cret", null);
        base = URI.create("http://127.0.0.1:" + server.start());
        assertEquals(200, get("/health").statusCode());
        HttpResponse<String> none = get("/v1/models");
        assertEquals(401, none.statusCode());
        assertEquals("invalid_api_key", json(none).at("/error/code").asText());
        assertEquals("this server needs an API key: send it as 'Authorization: Bearer KEY'",
                json(none).at("/error/message").asText());
        HttpRequest.Builder wrong = HttpRequest.newBuilder(base.resolve("/v1/models")).header("Authorization", "Bearer nope");
        HttpResponse<String> refused = http.send(wrong.build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(401, refused.statusCode());
        assertEquals("invalid_api_key", json(refused).at("/error/code").asText());
        assertEquals("the API key is not valid", json(refused).at("/error/message").asText(), "a wrong key is told apart from none");
        HttpResponse<String> basic = http.send(HttpRequest.newBuilder(base.resolve("/v1/models"))
                .header("Authorization", "Basic czNjcmV0").build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(401, basic.statusCode());
        assertTrue(json(basic).at("/error/message").asText().startsWith("this server needs an API key"), basic.body());
        HttpRequest.Builder right = HttpRequest.newBuilder(base.resolve("/v1/completions")).header("Authorization", "Bearer s3cret")
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"x\", \"max_tokens\": 2}"));
        assertEquals(200, http.send(right.build(), HttpResponse.BodyHandlers.ofString()).statusCode());
    }

    @Test
    void ignoreEosGeneratesExactlyMaxTokens() throws Exception {
        for (int seed = 0; seed < 3; seed++) {
            HttpResponse<String> r = post("/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 40, "
                    + "\"ignore_eos\": true, \"seed\": " + seed + "}");
            assertEquals(200, r.statusCode(), r.body());
            assertEquals(40, json(r).at("/usage/completion_tokens").asInt(), r.body());
            assertEquals("length", json(r).at("/choices/0/finish_reason").asText());
        }
    }

    /** A server whose chat template is ChatML, refusing a conversation that has a "tool" turn. */
    private io.tnsr.engine.chat.ChatTemplate chatServer() throws Exception {
        server.close();
        io.tnsr.engine.chat.ChatTemplate t = io.tnsr.engine.chat.ChatTemplate.compile(
                "{% for m in messages %}{% if m.role == 'tool' %}{{ raise_exception('no tools here') }}{% endif %}{% endfor %}"
                        + io.tnsr.engine.chat.ChatTemplate.BUILT_IN.get("chatml"), pipeline.tok, java.time.Clock.systemUTC());
        server = new OpenAiHttpServer(pipeline.service, "tiny", "127.0.0.1", 0, null, t);
        base = URI.create("http://127.0.0.1:" + server.start());
        return t;
    }

    @Test
    void aChatCompletionRunsTheRenderedConversation() throws Exception {
        io.tnsr.engine.chat.ChatTemplate t = chatServer();
        String messages = "[{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": "
                + "[{\"type\": \"text\", \"text\": \"" + PROMPT + "\"}]}]";
        String rendered = t.render(List.of(new io.tnsr.engine.chat.ChatMessage("system", "be brief"),
                new io.tnsr.engine.chat.ChatMessage("user", PROMPT)), true);
        HttpResponse<String> applied = post("/apply-template", "{\"messages\": " + messages + "}");
        assertEquals(200, applied.statusCode(), applied.body());
        assertEquals(rendered, json(applied).get("prompt").asText());

        HttpResponse<String> r = post("/v1/chat/completions", "{\"messages\": " + messages + ", \"max_tokens\": 12, \"temperature\": 0}");
        assertEquals(200, r.statusCode(), r.body());
        JsonNode body = json(r);
        assertEquals("chat.completion", body.get("object").asText());
        assertTrue(body.get("id").asText().startsWith("chatcmpl-"));
        assertEquals("assistant", body.at("/choices/0/message/role").asText());
        String alone = pipeline.alone(rendered, 12, SamplingConfig.GREEDY);
        assertEquals(alone, body.at("/choices/0/message/content").asText());
        assertEquals(pipeline.tok.encode(rendered, true).length, body.at("/usage/prompt_tokens").asInt());

        HttpResponse<InputStream> s = http.send(HttpRequest.newBuilder(base.resolve("/v1/chat/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"messages\": " + messages + ", \"max_tokens\": 12, "
                        + "\"temperature\": 0, \"stream\": true}")).build(), HttpResponse.BodyHandlers.ofInputStream());
        assertEquals(200, s.statusCode());
        List<JsonNode> chunks = new ArrayList<>();
        boolean done = false;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(s.body(), StandardCharsets.UTF_8))) {
            for (String line; (line = in.readLine()) != null; ) {
                if (line.equals("data: [DONE]")) {
                    done = true;
                } else if (line.startsWith("data: ")) {
                    chunks.add(Jackson.MAPPER.readTree(line.substring(6)));
                }
            }
        }
        assertTrue(done);
        assertEquals("assistant", chunks.get(0).at("/choices/0/delta/role").asText(), "the first delta names the role");
        StringBuilder text = new StringBuilder();
        for (JsonNode c : chunks) {
            assertEquals("chat.completion.chunk", c.get("object").asText());
            text.append(c.at("/choices/0/delta/content").asText(""));
        }
        assertTrue(chunks.get(chunks.size() - 1).at("/choices/0/finish_reason").isTextual());
        assertEquals(alone, text.toString());
    }

    @Test
    void aConversationTheTemplateRefusesOrNoTemplateAtAllIs400() throws Exception {
        HttpResponse<String> none = post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}");
        assertEquals(400, none.statusCode(), none.body());
        assertTrue(json(none).at("/error/message").asText().contains("no chat template"), none.body());
        chatServer();
        HttpResponse<String> refused = post("/v1/chat/completions", "{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}");
        assertEquals(400, refused.statusCode(), refused.body());
        assertTrue(json(refused).at("/error/message").asText().endsWith("no tools here"), refused.body());
        for (String bad : List.of("{}", "{\"messages\": []}", "{\"messages\": [{\"content\": \"x\"}]}",
                "{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"image_url\"}]}]}")) {
            HttpResponse<String> r = post("/v1/chat/completions", bad);
            assertEquals(400, r.statusCode(), bad + " -> " + r.body());
        }
        assertEquals(0, pipeline.service.active());
    }

    @Test
    void aMessageWithoutContentOrWithARoleOpenAiDoesNotHaveIs400NamingTheMessage() throws Exception {
        chatServer();
        record Case(String messages, String param, String code, String says) {
        }
        for (Case c : List.of(
                new Case("[{\"role\": \"user\"}]", "messages[0].content", "missing_required_parameter",
                        "messages[0].content is required"),
                new Case("[{\"role\": \"system\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": null}]",
                        "messages[1].content", "missing_required_parameter", "messages[1].content is required"),
                new Case("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"wizard\", \"content\": \"x\"}]",
                        "messages[1].role", "invalid_value",
                        "messages[1].role 'wizard' is not one of system, user, assistant, developer, tool"),
                new Case("[{\"role\": \"User\", \"content\": \"hi\"}]", "messages[0].role", "invalid_value", "'User' is not one of"),
                new Case("[{\"role\": 5, \"content\": \"hi\"}]", "messages[0].role", "invalid_type", "must be a string"),
                new Case("[{\"content\": \"hi\"}]", "messages[0].role", "missing_required_parameter", "messages[0].role is required"),
                new Case("[\"hi\"]", "messages[0]", "invalid_type", "must be an object"),
                new Case("[{\"role\": \"user\", \"content\": 5}]", "messages[0].content", "invalid_type", "a string or a list"),
                new Case("[{\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": null, "
                        + "\"tool_calls\": [{\"id\": \"c1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]",
                        "messages[1].tool_calls", "unsupported_value", "messages[1].tool_calls is not supported"))) {
            for (String path : List.of("/v1/chat/completions", "/apply-template")) {
                HttpResponse<String> r = post(path, "{\"messages\": " + c.messages() + ", \"max_tokens\": 2}");
                assertEquals(400, r.statusCode(), path + " " + c.messages() + " -> " + r.body());
                JsonNode error = json(r).get("error");
                assertTrue(error.get("message").asText().contains(c.says()), r.body());
                assertEquals(c.param(), error.get("param").asText(), r.body());
                assertEquals(c.code(), error.get("code").asText(), r.body());
            }
        }
        // every role OpenAI has, empty content, text parts, and an assistant turn with no tool calls
        String valid = "[{\"role\": \"developer\", \"content\": \"\"}, {\"role\": \"system\", \"content\": [{\"type\": \"text\", "
                + "\"text\": \"be brief\"}]}, {\"role\": \"user\", \"content\": \"hi\"}, {\"role\": \"assistant\", \"content\": \"hello\", "
                + "\"tool_calls\": []}, {\"role\": \"user\", \"content\": \"" + PROMPT + "\"}]";
        HttpResponse<String> applied = post("/apply-template", "{\"messages\": " + valid + "}");
        assertEquals(200, applied.statusCode(), applied.body());
        assertTrue(json(applied).get("prompt").asText().startsWith("<|im_start|>system\n<|im_end|>\n<|im_start|>system\nbe brief"),
                "chatml does not name the developer role: it gets a system turn " + applied.body());
        HttpResponse<String> r = post("/v1/chat/completions", "{\"messages\": " + valid + ", \"max_tokens\": 2}");
        assertEquals(200, r.statusCode(), r.body());
        assertEquals(0, pipeline.service.active());
    }

    @Test
    void whenAStageIsLostAndRecoveryGivesUpStreamsEndWithAnErrorAndHealthNamesTheStage() throws Exception {
        serveOn(new ServingPipeline(io.tnsr.engine.synth.ModelSpec.stories15M(), 2, 1, 0));
        java.util.concurrent.CompletableFuture<HttpResponse<String>> whole = http.sendAsync(
                HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(60)).POST(
                        HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 240, \"ignore_eos\": true}")).build(),
                HttpResponse.BodyHandlers.ofString());
        HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 240, \"stream\": true, \"ignore_eos\": true}"))
                .build(), HttpResponse.BodyHandlers.ofInputStream());
        List<String> events = new ArrayList<>();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
            events.add(in.readLine());
            pipeline.stages.refuseRestarts(1);
            pipeline.stages.stage(1).close();                 // the last stage goes away mid-stream, for good
            for (String line; (line = in.readLine()) != null; ) {
                if (line.startsWith("data: ")) {
                    events.add(line.substring(6));
                }
            }
        }
        pipeline.awaitFailure();
        assertEquals("[DONE]", events.get(events.size() - 1), events::toString);
        JsonNode error = Jackson.MAPPER.readTree(events.get(events.size() - 2));
        assertTrue(error.at("/error/message").asText().contains("the pipeline failed"), error::toString);
        HttpResponse<String> health = get("/health");
        assertEquals(503, health.statusCode());
        String why = json(health).at("/error/message").asText();
        assertTrue(why.startsWith("the pipeline failed") && why.contains("recovery gave up") && why.contains("stage1"), health.body());
        assertEquals(503, post("/v1/completions", "{\"prompt\": \"x\"}").statusCode());
        HttpResponse<String> inFlight = whole.get(30, TimeUnit.SECONDS);
        assertEquals(503, inFlight.statusCode(), "a request without a stream that was running: " + inFlight.body());
        assertTrue(json(inFlight).at("/error/message").asText().contains("stage1"), inFlight.body());
        assertEquals(0, pipeline.service.active());
    }

    @Test
    void aStreamPausesWhileALostStageIsReplacedThenGoesOnWithEveryTokenOnceAndRequestsMeanwhileWait() throws Exception {
        server.close();
        pipeline.close();
        pipeline = new ServingPipeline(io.tnsr.engine.synth.ModelSpec.stories15M(), 2, 1, 0);
        server = new OpenAiHttpServer(pipeline.service, "tiny", "127.0.0.1", 0).idleTimeout(1000);
        base = URI.create("http://127.0.0.1:" + server.start());
        HttpResponse<InputStream> r = http.send(HttpRequest.newBuilder(base.resolve("/v1/completions"))
                .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 200, "
                        + "\"temperature\": 0, \"stream\": true}")).build(), HttpResponse.BodyHandlers.ofInputStream());
        StringBuilder text = new StringBuilder();
        List<String> comments = new ArrayList<>();
        java.util.concurrent.CompletableFuture<HttpResponse<String>> meanwhile;
        String health;
        try (BufferedReader in = new BufferedReader(new InputStreamReader(r.body(), StandardCharsets.UTF_8))) {
            String first = in.readLine();
            text.append(Jackson.MAPPER.readTree(first.substring(6)).at("/choices/0/text").asText());
            pipeline.stages.delayRestarts(3000);             // three idle timeouts: the replacement is slow to come
            pipeline.stages.kill(1);                          // the last stage dies mid-stream
            health = awaitHealth("recovering");
            meanwhile = http.sendAsync(HttpRequest.newBuilder(base.resolve("/v1/completions")).timeout(Duration.ofSeconds(60))
                    .POST(HttpRequest.BodyPublishers.ofString("{\"prompt\": \"" + PROMPT + " again\", \"max_tokens\": 12, "
                            + "\"temperature\": 0}")).build(), HttpResponse.BodyHandlers.ofString());
            for (String line; (line = in.readLine()) != null; ) {
                if (line.startsWith(":")) {
                    comments.add(line);
                } else if (line.startsWith("data: {")) {
                    JsonNode chunk = Jackson.MAPPER.readTree(line.substring(6));
                    assertTrue(chunk.get("error") == null, line);
                    text.append(chunk.at("/choices/0/text").asText());
                }
            }
        }
        assertTrue(health.contains("stage1"), health);
        assertEquals(pipeline.alone(PROMPT, 200, SamplingConfig.GREEDY), text.toString(),
                "every token once, as the prompt gives alone");
        assertTrue(!comments.isEmpty(), "the paused stream was kept alive");
        HttpResponse<String> later = meanwhile.get(60, TimeUnit.SECONDS);
        assertEquals(200, later.statusCode(), later.body());
        assertEquals(pipeline.alone(PROMPT + " again", 12, SamplingConfig.GREEDY), json(later).at("/choices/0/text").asText());
        assertEquals(200, get("/health").statusCode());
    }

    /** Polls /health until its answer contains {@code what}; that answer. */
    private String awaitHealth(String what) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        String body = "";
        while (System.nanoTime() < deadline) {
            body = get("/health").body();
            if (body.contains(what)) {
                return body;
            }
            Thread.sleep(20);
        }
        throw new AssertionError("/health never said '" + what + "'; last: " + body);
    }
}
