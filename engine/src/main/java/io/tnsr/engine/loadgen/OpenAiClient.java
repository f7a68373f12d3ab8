package io.tnsr.engine.loadgen;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.net.ConnectException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.UnknownHostException;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.channels.UnresolvedAddressException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The client side of an OpenAI-compatible server (this project's {@code tools/serve}, llama.cpp's
 * {@code llama-server}, ...): {@code GET /v1/models} and streamed {@code POST /v1/completions}. One
 * {@link HttpClient} (HTTP/1.1; its connection pool has no limit, so every request in flight has a connection) whose
 * callbacks run on a pool of daemon threads; each request is read line by line as it arrives
 * ({@link SseCompletionSubscriber}) and ends within its timeout, however the server behaves.
 */
public final class OpenAiClient implements AutoCloseable {
    private final URI base;
    private final String authorization;
    private final Duration timeout;
    private final ExecutorService callbacks;
    private final ScheduledThreadPoolExecutor timer;
    private final HttpClient http;
    private volatile int lastModelsStatus;

    /**
     * @param base    the server's base URL, as {@link #baseUri} returns it
     * @param apiKey  sent as {@code Authorization: Bearer KEY}; null for none
     * @param timeout bound on each request, from sending it to the end of its stream
     */
    public OpenAiClient(URI base, String apiKey, Duration timeout) {
        this.base = base;
        this.authorization = apiKey == null ? null : "Bearer " + apiKey;
        this.timeout = timeout;
        this.callbacks = Executors.newCachedThreadPool(daemons("serve-bench-http"));
        this.timer = new ScheduledThreadPoolExecutor(1, daemons("serve-bench-timeouts"));
        timer.setRemoveOnCancelPolicy(true);   // a request that ends in time leaves nothing behind
        this.http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).executor(callbacks)
                .connectTimeout(timeout.compareTo(Duration.ofSeconds(10)) < 0 ? timeout : Duration.ofSeconds(10))
                .followRedirects(HttpClient.Redirect.NEVER).build();
    }

    /**
     * The base URL of a server from what a user typed: {@code http(s)://HOST[:PORT][/PREFIX]}, a trailing {@code /} or
     * {@code /v1} dropped (requests go to {@code BASE/v1/...}).
     *
     * @throws IllegalArgumentException naming the URL when it is not one
     */
    public static URI baseUri(String url) {
        URI u;
        try {
            u = new URI(url.strip());
        } catch (URISyntaxException e) {
            throw new IllegalArgumentException("'" + url + "' is not a URL: " + e.getReason());
        }
        String scheme = u.getScheme() == null ? "" : u.getScheme().toLowerCase(Locale.ROOT);
        if (!scheme.equals("http") && !scheme.equals("https") || u.getHost() == null) {
            throw new IllegalArgumentException("'" + url + "' is not an http:// or https:// URL with a host "
                    + "(e.g. http://127.0.0.1:8080)");
        }
        if (u.getQuery() != null || u.getFragment() != null) {
            throw new IllegalArgumentException("'" + url + "': give the server's base URL, without a query or fragment");
        }
        String path = u.getPath() == null ? "" : u.getPath().replaceAll("/+$", "");
        if (path.endsWith("/v1")) {
            path = path.substring(0, path.length() - 3);
        }
        return URI.create(scheme + "://" + u.getRawAuthority() + path);
    }

    public URI base() {
        return base;
    }

    private URI endpoint(String path) {
        return URI.create(base + path);
    }

    private HttpRequest.Builder request(String path) {
        HttpRequest.Builder b = HttpRequest.newBuilder(endpoint(path)).timeout(timeout);
        if (authorization != null) {
            b.header("Authorization", authorization);
        }
        return b;
    }

    /**
     * {@code GET /v1/models}: the id of the first model listed, or null when the server answers without one (any
     * status other than 200, or an empty list). Also the check that the server is there at all.
     *
     * @throws UnreachableServerException when no connection can be made or no answer comes
     */
    public String firstModelId() {
        HttpResponse<String> r;
        try {
            r = http.send(request("/v1/models").GET().build(), HttpResponse.BodyHandlers.ofString(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UnreachableServerException("cannot reach " + base + ": " + describe(e), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UnreachableServerException("interrupted while reaching " + base, e);
        }
        lastModelsStatus = r.statusCode();
        if (r.statusCode() != 200) {
            return null;
        }
        try {
            JsonNode id = Jackson.MAPPER.readTree(r.body()).path("data").path(0).path("id");
            return id.isTextual() && !id.asText().isEmpty() ? id.asText() : null;
        } catch (IOException e) {
            return null;
        }
    }

    /** The HTTP status {@link #firstModelId} got (0 before it ran). */
    public int modelsStatus() {
        return lastModelsStatus;
    }

    /** Why no answer came, in a few words: unknown host, refused, no connection in time, or the exception's message. */
    private static String describe(IOException e) {
        if (causedBy(e, UnknownHostException.class) || causedBy(e, UnresolvedAddressException.class)) {
            return "unknown host";
        }
        if (causedBy(e, HttpConnectTimeoutException.class)) {
            return "no connection within the connect timeout";
        }
        if (causedBy(e, ConnectException.class)) {
            return "connection refused";
        }
        return Failures.message(e);
    }

    private static boolean causedBy(Throwable t, Class<? extends Throwable> kind) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (kind.isInstance(c)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Sends {@code POST /v1/completions} with {@code jsonBody} (which asks for a stream) and reads the stream as it
     * comes. The future completes with the outcome, a failure included: it never completes exceptionally.
     */
    public CompletableFuture<Outcome> complete(String jsonBody) {
        HttpRequest req = request("/v1/completions").header("Content-Type", "application/json")
                .header("Accept", "text/event-stream")
                .POST(HttpRequest.BodyPublishers.ofString(jsonBody, StandardCharsets.UTF_8)).build();
        long send = System.nanoTime();
        SseCompletionSubscriber lines = new SseCompletionSubscriber(send);
        CompletableFuture<HttpResponse<Void>> exchange = http.sendAsync(req, info -> {
            lines.status(info.statusCode());
            return HttpResponse.BodySubscribers.fromLineSubscriber(lines, s -> null, StandardCharsets.UTF_8, null);
        });
        exchange.whenComplete((r, t) -> {
            if (t != null) {
                lines.onError(t);
            }
        });
        ScheduledFuture<?> deadline = timer.schedule(() -> {
            lines.cancel(Outcome.failed("timeout", "no end of stream within " + timeout.toMillis() + " ms", send,
                    System.nanoTime()));
            exchange.cancel(true);
        }, timeout.toNanos(), TimeUnit.NANOSECONDS);
        CompletableFuture<Outcome> out = lines.outcome();
        out.whenComplete((o, t) -> deadline.cancel(false));
        return out;
    }

    @Override
    public void close() {
        timer.shutdownNow();
        callbacks.shutdownNow();
    }

    private static ThreadFactory daemons(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }
}
