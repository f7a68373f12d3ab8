package io.tnsr.engine.cli;

import io.tnsr.engine.loadgen.BenchReport;
import io.tnsr.engine.loadgen.BenchStats;
import io.tnsr.engine.loadgen.CompletionRequests;
import io.tnsr.engine.loadgen.LoadRunner;
import io.tnsr.engine.loadgen.OpenAiClient;
import io.tnsr.engine.loadgen.PromptSource;
import io.tnsr.engine.loadgen.UnreachableServerException;
import io.tnsr.engine.metrics.Correction;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.metrics.LatencySummary;
import io.tnsr.engine.metrics.MetricsLog;
import io.tnsr.engine.util.Jackson;
import io.tnsr.engine.util.TaskProgress;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code tools/serve-bench}: a load generator for any OpenAI-compatible completions server (this project's
 * {@code tools/serve}, llama.cpp's {@code llama-server}, ...). It streams every request, times the first token, the
 * pace of the rest and the whole request, and prints percentiles and throughput; the latencies can also go to
 * HdrHistogram interval logs that {@code tools/latency-report} reads.
 */
@Command(name = "serve-bench", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Load generator for an OpenAI-compatible server (tools/serve, llama.cpp's"
            + " llama-server, ...): POST /v1/completions, always streamed with"
            + " stream_options.include_usage. Per request it measures the time to first"
            + " token (TTFT: first non-empty text), the time per output token after it"
            + " (TPOT: (end - first token) / (tokens - 1)) and the end-to-end latency (E2E);"
            + " it prints their p50/p90/p99/max in ms, requests/s and output tokens/s"
            + " (completion tokens / wall time of the measured phase).",
            "Closed loop (--concurrency C; C = 1 by default): C clients, each sending its"
            + " next request when its previous one ends; latency from each send.",
            "Open loop (--rate R): Poisson arrivals at R/s; latency from each request's"
            + " intended start, so time spent waiting for a slow server counts (corrected"
            + " for coordinated omission).",
            "Failed requests (HTTP 429, timeouts, ...) are counted by kind and reported.",
            "Exit status: 0 every request succeeded; 1 some failed (0 with"
            + " --allow-errors); 2 bad input, or the server cannot be reached."})
public final class ServeBenchCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "URL", description = "The server's base URL, e.g. http://127.0.0.1:8080 (a trailing /v1 is fine).")
    String url;

    @Option(names = "--concurrency", paramLabel = "C", description = "Closed loop with C clients (default: 1 unless --rate).")
    Integer concurrency;

    @Option(names = "--rate", paramLabel = "R", description = "Open loop: Poisson arrivals at R requests/s, latency from each request's intended start.")
    Double rate;

    @Option(names = "--max-in-flight", paramLabel = "N", defaultValue = "256",
            description = "Open loop: most requests in flight at once; an arrival beyond waits for a place, and the report says how often (default: ${DEFAULT-VALUE}).")
    int maxInFlight;

    @Option(names = "--arrival-seed", paramLabel = "S", defaultValue = "0", description = "Open loop: seed of the arrival times (default: ${DEFAULT-VALUE}).")
    long arrivalSeed;

    @Option(names = "--requests", paramLabel = "N", description = "Requests measured (default: 64; with --duration, no limit unless given).")
    Long requests;

    @Option(names = "--duration", paramLabel = "SECONDS", description = "Send no measured request after this long (requests in flight finish).")
    Double duration;

    @Option(names = "--warmup", paramLabel = "N", defaultValue = "0", description = "Requests sent first, the same way, and not counted (default: ${DEFAULT-VALUE}).")
    int warmup;

    @Option(names = "--prompts", paramLabel = "FILE",
            description = "Prompts, used round-robin: one per line, or JSON lines with a \"prompt\" string.")
    Path promptsFile;

    @Option(names = "--prompt-tokens", paramLabel = "T",
            description = "Generated prompts of T common words, about T tokens with a Llama vocabulary (approximate: the report gives the server's usage.prompt_tokens); different for each request (default: 128 without --prompts).")
    Integer promptTokens;

    @Option(names = "--max-tokens", paramLabel = "M", defaultValue = "128", description = "max_tokens of each request (default: ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--model", paramLabel = "NAME", description = "The model to ask for (default: the first id GET /v1/models lists).")
    String model;

    @Option(names = "--temperature", paramLabel = "T", description = "Sampling temperature (default: the server's).")
    Double temperature;

    @Option(names = "--seed", paramLabel = "S", description = "Request i is sent seed S + i (default: none sent); also seeds the generated prompts.")
    Long seed;

    @Option(names = "--ignore-eos", description = "Send \"ignore_eos\": true: llama-server then generates exactly --max-tokens per request; servers that do not know it (tools/serve) ignore it.")
    boolean ignoreEos;

    @Option(names = "--api-key", paramLabel = "KEY", description = "Send Authorization: Bearer KEY.")
    String apiKey;

    @Option(names = "--api-key-file", paramLabel = "FILE", description = "Read the API key from the first line of FILE (keeps it out of ps and shell history).")
    Path apiKeyFile;

    @Option(names = "--timeout", paramLabel = "SECONDS", defaultValue = "600", description = "Bound on each request, send to end of stream; beyond it counts as failed (default: ${DEFAULT-VALUE}).")
    double timeout;

    @Option(names = "--histograms", paramLabel = "DIR",
            description = "Write the measured latencies as HdrHistogram interval logs (ttft.hlog, tpot.hlog, request.hlog = E2E, with run.json) for tools/latency-report DIR.")
    Path histograms;

    @Option(names = "--json", description = "Print one JSON object (the summary) on stdout instead of the table.")
    boolean json;

    @Option(names = "--allow-errors", description = "Exit 0 even when requests failed (they are still reported).")
    boolean allowErrors;

    @Override
    public Integer call() {
        validate();
        URI base = OpenAiClient.baseUri(url);
        String key = apiKey();
        PromptSource prompts = promptsFile != null ? PromptSource.fromFile(promptsFile)
                : PromptSource.generated(promptTokens != null ? promptTokens : 128, seed != null ? seed : 0);
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (OpenAiClient client = new OpenAiClient(base, key, Duration.ofNanos((long) (timeout * 1e9)))) {
            String modelName = modelName(client);
            CompletionRequests bodies = new CompletionRequests(modelName, prompts, maxTokens, temperature, seed, ignoreEos);
            LoadRunner runner = new LoadRunner(client, bodies);
            LoadRunner.Plan plan = plan();
            if (prompts.measuredRepeatWarmup(warmup, plan.requests())) {
                System.err.println("serve-bench: note: measured requests repeat prompts the warm-up sent (" + prompts.describe()
                        + "); a server that caches prompts (llama-server does by default) skips most of their prefill. To"
                        + " measure prefill, give a file with more prompts than --warmup plus --requests, or --prompt-tokens.");
            }
            BenchStats warm = warmup > 0 ? runWarmup(runner, plan) : null;
            MetricsLog log = histograms == null ? null : new MetricsLog(histograms, 1000, "serve-bench-metrics");
            BenchStats stats = log == null ? new BenchStats() : loggedStats(log, plan);
            if (log != null) {
                writeRunFacts(plan, base, modelName);
                log.start();
            }
            LoadRunner.Result result;
            try {
                result = phase(runner, plan, warmup, stats, "measuring");
            } finally {
                if (log != null) {
                    log.close();
                }
            }
            if (log != null) {
                LatencySummary.read(histograms).export(histograms);
            }
            BenchReport report = new BenchReport(base.toString(), modelName, plan, bodies, result, stats, warm);
            out.print(json ? Jackson.write(report.json()) + "\n" : report.table());
            if (histograms != null && !json) {
                out.println("histograms: " + histograms + " (tools/latency-report " + histograms + ")");
            }
            boolean failed = stats.failed() > 0 || (warm != null && warm.failed() > 0);
            return failed && !allowErrors ? 1 : 0;
        } catch (UnreachableServerException e) {
            System.err.println("serve-bench: " + e.getMessage());
            return 2;
        }
    }

    /** Checks the options together; each problem is one line and exit status 2. */
    private void validate() {
        if (concurrency != null && rate != null) {
            throw new IllegalArgumentException("give --concurrency (closed loop) or --rate (open loop), not both");
        }
        if (concurrency != null && concurrency < 1) {
            throw new IllegalArgumentException("--concurrency must be at least 1, got " + concurrency);
        }
        if (rate != null && !(rate > 0 && rate < 1e6)) {
            throw new IllegalArgumentException("--rate must be above 0 (requests per second), got " + rate);
        }
        if (maxInFlight < 1) {
            throw new IllegalArgumentException("--max-in-flight must be at least 1, got " + maxInFlight);
        }
        if (requests != null && requests < 1 || warmup < 0) {
            throw new IllegalArgumentException("--requests must be at least 1 and --warmup at least 0");
        }
        if (duration != null && !(duration > 0)) {
            throw new IllegalArgumentException("--duration must be above 0 seconds, got " + duration);
        }
        if (!(timeout > 0)) {
            throw new IllegalArgumentException("--timeout must be above 0 seconds, got " + timeout);
        }
        if (maxTokens < 1) {
            throw new IllegalArgumentException("--max-tokens must be at least 1, got " + maxTokens);
        }
        if (promptsFile != null && promptTokens != null) {
            throw new IllegalArgumentException("give --prompts FILE or --prompt-tokens T, not both");
        }
        if (apiKey != null && apiKeyFile != null) {
            throw new IllegalArgumentException("give --api-key or --api-key-file, not both");
        }
    }

    private String apiKey() {
        if (apiKeyFile == null) {
            return apiKey;
        }
        try {
            String key = Files.readString(apiKeyFile, StandardCharsets.UTF_8).lines().findFirst().orElse("").strip();
            if (key.isEmpty()) {
                throw new IllegalArgumentException("--api-key-file " + apiKeyFile + ": the first line is empty");
            }
            return key;
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException("--api-key-file " + apiKeyFile + ": no such file");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + apiKeyFile + ": " + e.getMessage(), e);
        }
    }

    /** --model, or the first model the server lists; asking also shows that the server is there. */
    private String modelName(OpenAiClient client) {
        String listed = client.firstModelId();
        if (model != null) {
            return model;
        }
        if (listed == null) {
            int status = client.modelsStatus();
            throw new IllegalArgumentException(client.base() + "/v1/models " + (status == 200 ? "lists no model"
                    : "answered HTTP " + status + (status == 401 || status == 403 ? " (an API key: --api-key)" : ""))
                    + "; name the model with --model");
        }
        return listed;
    }

    private LoadRunner.Plan plan() {
        long n = requests != null ? requests : duration != null ? Long.MAX_VALUE : 64;
        long d = duration == null ? 0 : (long) (duration * 1e9);
        return new LoadRunner.Plan(concurrency != null ? concurrency : 1, rate != null ? rate : 0, arrivalSeed, maxInFlight,
                n, d);
    }

    private BenchStats runWarmup(LoadRunner runner, LoadRunner.Plan plan) {
        BenchStats warm = new BenchStats();
        LoadRunner.Plan w = new LoadRunner.Plan(plan.concurrency(), plan.rate(), plan.arrivalSeed() + 1, plan.maxInFlight(),
                warmup, 0);
        phase(runner, w, 0, warm, "warmup");
        return warm;
    }

    /**
     * Runs one phase with a progress bar on a terminal: requests done of the phase's count, or with no count, seconds of
     * its duration; failures and requests in flight beside it.
     */
    private static LoadRunner.Result phase(LoadRunner runner, LoadRunner.Plan plan, long firstIndex, BenchStats stats,
                                           String label) {
        boolean byRequests = plan.requests() != Long.MAX_VALUE;
        long total = byRequests ? plan.requests() : Math.max(1, plan.durationNanos() / 1_000_000_000L);
        long t0 = System.nanoTime();
        try (TaskProgress p = TaskProgress.start("serve-bench " + label, total,
                byRequests ? TaskProgress.ITEMS : new TaskProgress.Unit(" s", 1))) {
            Runnable update = () -> {
                long done = stats.done();
                long failed = stats.failed();
                p.message(" " + Math.max(0, runner.sent() - done) + " in flight" + (failed > 0 ? ", " + failed + " failed" : ""));
                p.stepTo(byRequests ? done : Math.min(total, (System.nanoTime() - t0) / 1_000_000_000L));
            };
            ScheduledExecutorService ticker = null;
            if (p.shown()) {
                ticker = Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "serve-bench-progress");
                    t.setDaemon(true);
                    return t;
                });
                ticker.scheduleAtFixedRate(update, 200, 200, TimeUnit.MILLISECONDS);
            }
            try {
                return runner.run(plan, firstIndex, stats);
            } finally {
                if (ticker != null) {
                    ticker.shutdownNow();
                    update.run();
                }
            }
        }
    }

    /** Stats that also write ttft.hlog, tpot.hlog and request.hlog, the names run-pipeline gives the same figures. */
    private static BenchStats loggedStats(MetricsLog log, LoadRunner.Plan plan) {
        Correction from = plan.openLoop()
                ? Correction.fromIntendedStart("each request's intended start (open loop, Poisson arrivals at "
                        + plain(plan.rate()) + "/s)")
                : Correction.uncorrected("closed loop: from each request's send; a client waits for its previous request, "
                        + "so a slow server delays requests instead of showing in them");
        return new BenchStats(
                log.add(new LatencyMetric("ttft", "time to first token (first non-empty text), per request", from)),
                log.add(new LatencyMetric("tpot", "time per output token after the first, per request",
                        Correction.uncorrected("per request (end - first token) / (tokens - 1): its pace once streaming"))),
                log.add(new LatencyMetric("request", "end-to-end latency, per request (E2E)", from)));
    }

    /** {@code run.json}: what latency-report says about the run besides the logs. */
    private void writeRunFacts(LoadRunner.Plan plan, URI base, String modelName) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("tool", "serve-bench");
        m.put("url", base.toString());
        m.put("model", modelName);
        m.put("mode", plan.openLoop() ? "open-loop" : "closed-loop");
        if (plan.openLoop()) {
            m.put("rate_per_second", plan.rate());
            m.put("max_in_flight", plan.maxInFlight());
        } else {
            m.put("concurrency", plan.concurrency());
        }
        m.put("max_tokens", maxTokens);
        m.put("started", Instant.now().toString());
        try {
            Files.createDirectories(histograms);
            Files.writeString(histograms.resolve(LatencySummary.RUN_FILE), Jackson.write(m) + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write to " + histograms + ": " + e.getMessage(), e);
        }
    }

    private static String plain(double v) {
        return BigDecimal.valueOf(v).stripTrailingZeros().toPlainString();
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new ServeBenchCommand(), args));
    }
}
