package io.tnsr.engine.server;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.chat.ChatMessage;
import io.tnsr.engine.chat.ChatTemplate;
import io.tnsr.engine.chat.ChatTemplateException;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.util.Jackson;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.io.Content;
import org.eclipse.jetty.io.EndPoint;
import org.eclipse.jetty.io.EofException;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.server.handler.GracefulHandler;
import org.eclipse.jetty.util.BufferUtil;
import org.eclipse.jetty.util.Callback;

/**
 * OpenAI's completions and chat completions API over a {@link CompletionService}, on Jetty (TCP_NODELAY on every connection):
 * <ul>
 * <li>{@code POST /v1/completions}: {@code model}, {@code prompt}, {@code max_tokens} or {@code max_completion_tokens}
 * (default 16, or what the context has room for after the prompt if less; a value asked for beyond that room is
 * refused), {@code temperature} (default 1),
 * {@code top_p}, {@code top_k} (extension), {@code seed}, {@code stop}
 * (a string or a list of up to 4), {@code stream} with {@code stream_options.include_usage}, {@code ignore_eos}
 * (extension, as llama-server has it: generate {@code max_tokens} whatever the model says, for benchmarks);
 * {@code n} other than 1, and OpenAI's other parameters that are not implemented ({@code presence_penalty},
 * {@code echo}, {@code best_of}, {@code logit_bias}, ...: {@code refuseUnsupported}) unless they hold their default,
 * are refused; fields OpenAI does not define are ignored.
 * Streams are Server-Sent Events, one {@code text_completion} chunk per piece of text (whole characters), a last chunk
 * with {@code finish_reason}, the usage chunk when asked for, then {@code data: [DONE]}.</li>
 * <li>{@code POST /v1/chat/completions}: the same, with {@code messages} ({@code role}, one of {@link #ROLES}, and
 * {@code content}, required, as a string or a list of text parts; no {@code tool_calls}) instead of {@code prompt},
 * and no default {@code max_tokens} (the answer runs to its end of text or the full context), rendered by the model's
 * {@link ChatTemplate} with the generation prompt and tokenized with its special tokens ({@code response_format},
 * {@code tools} and the like refused unless they hold their default); {@code chat.completion} objects, or
 * {@code chat.completion.chunk} events whose first delta names the role. {@code POST /apply-template} answers the rendered prompt,
 * {@code {"prompt": ...}}.</li>
 * <li>{@code GET /v1/models}; {@code GET /health} (503 until the pipeline is up, while it recovers a lost stage, naming it, and after it failed); {@code GET /metrics} (Prometheus
 * text format, {@link ServingMetrics}).</li>
 * <li>{@code POST /tokenize} ({@code content}, {@code add_special}, {@code with_pieces}) and {@code POST /detokenize}
 * ({@code tokens}), as llama-server has them.</li>
 * </ul>
 * Another method than an endpoint's gets 405 with {@code Allow} ({@code GET} endpoints also take {@code HEAD}).
 * Errors are OpenAI's error object, {@code {"error": {"message", "type", "param", "code"}}} ({@code param} names the
 * request field at fault, {@code code} says what is wrong, such as {@code invalid_type}, {@code invalid_value},
 * {@code unsupported_value}, {@code context_length_exceeded}; either is null when none applies): 400 for a bad body,
 * 401 without the API key (when one is set) or with a wrong one, 404 for an unknown model or path, 413 for a body over
 * {@link #MAX_BODY_BYTES}, 429 with {@code Retry-After} when every place is taken, 503 when a request waited longer
 * than the service allows. A client that goes away has its sequence cancelled (its KV cache freed in every stage).
 */
public final class OpenAiHttpServer implements AutoCloseable {
    /** The roles a chat message may have (OpenAI's); {@link ChatTemplate#render} maps developer to system where needed. */
    static final List<String> ROLES = List.of("system", "user", "assistant", "developer", "tool");
    /** {@code max_tokens} of a completion that names none (OpenAI's default); a chat completion has no default bound. */
    static final int COMPLETION_MAX_TOKENS = 16;
    /** Largest request body accepted. */
    public static final int MAX_BODY_BYTES = 1 << 20;
    /** Most bytes of a body over {@link #MAX_BODY_BYTES} read and dropped so that its client reads the 413. */
    static final long DRAIN_BYTES = 64L << 20;
    /** How long a non-streaming request waits for its text before it is cancelled with a 503. */
    static final long REQUEST_TIMEOUT_MILLIS = 600_000;
    /** How often a request that does not stream checks that its client is still there. */
    static final long CLIENT_CHECK_MILLIS = 100;
    /** Longest silence on a paused stream before an SSE comment line is sent (proxies often cut at 60 s). */
    static final long MAX_KEEP_ALIVE_MILLIS = 15_000;
    private static final byte[] KEEP_ALIVE = ": keep-alive\n\n".getBytes(StandardCharsets.US_ASCII);
    /** How long {@link #close} lets requests in flight finish. */
    public static final long STOP_TIMEOUT_MILLIS = 10_000;

    private final CompletionService service;
    private final String modelName;
    private final byte[] apiKey;
    private final ChatTemplate chatTemplate;
    private final Server server;
    private final ServerConnector connector;
    private final AtomicLong ids = new AtomicLong();

    public OpenAiHttpServer(CompletionService service, String modelName, String host, int port) {
        this(service, modelName, host, port, null, null);
    }

    /**
     * @param apiKey the key every request but {@code GET /health} must carry as {@code Authorization: Bearer KEY}
     *               (compared in constant time), or null to take requests without one
     * @param chatTemplate how chat messages become a prompt, or null when the model has none (chat requests get 400)
     */
    public OpenAiHttpServer(CompletionService service, String modelName, String host, int port, String apiKey,
                            ChatTemplate chatTemplate) {
        this.chatTemplate = chatTemplate;
        this.service = service;
        this.modelName = modelName;
        this.apiKey = apiKey == null ? null : apiKey.getBytes(StandardCharsets.UTF_8);
        this.server = new Server();
        this.connector = new ServerConnector(server);
        connector.setHost(host);
        connector.setPort(port);
        connector.setAcceptedTcpNoDelay(true);
        server.addConnector(connector);
        GracefulHandler graceful = new GracefulHandler();   // close() lets requests in flight finish
        server.setHandler(graceful);
        graceful.setHandler(new Handler.Abstract() {
            @Override
            public boolean handle(Request request, Response response, Callback callback) {
                try {
                    route(request, response, callback);
                } catch (Throwable t) {
                    if (!response.isCommitted()) {
                        error(response, callback, 500, "server_error", "internal error: " + t);
                    } else {
                        callback.failed(t);
                    }
                }
                return true;
            }
        });
        server.setStopTimeout(STOP_TIMEOUT_MILLIS);
    }

    /**
     * How long a connection may see no bytes either way before it is closed (Jetty's default is 30 s). A stream
     * that has nothing to send for a third of it sends an SSE comment line, which clients ignore, so a pause (a
     * recovery of the pipeline) does not close it.
     */
    public OpenAiHttpServer idleTimeout(long millis) {
        connector.setIdleTimeout(millis);
        return this;
    }

    /** Starts listening; returns the port. */
    public int start() throws Exception {
        server.start();
        return connector.getLocalPort();
    }

    @Override
    public void close() throws Exception {
        server.stop();
    }

    private void route(Request request, Response response, Callback callback) throws Exception {
        String path = Request.getPathInContext(request);
        String method = request.getMethod();
        String unauthorized = apiKey == null || path.equals("/health") ? null : unauthorized(request);
        if (unauthorized != null) {
            response.getHeaders().put(HttpHeader.WWW_AUTHENTICATE, "Bearer");
            error(response, callback, 401, "invalid_request_error", "invalid_api_key", unauthorized);
            return;
        }
        switch (path) {
            case "/health" -> {
                if (!get(method, path, response, callback)) {
                    return;
                }
                if (service.ready()) {
                    json(response, callback, 200, Map.of("status", "ok"));
                } else if (service.down() != null) {
                    error(response, callback, 503, "unavailable", "the pipeline failed: " + service.down());
                } else if (service.recovering() != null) {
                    error(response, callback, 503, "unavailable", "the pipeline is " + service.recovering());
                } else {
                    error(response, callback, 503, "unavailable", "the pipeline is starting");
                }
            }
            case "/v1/models" -> {
                if (get(method, path, response, callback)) {
                    json(response, callback, 200, Map.of("object", "list", "data",
                            List.of(Map.of("id", modelName, "object", "model", "owned_by", "tnsr"))));
                }
            }
            case "/v1/completions" -> {
                if (post(method, path, response, callback)) {
                    completions(request, response, callback, false);
                }
            }
            case "/v1/chat/completions" -> {
                if (post(method, path, response, callback)) {
                    completions(request, response, callback, true);
                }
            }
            case "/apply-template" -> {
                if (post(method, path, response, callback)) {
                    applyTemplate(request, response, callback);
                }
            }
            case "/tokenize" -> {
                if (post(method, path, response, callback)) {
                    tokenize(request, response, callback);
                }
            }
            case "/detokenize" -> {
                if (post(method, path, response, callback)) {
                    detokenize(request, response, callback);
                }
            }
            case "/metrics" -> {
                if (!get(method, path, response, callback)) {
                    return;
                }
                ByteArrayOutputStream text = new ByteArrayOutputStream(16 << 10);
                service.metrics().write(text);
                response.setStatus(200);
                response.getHeaders().put(HttpHeader.CONTENT_TYPE, service.metrics().contentType());
                response.write(true, ByteBuffer.wrap(text.toByteArray()), callback);
            }
            default -> error(response, callback, 404, "invalid_request_error", "no such endpoint: " + method + " " + path);
        }
    }

    /** Whether the request is a POST; else it is answered 405 with {@code Allow: POST}. */
    private static boolean post(String method, String path, Response response, Callback callback) {
        return allowed(method, path, response, callback, "POST");
    }

    /** Whether the request is a GET (or a HEAD, which Jetty answers without the body); else a 405. */
    private static boolean get(String method, String path, Response response, Callback callback) {
        return allowed(method, path, response, callback, "GET", "HEAD");
    }

    private static boolean allowed(String method, String path, Response response, Callback callback, String... methods) {
        if (List.of(methods).contains(method)) {
            return true;
        }
        response.getHeaders().put(HttpHeader.ALLOW, String.join(", ", methods));
        error(response, callback, 405, "invalid_request_error", "method_not_allowed", path + " takes " + methods[0]
                + ", not " + method);
        return false;
    }

    /** Why a request may not be served: it carries no Bearer token, or another than the API key; null if it may. */
    private String unauthorized(Request request) {
        String h = request.getHeaders().get(HttpHeader.AUTHORIZATION);
        String token = h != null && h.regionMatches(true, 0, "Bearer ", 0, 7) ? h.substring(7).trim() : "";
        if (token.isEmpty()) {
            return "this server needs an API key: send it as 'Authorization: Bearer KEY'";
        }
        return MessageDigest.isEqual(apiKey, token.getBytes(StandardCharsets.UTF_8)) ? null : "the API key is not valid";
    }

    /** The request body as JSON, or null when an error was answered (413 too large, 400 not a JSON object). */
    private JsonNode body(Request request, Response response, Callback callback) throws IOException {
        byte[] body;
        try (InputStream in = Request.asInputStream(request)) {
            body = in.readNBytes(MAX_BODY_BYTES + 1);
            if (body.length > MAX_BODY_BYTES) {
                drain(in);
            }
        }
        if (body.length > MAX_BODY_BYTES) {
            error(response, callback, 413, "invalid_request_error", "the request body is over " + MAX_BODY_BYTES + " bytes");
            return null;
        }
        try {
            return object(body);
        } catch (CompletionService.InvalidRequestException e) {
            invalid(response, callback, e);
            return null;
        }
    }

    /**
     * Reads and drops what is left of a body over the limit, up to {@link #DRAIN_BYTES}: a client still sending it
     * when the 413 went out and the connection closed would meet a reset and never read the answer. Past that bound
     * the connection is closed after the answer, as before.
     */
    private static void drain(InputStream in) throws IOException {
        byte[] scrap = new byte[64 * 1024];
        long left = DRAIN_BYTES;
        int n;
        while (left > 0 && (n = in.read(scrap, 0, (int) Math.min(scrap.length, left))) >= 0) {
            left -= n;
        }
    }

    /** {@code POST /tokenize}: {@code content}, {@code add_special} (BOS when the model wants it), {@code with_pieces}. */
    private void tokenize(Request request, Response response, Callback callback) throws IOException {
        JsonNode root = body(request, response, callback);
        if (root == null) {
            return;
        }
        try {
            String content = text(root, "content", true);
            boolean special = !root.has("add_special") || bool(root, "add_special");
            boolean pieces = bool(root, "with_pieces");
            int[] ids = special ? service.tokenize(content, true) : service.tokenizer().encode(content, false, true);
            List<Object> tokens = new ArrayList<>(ids.length);
            for (int id : ids) {
                tokens.add(pieces ? Map.of("id", id, "piece", service.tokenizer().piece(id)) : id);
            }
            json(response, callback, 200, Map.of("tokens", tokens));
        } catch (CompletionService.InvalidRequestException e) {
            invalid(response, callback, e);
        }
    }

    /** {@code POST /detokenize}: {@code tokens} (ids) to {@code content}. */
    private void detokenize(Request request, Response response, Callback callback) throws IOException {
        JsonNode root = body(request, response, callback);
        if (root == null) {
            return;
        }
        JsonNode tokens = root.get("tokens");
        int vocab = service.tokenizer().vocabSize();
        if (tokens == null || !tokens.isArray()) {
            error(response, callback, 400, "invalid_request_error", "invalid_type", "tokens", "'tokens' must be a list of token ids");
            return;
        }
        int[] ids = new int[tokens.size()];
        for (int i = 0; i < ids.length; i++) {
            JsonNode t = tokens.get(i);
            if (!t.canConvertToInt() || !t.isIntegralNumber() || t.intValue() < 0 || t.intValue() >= vocab) {
                error(response, callback, 400, "invalid_request_error", "invalid_value", "tokens", "'tokens'[" + i + "] = " + t
                        + " is not a token id (0 to " + (vocab - 1) + ")");
                return;
            }
            ids[i] = t.intValue();
        }
        json(response, callback, 200, Map.of("content", service.tokenizer().decode(ids)));
    }

    /** {@code POST /apply-template}: a chat request's messages rendered by the chat template, {@code {"prompt": ...}}. */
    private void applyTemplate(Request request, Response response, Callback callback) throws IOException {
        JsonNode root = body(request, response, callback);
        if (root == null) {
            return;
        }
        try {
            json(response, callback, 200, Map.of("prompt", chatPrompt(root)));
        } catch (CompletionService.InvalidRequestException e) {
            invalid(response, callback, e);
        }
    }

    /** The prompt a chat request's {@code messages} render to, with the generation prompt. */
    private String chatPrompt(JsonNode root) {
        if (chatTemplate == null) {
            throw new CompletionService.InvalidRequestException("this model has no chat template (tokenizer.chat_template); "
                    + "start serve with --chat-template FILE, or use /v1/completions");
        }
        JsonNode messages = root.get("messages");
        if (messages == null || messages.isNull()) {
            throw missing("messages");
        }
        if (!messages.isArray() || messages.isEmpty()) {
            throw invalidValue("messages", "'messages' must be a non-empty list of {role, content}");
        }
        List<ChatMessage> conversation = new ArrayList<>(messages.size());
        for (int i = 0; i < messages.size(); i++) {
            JsonNode m = messages.get(i);
            String at = "messages[" + i + "]";
            if (!m.isObject()) {
                throw invalidType(at, at + " must be an object with 'role' and 'content'");
            }
            JsonNode role = m.get("role");
            if (role == null || role.isNull()) {
                throw new CompletionService.InvalidRequestException(at + ".role is required", at + ".role",
                        "missing_required_parameter");
            }
            if (!role.isTextual()) {
                throw invalidType(at + ".role", at + ".role must be a string, got " + shortly(role));
            }
            if (!ROLES.contains(role.asText())) {
                throw invalidValue(at + ".role", at + ".role '" + role.asText() + "' is not one of " + String.join(", ", ROLES));
            }
            // Tool calls would be lost on the way to the template, which sees role and content only; this server
            // calls no tools, so a conversation that holds some did not come from it.
            for (String calls : List.of("tool_calls", "function_call")) {
                JsonNode v = m.get(calls);
                if (v != null && !v.isNull() && !(v.isArray() && v.isEmpty())) {
                    throw new CompletionService.InvalidRequestException(at + "." + calls + " is not supported by this "
                            + "server: it calls no tools", at + "." + calls, "unsupported_value");
                }
            }
            conversation.add(new ChatMessage(role.asText(), content(m.get("content"), i)));
        }
        try {
            return chatTemplate.render(conversation, true);
        } catch (ChatTemplateException e) {
            throw new CompletionService.InvalidRequestException("the chat template refused the conversation: " + e.getMessage(),
                    "messages", null);
        }
    }

    /**
     * A message's content: a string, or OpenAI's list of parts of which only {@code text} parts are taken. It is
     * required: OpenAI lets only an assistant turn with tool calls go without, and this server serves no tool calls.
     */
    private static String content(JsonNode c, int index) {
        String at = "messages[" + index + "].content";
        if (c == null || c.isNull()) {
            throw new CompletionService.InvalidRequestException(at + " is required: a string or a list of text parts", at,
                    "missing_required_parameter");
        }
        if (c.isTextual()) {
            return c.asText();
        }
        if (c.isArray()) {
            StringBuilder text = new StringBuilder();
            for (JsonNode part : c) {
                if (!part.isObject() || !"text".equals(part.path("type").asText()) || !part.path("text").isTextual()) {
                    throw new CompletionService.InvalidRequestException(at + ": only text parts "
                            + "({\"type\": \"text\", \"text\": ...}) are served", at, "unsupported_value");
                }
                text.append(part.get("text").asText());
            }
            return text.toString();
        }
        throw invalidType(at, at + " must be a string or a list of text parts");
    }

    private void completions(Request request, Response response, Callback callback, boolean chat) throws Exception {
        JsonNode root = body(request, response, callback);
        if (root == null) {
            service.metrics().rejected(response.getStatus());
            return;
        }
        Parsed p;
        try {
            p = chat ? parse(root, chatPrompt(root), true) : parse(root, completionPrompt(root), false);
        } catch (CompletionService.InvalidRequestException e) {
            service.metrics().rejected(400);
            invalid(response, callback, e);
            return;
        }
        if (p.model != null && !p.model.equals(modelName)) {
            error(response, callback, 404, "invalid_request_error", "model_not_found", "model",
                    "no model '" + p.model + "' here; this server runs '" + modelName + "'");
            return;
        }
        if (!service.accepting()) {
            error(response, callback, 503, "unavailable", service.down() != null ? "the pipeline failed: " + service.down()
                    : "the pipeline is starting");
            return;
        }
        Completion c;
        try {
            c = service.submit(p.request);
        } catch (CompletionService.InvalidRequestException e) {
            // what submit refuses is the prompt: empty, or too long for the context
            service.metrics().rejected(400);
            error(response, callback, 400, "invalid_request_error", e.code(),
                    e.param() != null ? e.param() : chat ? "messages" : "prompt", e.getMessage());
            return;
        } catch (CompletionService.OverloadedException e) {
            service.metrics().rejected(429);
            response.getHeaders().put(HttpHeader.RETRY_AFTER, "1");
            error(response, callback, 429, "rate_limit_exceeded", "rate_limit_exceeded", e.getMessage());   // OpenAI's code
            return;
        }
        Shape shape = new Shape((chat ? "chatcmpl-" : "cmpl-") + ids.incrementAndGet(), System.currentTimeMillis() / 1000, chat,
                p.request.logprobs() >= 0);
        // While the request waits for its tokens (a queue, a recovery of the pipeline) no byte may cross the
        // connection for longer than the idle timeout; the waits below have bounds of their own.
        request.addIdleTimeoutListener(timeout -> false);
        if (p.stream) {
            stream(request, response, callback, c, shape, p.includeUsage);
            return;
        }
        request.addFailureListener(t -> service.cancel(c));
        String text;
        try {
            text = awaitWhole(request, response, c);
        } catch (IOException gone) {
            service.cancel(c);   // the client went away: free its place and its KV cache
            callback.failed(gone);
            return;
        }
        if (text == null) {
            service.cancel(c);
            error(response, callback, 503, "timeout", "no answer within " + REQUEST_TIMEOUT_MILLIS / 1000 + " s");
            return;
        }
        if (c.finish() == Completion.Finish.ERROR) {
            if (service.down() != null) {
                error(response, callback, 503, "unavailable", c.error());
            } else {
                error(response, callback, 500, "server_error", "the pipeline could not run the request: " + c.error());
            }
            return;
        }
        if (c.finish() == Completion.Finish.EXPIRED) {
            expired(response, callback);
            return;
        }
        Map<String, Object> out = shape.whole(text, c.finish().json(), c.logprobs());
        out.put("usage", usage(c));
        json(response, callback, 200, out);
    }

    /**
     * Waits for the whole text of a request that does not stream; null when it took longer than
     * {@link #REQUEST_TIMEOUT_MILLIS}. Jetty does not read an HTTP/1 connection while its request is handled, so a
     * client that leaves would go unnoticed until the answer is written: every {@link #CLIENT_CHECK_MILLIS} the
     * connection is read here. End of input or an error means the client is gone (as llama-server takes it, a client
     * that only shut its sending side counts as gone): {@link IOException}. Bytes mean a pipelined request behind this
     * one: the check stops, and the answer closes the connection, so that the client sends it again (RFC 9112 9.3.2).
     *
     * @throws IOException the client went away
     */
    private static String awaitWhole(Request request, Response response, Completion c) throws IOException, InterruptedException {
        EndPoint endPoint = request.getConnectionMetaData().getConnection().getEndPoint();
        ByteBuffer probe = BufferUtil.allocate(1);
        boolean watching = true;
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(REQUEST_TIMEOUT_MILLIS);
        while (true) {
            long left = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
            if (left <= 0) {
                return null;
            }
            String text = c.awaitText(watching ? Math.min(left, CLIENT_CHECK_MILLIS) : left);
            if (text != null) {
                return text;
            }
            if (watching && !endPoint.isFillInterested()) {   // Jetty itself reading: it sees the client leave
                int n = endPoint.fill(probe);
                if (n < 0) {
                    throw new EofException("the client closed the connection");
                } else if (n > 0) {
                    watching = false;
                    response.getHeaders().put(HttpHeader.CONNECTION, "close");
                }
            }
        }
    }

    private void expired(Response response, Callback callback) {
        response.getHeaders().put(HttpHeader.RETRY_AFTER, "1");
        error(response, callback, 503, "unavailable", "server_busy", "the request waited longer than this server allows ("
                + service.limits().maxWaitMillis() / 1000.0 + " s) for a place; try again later");
    }

    /**
     * Server-Sent Events: text as it comes, the finishing chunk, the usage chunk if asked, [DONE]. Nothing is sent
     * before the first text (or the end), so that a request that never got a place is still answered with a 503.
     */
    private void stream(Request request, Response response, Callback callback, Completion c, Shape shape,
                        boolean includeUsage) {
        request.addFailureListener(t -> service.cancel(c));
        try {
            String delta = c.nextDelta(1000);
            while (delta != null && delta.isEmpty()) {
                delta = c.nextDelta(1000);
            }
            if (delta == null && c.finish() == Completion.Finish.EXPIRED) {
                expired(response, callback);
                return;
            }
            response.setStatus(200);
            response.getHeaders().put(HttpHeader.CONTENT_TYPE, "text/event-stream; charset=utf-8");
            response.getHeaders().put(HttpHeader.CACHE_CONTROL, "no-cache");
            OutputStream out = Content.Sink.asOutputStream(response);
            long keepAliveNanos = TimeUnit.MILLISECONDS.toNanos(Math.max(100, Math.min(MAX_KEEP_ALIVE_MILLIS,
                    connector.getIdleTimeout() / 3)));
            long wroteNanos = System.nanoTime();
            for (; delta != null; delta = c.nextDelta(Math.min(1000, TimeUnit.NANOSECONDS.toMillis(keepAliveNanos)))) {
                if (!delta.isEmpty()) {
                    event(out, Jackson.write(shape.chunk(delta, null, c.takeLogprobs())));
                    wroteNanos = System.nanoTime();
                } else if (System.nanoTime() - wroteNanos >= keepAliveNanos) {
                    keepAlive(out);   // a pause (the pipeline recovering): proxies and clients keep the stream open
                    wroteNanos = System.nanoTime();
                }
            }
            if (c.finish() == Completion.Finish.ERROR) {
                event(out, Jackson.write(errorObject("server_error", null, null, "the pipeline could not run the request: "
                        + c.error())));
            } else {
                event(out, Jackson.write(shape.chunk(null, c.finish().json(), c.takeLogprobs())));
            }
            if (includeUsage) {
                Map<String, Object> u = shape.base();
                u.put("choices", List.of());
                u.put("usage", usage(c));
                event(out, Jackson.write(u));
            }
            event(out, "[DONE]");
            out.close();
            callback.succeeded();
        } catch (IOException e) {
            service.cancel(c);   // the client went away: free its place and its KV cache
            callback.failed(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            service.cancel(c);
            callback.failed(e);
        }
    }

    /** An SSE comment line: clients ignore it; it tells every hop that the stream is alive. */
    private static void keepAlive(OutputStream out) throws IOException {
        out.write(KEEP_ALIVE);
        out.flush();
    }

    private static void event(OutputStream out, String data) throws IOException {
        out.write(("data: " + data + "\n\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /**
     * The response objects of one request: {@code text_completion} for completions; {@code chat.completion} and
     * {@code chat.completion.chunk} (the first chunk's delta carries the role) for chat.
     */
    private final class Shape {
        private final String id;
        private final long created;
        private final boolean chat;
        private final boolean logprobs;
        private boolean roleSent;

        Shape(String id, long created, boolean chat, boolean logprobs) {
            this.id = id;
            this.created = created;
            this.chat = chat;
            this.logprobs = logprobs;
        }

        Map<String, Object> base() {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("id", id);
            m.put("object", chat ? "chat.completion.chunk" : "text_completion");
            m.put("created", created);
            m.put("model", modelName);
            return m;
        }

        /**
         * The {@code logprobs} of a choice, null when not asked for: chat's {@code {"content": [{token, logprob, bytes,
         * top_logprobs}]}}, or the completions API's {@code {tokens, token_logprobs, top_logprobs, text_offset}}.
         */
        Object logprobs(List<Completion.TokenLogprob> entries) {
            if (!logprobs) {
                return null;
            }
            Tokenizer t = service.tokenizer();
            if (chat) {
                List<Object> content = new ArrayList<>(entries.size());
                for (Completion.TokenLogprob e : entries) {
                    Map<String, Object> m = tokenLogprob(t, e.token(), e.logprob());
                    List<Object> top = new ArrayList<>(e.topIds().length);
                    for (int i = 0; i < e.topIds().length; i++) {
                        top.add(tokenLogprob(t, e.topIds()[i], e.topLogprobs()[i]));
                    }
                    m.put("top_logprobs", top);
                    content.add(m);
                }
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("content", content);
                m.put("refusal", null);
                return m;
            }
            List<String> tokens = new ArrayList<>(entries.size());
            List<Float> tokenLogprobs = new ArrayList<>(entries.size());
            List<Map<String, Float>> top = new ArrayList<>(entries.size());
            List<Integer> offsets = new ArrayList<>(entries.size());
            for (Completion.TokenLogprob e : entries) {
                tokens.add(text(t, e.token()));
                tokenLogprobs.add(e.logprob());
                Map<String, Float> best = new LinkedHashMap<>();
                for (int i = 0; i < e.topIds().length; i++) {
                    best.putIfAbsent(text(t, e.topIds()[i]), e.topLogprobs()[i]);
                }
                top.add(best);
                offsets.add(e.textOffset());
            }
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("tokens", tokens);
            m.put("token_logprobs", tokenLogprobs);
            m.put("top_logprobs", top);
            m.put("text_offset", offsets);
            return m;
        }

        /** A streamed chunk: a piece of text (null for none) or the finish, and the log-probabilities of its tokens. */
        Map<String, Object> chunk(String text, String finish, List<Completion.TokenLogprob> entries) {
            Map<String, Object> choice = new LinkedHashMap<>();
            if (chat) {
                Map<String, Object> delta = new LinkedHashMap<>();
                if (!roleSent) {
                    delta.put("role", "assistant");
                    roleSent = true;
                }
                if (text != null) {
                    delta.put("content", text);
                }
                choice.put("index", 0);
                choice.put("delta", delta);
            } else {
                choice.put("text", text == null ? "" : text);
                choice.put("index", 0);
            }
            choice.put("logprobs", logprobs(entries));
            choice.put("finish_reason", finish);
            Map<String, Object> m = base();
            m.put("choices", List.of(choice));
            return m;
        }

        /** The whole answer of a request that did not stream. */
        Map<String, Object> whole(String text, String finish, List<Completion.TokenLogprob> entries) {
            if (!chat) {
                return chunk(text, finish, entries);
            }
            Map<String, Object> choice = new LinkedHashMap<>();
            choice.put("index", 0);
            choice.put("message", Map.of("role", "assistant", "content", text));
            choice.put("logprobs", logprobs(entries));
            choice.put("finish_reason", finish);
            Map<String, Object> m = base();
            m.put("object", "chat.completion");
            m.put("choices", List.of(choice));
            return m;
        }
    }

    /** A token's text: its bytes as UTF-8 (a byte that is part of a character reads as U+FFFD; {@code bytes} has it). */
    private static String text(Tokenizer t, int id) {
        return new String(t.tokenBytes(id), StandardCharsets.UTF_8);
    }

    /** Chat's {@code {token, logprob, bytes}} of one token. */
    private static Map<String, Object> tokenLogprob(Tokenizer t, int id, float logprob) {
        byte[] bytes = t.tokenBytes(id);
        List<Integer> unsigned = new ArrayList<>(bytes.length);
        for (byte b : bytes) {
            unsigned.add(b & 0xFF);
        }
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("token", new String(bytes, StandardCharsets.UTF_8));
        m.put("logprob", logprob);
        m.put("bytes", unsigned);
        return m;
    }

    private static Map<String, Object> usage(Completion c) {
        Map<String, Object> u = new LinkedHashMap<>();
        u.put("prompt_tokens", c.promptTokens());
        u.put("completion_tokens", c.completionTokens());
        u.put("total_tokens", c.promptTokens() + c.completionTokens());
        return u;
    }

    private static void json(Response response, Callback callback, int status, Object body) {
        response.setStatus(status);
        response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/json");
        Content.Sink.write(response, true, Jackson.write(body), callback);
    }

    /** An error answer without a code or a parameter. */
    private static void error(Response response, Callback callback, int status, String type, String message) {
        error(response, callback, status, type, null, null, message);
    }

    /** An error answer with a code (or null), about no parameter. */
    private static void error(Response response, Callback callback, int status, String type, String code, String message) {
        error(response, callback, status, type, code, null, message);
    }

    private static void error(Response response, Callback callback, int status, String type, String code, String param,
                              String message) {
        json(response, callback, status, errorObject(type, code, param, message));
    }

    /** A 400 for a request that cannot be served as asked, naming its parameter and what is wrong with it. */
    private static void invalid(Response response, Callback callback, CompletionService.InvalidRequestException e) {
        error(response, callback, 400, "invalid_request_error", e.code(), e.param(), e.getMessage());
    }

    /**
     * OpenAI's error object, {@code {"error": {"message", "type", "param", "code"}}}: {@code param} names the request
     * parameter the error is about and {@code code} says what is wrong (null when none applies); both are always there.
     */
    private static Map<String, Object> errorObject(String type, String code, String param, String message) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("message", message);
        e.put("type", type);
        e.put("param", param);
        e.put("code", code);
        return Map.of("error", e);
    }

    private static CompletionService.InvalidRequestException missing(String param) {
        return new CompletionService.InvalidRequestException("'" + param + "' is required", param, "missing_required_parameter");
    }

    private static CompletionService.InvalidRequestException invalidType(String param, String message) {
        return new CompletionService.InvalidRequestException(message, param, "invalid_type");
    }

    private static CompletionService.InvalidRequestException invalidValue(String param, String message) {
        return new CompletionService.InvalidRequestException(message, param, "invalid_value");
    }

    /** A request body, checked. */
    private record Parsed(String model, CompletionService.Request request, boolean stream, boolean includeUsage) {
    }

    static JsonNode object(byte[] body) {
        JsonNode root;
        try {
            root = Jackson.MAPPER.readTree(body);
        } catch (JsonProcessingException e) {
            throw new CompletionService.InvalidRequestException("the body is not valid JSON: " + Jackson.problem(e));
        } catch (IOException e) {
            throw new CompletionService.InvalidRequestException("the body cannot be read: " + e.getMessage());
        }
        if (root == null || !root.isObject()) {
            throw new CompletionService.InvalidRequestException("the body must be a JSON object");
        }
        return root;
    }

    private static String completionPrompt(JsonNode root) {
        JsonNode promptNode = root.get("prompt");
        if (promptNode == null || promptNode.isNull()) {
            throw missing("prompt");
        } else if (promptNode.isTextual()) {
            return promptNode.asText();
        } else if (promptNode.isArray() && promptNode.size() == 1 && promptNode.get(0).isTextual()) {
            return promptNode.get(0).asText();
        }
        throw invalidType("prompt", "'prompt' must be a string (or a list of one string)");
    }

    /** The request's parameters around its prompt ({@code special}: a rendered chat prompt, with special tokens). */
    static Parsed parse(JsonNode root, String prompt, boolean special) {
        String model = text(root, "model", false);
        JsonNode n = root.get("n");
        if (n != null && !n.isNull()) {
            if (!n.isIntegralNumber()) {
                throw invalidType("n", "'n' must be an integer, got " + n);
            }
            if (!n.canConvertToInt() || n.intValue() != 1) {
                throw new CompletionService.InvalidRequestException("'n' must be 1, got " + n, "n", "unsupported_value");
            }
        }
        refuseUnsupported(root, special);
        // Without a limit a chat answer runs to its end of text or the full context (the sequence stops there), as
        // OpenAI's and llama-server's do; the completions API keeps OpenAI's default of 16.
        int maxTokens = integer(root, "max_tokens", integer(root, "max_completion_tokens",
                special ? CompletionService.Request.TO_CONTEXT : COMPLETION_MAX_TOKENS, 1, Integer.MAX_VALUE), 1, Integer.MAX_VALUE);
        boolean defaultMaxTokens = !root.hasNonNull("max_tokens") && !root.hasNonNull("max_completion_tokens");
        double temperature = number(root, "temperature", 1.0);
        double topP = number(root, "top_p", 1.0);
        int topK = integer(root, "top_k", 0, 0, Integer.MAX_VALUE);   // 0: off
        long seed = root.hasNonNull("seed") ? longValue(root, "seed") : ThreadLocalRandom.current().nextLong();
        List<String> stops = new ArrayList<>();
        JsonNode stop = root.get("stop");
        if (stop != null && !stop.isNull()) {
            if (stop.isTextual()) {
                stops.add(stop.asText());
            } else if (stop.isArray() && stop.size() <= 4) {
                for (JsonNode s : stop) {
                    if (!s.isTextual()) {
                        throw invalidType("stop", "'stop' must hold strings");
                    }
                    stops.add(s.asText());
                }
            } else {
                throw invalidValue("stop", "'stop' must be a string or a list of up to 4 strings");
            }
        }
        if (stops.stream().anyMatch(String::isEmpty)) {
            throw invalidValue("stop", "a stop string must not be empty");
        }
        boolean stream = bool(root, "stream");
        JsonNode so = root.get("stream_options");
        boolean includeUsage = so != null && so.isObject() && bool(so, "include_usage");
        SamplingConfig sampling;
        try {
            sampling = SamplingConfig.of(temperature, topK, topP, seed);
        } catch (SamplingConfig.InvalidSamplingException e) {
            throw invalidValue(e.parameter(), "'" + e.parameter() + "' " + e.problem());
        }
        boolean ignoreEos = bool(root, "ignore_eos");
        int logprobs = special ? chatLogprobs(root) : completionLogprobs(root);
        return new Parsed(model, new CompletionService.Request(prompt, maxTokens, sampling, stops, special, ignoreEos,
                logprobs, defaultMaxTokens), stream, includeUsage);
    }

    /**
     * Refuses OpenAI's parameters that this server does not implement when they ask for something other than their
     * default: ignored, they would give an answer other than the one asked for. Their defaults pass, as clients such
     * as the openai SDK and LangChain send them ({@code "presence_penalty": 0}, {@code "tools": []}). Fields OpenAI
     * does not define are not looked at (llama-server's extensions among them).
     */
    private static void refuseUnsupported(JsonNode root, boolean chat) {
        if (number(root, "presence_penalty", 0) != 0) {
            throw unsupported("presence_penalty", "0", root);
        }
        if (number(root, "frequency_penalty", 0) != 0) {
            throw unsupported("frequency_penalty", "0", root);
        }
        if (!emptyOrNull(root, "logit_bias", true)) {
            throw unsupported("logit_bias", "an empty object", root);
        }
        if (chat) {
            JsonNode format = root.get("response_format");
            if (format != null && !format.isNull()) {
                if (!format.isObject()) {
                    throw invalidType("response_format", "'response_format' must be an object, got " + format);
                }
                if (!"text".equals(format.path("type").textValue())) {
                    throw unsupported("response_format", "{\"type\": \"text\"}", root);
                }
            }
            for (String list : List.of("tools", "functions")) {
                if (!emptyOrNull(root, list, false)) {
                    throw unsupported(list, "an empty list (this server calls no tools)", root);
                }
            }
            for (String choice : List.of("tool_choice", "function_call")) {
                JsonNode v = root.get(choice);   // with no tools, "auto" calls none as "none" does
                if (v != null && !v.isNull() && !"none".equals(v.textValue()) && !"auto".equals(v.textValue())) {
                    throw unsupported(choice, "\"none\" or \"auto\" (this server calls no tools)", root);
                }
            }
            JsonNode modalities = root.get("modalities");
            if (modalities != null && !modalities.isNull()
                    && !(modalities.isArray() && modalities.size() == 1 && "text".equals(modalities.get(0).textValue()))) {
                throw unsupported("modalities", "[\"text\"]", root);
            }
            if (root.hasNonNull("audio")) {
                throw unsupported("audio", "null (this server answers in text)", root);
            }
        } else {
            if (bool(root, "echo")) {
                throw unsupported("echo", "false", root);
            }
            JsonNode bestOf = root.get("best_of");
            if (bestOf != null && !bestOf.isNull()) {
                if (!bestOf.isIntegralNumber()) {
                    throw invalidType("best_of", "'best_of' must be an integer, got " + bestOf);
                }
                if (!bestOf.canConvertToInt() || bestOf.intValue() != 1) {
                    throw unsupported("best_of", "1", root);
                }
            }
            String suffix = text(root, "suffix", false);
            if (suffix != null && !suffix.isEmpty()) {
                throw unsupported("suffix", "an empty string", root);
            }
        }
    }

    /** Whether a field is absent, null, or an empty object ({@code object}) or list; of another kind it is refused. */
    private static boolean emptyOrNull(JsonNode root, String field, boolean object) {
        JsonNode v = root.get(field);
        if (v == null || v.isNull()) {
            return true;
        }
        if (object ? !v.isObject() : !v.isArray()) {
            throw invalidType(field, "'" + field + "' must be " + (object ? "an object" : "a list") + ", got "
                    + shortly(v));
        }
        return v.isEmpty();
    }

    /** A known parameter asking for what this server does not do; {@code dflt}: what it takes. */
    private static CompletionService.InvalidRequestException unsupported(String field, String dflt, JsonNode root) {
        return new CompletionService.InvalidRequestException("'" + field + "' is not supported by this server: only "
                + dflt + " is taken, got " + shortly(root.get(field)), field, "unsupported_value");
    }

    /** A value as JSON, cut after 60 characters (a tool's schema can be long). */
    private static String shortly(JsonNode v) {
        String json = v.toString();
        return json.length() <= 60 ? json : json.substring(0, 57) + "...";
    }

    /** Chat's {@code logprobs} (true/false) and {@code top_logprobs} (0..20, only with logprobs): -1 for none. */
    private static int chatLogprobs(JsonNode root) {
        boolean want = bool(root, "logprobs");
        JsonNode top = root.get("top_logprobs");
        if (top != null && !top.isNull() && !want) {
            throw invalidValue("top_logprobs", "'top_logprobs' needs 'logprobs': true");
        }
        int k = integer(root, "top_logprobs", 0, 0, TokenLogprobs.MAX_TOP);
        return want ? k : -1;
    }

    /** The completions API's {@code logprobs}: how many top tokens (0..20), or null for none: -1. */
    private static int completionLogprobs(JsonNode root) {
        JsonNode v = root.get("logprobs");
        if (v == null || v.isNull()) {
            return -1;
        }
        if (!v.isIntegralNumber() || !v.canConvertToInt() || v.intValue() < 0 || v.intValue() > TokenLogprobs.MAX_TOP) {
            throw invalidValue("logprobs", "'logprobs' of a completion is how many top tokens to report with each token, 0 to "
                    + TokenLogprobs.MAX_TOP + ", got " + v);
        }
        return v.intValue();
    }

    private static String text(JsonNode root, String field, boolean required) {
        JsonNode v = root.get(field);
        if (v == null || v.isNull()) {
            if (required) {
                throw missing(field);
            }
            return null;
        }
        if (!v.isTextual()) {
            throw invalidType(field, "'" + field + "' must be a string");
        }
        return v.asText();
    }

    /** An integer field from min to max (an integer beyond them, even beyond a long's range, is out of range), or dflt. */
    private static int integer(JsonNode root, String field, int dflt, int min, int max) {
        JsonNode v = root.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isIntegralNumber()) {
            throw invalidType(field, "'" + field + "' must be an integer, got " + v);
        }
        if (!v.canConvertToInt() || v.intValue() < min || v.intValue() > max) {
            throw outOfRange(field, v, min, max);
        }
        return v.intValue();
    }

    private static long longValue(JsonNode root, String field) {
        JsonNode v = root.get(field);
        if (!v.isIntegralNumber()) {
            throw invalidType(field, "'" + field + "' must be an integer, got " + v);
        }
        if (!v.canConvertToLong()) {
            throw outOfRange(field, v, Long.MIN_VALUE, Long.MAX_VALUE);
        }
        return v.longValue();
    }

    private static CompletionService.InvalidRequestException outOfRange(String field, JsonNode v, long min, long max) {
        return invalidValue(field, "'" + field + "' is out of range: it must be " + min + " to " + max + ", got " + v);
    }

    private static double number(JsonNode root, String field, double dflt) {
        JsonNode v = root.get(field);
        if (v == null || v.isNull()) {
            return dflt;
        }
        if (!v.isNumber()) {
            throw invalidType(field, "'" + field + "' must be a number, got " + v);
        }
        return v.doubleValue();
    }

    private static boolean bool(JsonNode root, String field) {
        JsonNode v = root.get(field);
        if (v == null || v.isNull()) {
            return false;
        }
        if (!v.isBoolean()) {
            throw invalidType(field, "'" + field + "' must be true or false, got " + v);
        }
        return v.booleanValue();
    }
}
