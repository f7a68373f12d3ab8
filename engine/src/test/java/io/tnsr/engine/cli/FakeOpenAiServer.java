package io.tnsr.engine.cli;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.util.Callback;

/**
 * A stand-in for an OpenAI-compatible server, on Jetty and a real socket: {@code GET /v1/models} lists one model;
 * {@code POST /v1/completions} streams {@link #chunks} text chunks of one word each, the first after
 * {@link #firstDelayMillis} and the others {@link #chunkDelayMillis} apart, then a finish chunk, a usage chunk
 * ({@code prompt_tokens} = the prompt's words) when asked for and {@link #usage} is on, then {@code [DONE]}. With
 * {@link #status} other than 200 it answers an OpenAI error object (429 with Retry-After); with {@link #serial} it
 * serves one completion at a time, like a server with one slot. Keeps every request body it got.
 */
final class FakeOpenAiServer implements AutoCloseable {
    volatile int chunks = 4;
    volatile long firstDelayMillis;
    volatile long chunkDelayMillis;
    volatile boolean usage = true;
    volatile int status = 200;
    volatile boolean serial;

    private final List<JsonNode> bodies = new ArrayList<>();
    private final ReentrantLock slot = new ReentrantLock(true);
    private final Server server = new Server();
    private final ServerConnector connector = new ServerConnector(server);

    FakeOpenAiServer() throws Exception {
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        server.setStopTimeout(0);
        server.setHandler(new Handler.Abstract() {
            @Override
            public boolean handle(Request request, Response response, Callback callback) throws Exception {
                route(request, response, callback);
                return true;
            }
        });
        server.start();
    }

    String url() {
        return "http://127.0.0.1:" + connector.getLocalPort();
    }

    /** Bodies of the completion requests received, in arrival order. */
    synchronized List<JsonNode> bodies() {
        return new ArrayList<>(bodies);
    }

    private void route(Request request, Response response, Callback callback) throws Exception {
        String path = Request.getPathInContext(request);
        if (path.equals("/v1/models")) {
            json(response, callback, 200, Map.of("object", "list", "data", List.of(Map.of("id", "fake-model", "object", "model"))));
        } else if (path.equals("/v1/completions")) {
            JsonNode body;
            try (InputStream in = Request.asInputStream(request)) {
                body = Jackson.MAPPER.readTree(in);
            }
            synchronized (this) {
                bodies.add(body);
            }
            if (status != 200) {
                if (status == 429) {
                    response.getHeaders().put(HttpHeader.RETRY_AFTER, "1");
                }
                json(response, callback, status, Map.of("error", Map.of("message", "every place is taken",
                        "type", "rate_limit_exceeded", "code", "rate_limit_exceeded")));
            } else if (serial) {
                slot.lock();
                try {
                    stream(body, response, callback);
                } finally {
                    slot.unlock();
                }
            } else {
                stream(body, response, callback);
            }
        } else {
            json(response, callback, 404, Map.of("error", Map.of("message", "no such endpoint", "type", "invalid_request_error")));
        }
    }

    private void stream(JsonNode body, Response response, Callback callback) {
        response.setStatus(200);
        response.getHeaders().put(HttpHeader.CONTENT_TYPE, "text/event-stream; charset=utf-8");
        OutputStream out = Content.Sink.asOutputStream(response);
        try {
            Thread.sleep(firstDelayMillis);
            for (int i = 0; i < chunks; i++) {
                if (i > 0) {
                    Thread.sleep(chunkDelayMillis);
                }
                event(out, chunk(" w" + i, null));
            }
            event(out, chunk("", "length"));
            if (usage && body.path("stream_options").path("include_usage").asBoolean()) {
                int words = body.path("prompt").asText().split(" ").length;
                event(out, Jackson.write(Map.of("object", "text_completion", "choices", List.of(),
                        "usage", Map.of("prompt_tokens", words, "completion_tokens", chunks, "total_tokens", words + chunks))));
            }
            event(out, "[DONE]");
            out.close();
            callback.succeeded();
        } catch (Exception e) {
            callback.failed(e);
        }
    }

    private static String chunk(String text, String finish) {
        Map<String, Object> choice = new LinkedHashMap<>();
        choice.put("text", text);
        choice.put("index", 0);
        choice.put("finish_reason", finish);
        return Jackson.write(Map.of("object", "text_completion", "model", "fake-model", "choices", List.of(choice)));
    }

    private static void event(OutputStream out, String data) throws IOException {
        out.write(("data: " + data + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    private static void json(Response response, Callback callback, int status, Object body) {
        response.setStatus(status);
        response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/json");
        Content.Sink.write(response, true, Jackson.write(body), callback);
    }

    @Override
    public void close() throws Exception {
        server.stop();
    }
}
