package io.tnsr.engine.loadgen;

import java.math.BigDecimal;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * The summary of a benchmark run: a compact table for people ({@link #table()}) or one JSON object
 * ({@link #json()}), from the measured phase's {@link BenchStats}, how it was sent, and the warmup's stats.
 *
 * @param url      the server's base URL
 * @param model    the model asked for
 * @param plan     how the measured phase was sent
 * @param requests what each request asked for
 * @param result   how the measured phase went
 * @param stats    the measured phase
 * @param warmup   the warmup phase (not in the figures), or null when there was none
 */
public record BenchReport(String url, String model, LoadRunner.Plan plan, CompletionRequests requests,
                          LoadRunner.Result result, BenchStats stats, BenchStats warmup) {

    /** The percentiles of the table and the JSON (and the maximum). */
    static final double[] PERCENTILES = {50, 90, 99};

    /** "closed loop, 16 clients" or "open loop, Poisson arrivals at 5 requests/s (seed 0), at most 256 in flight". */
    public String mode() {
        if (!plan.openLoop()) {
            return "closed loop, " + plan.concurrency() + (plan.concurrency() == 1 ? " client" : " clients");
        }
        return String.format(Locale.ROOT, "open loop, Poisson arrivals at %s requests/s (seed %d), at most %d in flight",
                plain(plan.rate()), plan.arrivalSeed(), plan.maxInFlight());
    }

    /** What latencies are measured from. */
    public String measuredFrom() {
        if (!plan.openLoop()) {
            return "latency from each request's send (closed loop: a slow server is sent less, not measured waiting)";
        }
        return "latency from each request's intended start (corrected for coordinated omission: waits for the server "
                + "or for a place count)";
    }

    private double wallSeconds() {
        return result.wallNanos() / 1e9;
    }

    private static double perSecond(long n, double seconds) {
        return seconds > 0 ? n / seconds : 0;
    }

    /** Where the output token counts come from. */
    public String outputTokenSource() {
        long ok = stats.ok();
        long usage = stats.withUsage();
        if (ok == 0 || usage == ok) {
            return "usage.completion_tokens";
        }
        if (usage == 0) {
            return "text chunks counted (the server sent no usage)";
        }
        return String.format(Locale.ROOT, "usage.completion_tokens of %d requests, text chunks counted for the other %d",
                usage, ok - usage);
    }

    /** The table for people. */
    public String table() {
        StringBuilder sb = new StringBuilder();
        sb.append(String.format(Locale.ROOT, "serve-bench %s  model %s  %s%n", url, model, mode()));
        sb.append(String.format(Locale.ROOT, "prompts: %s; max_tokens %d%s%n", requests.prompts().describe(),
                requests.maxTokens(), requests.ignoreEos() ? ", ignore_eos" : ""));
        sb.append(String.format(Locale.ROOT, "%-12s %7s %10s %10s %10s %10s %10s%n", "latency (ms)", "count", "mean",
                "p50", "p90", "p99", "max"));
        for (Map.Entry<String, Histogram> e : stats.latencies().entrySet()) {
            sb.append(row(e.getKey(), e.getValue()));
        }
        sb.append(String.format(Locale.ROOT, "requests:      %d ok, %d failed in %.2f s: %.2f requests/s%n", stats.ok(),
                stats.failed(), wallSeconds(), perSecond(stats.ok(), wallSeconds())));
        sb.append(String.format(Locale.ROOT, "output tokens: %d (%s): %.1f tokens/s, %.1f per request%n",
                stats.outputTokens(), outputTokenSource(), perSecond(stats.outputTokens(), wallSeconds()),
                stats.ok() == 0 ? 0.0 : (double) stats.outputTokens() / stats.ok()));
        sb.append(promptLine());
        sb.append(measuredFrom()).append('\n');
        if (plan.openLoop()) {
            sb.append(String.format(Locale.ROOT, "in-flight cap of %d reached %d time%s%s; sends at most %.1f ms late%n",
                    plan.maxInFlight(), result.capHits(), result.capHits() == 1 ? "" : "s",
                    result.capHits() > 0 ? " (those requests waited for a place; the wait is in their latency)" : "",
                    result.maxSendLagNanos() / 1e6));
        }
        if (warmup != null) {
            sb.append(String.format(Locale.ROOT, "warmup:        %d requests not counted (%d ok, %d failed)%n",
                    warmup.done(), warmup.ok(), warmup.failed()));
        }
        sb.append(failures("errors", stats));
        if (warmup != null && warmup.failed() > 0) {
            sb.append(failures("warmup errors", warmup));
        }
        return sb.toString();
    }

    private static String row(String name, Histogram h) {
        if (h.getTotalCount() == 0) {
            return String.format(Locale.ROOT, "%-12s %7d %10s %10s %10s %10s %10s%n", name, 0, "-", "-", "-", "-", "-");
        }
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%-12s %7d %10.2f", name, h.getTotalCount(),
                h.getMean() / 1e6));
        for (double p : PERCENTILES) {
            sb.append(String.format(Locale.ROOT, " %10.2f", h.getValueAtPercentile(p) / 1e6));
        }
        return sb.append(String.format(Locale.ROOT, " %10.2f%n", h.getMaxValue() / 1e6)).toString();
    }

    private String promptLine() {
        long n = stats.withPromptUsage();
        if (n == 0) {
            return "prompt tokens: unknown (the server sent no usage)\n";
        }
        String of = n == stats.ok() ? "" : String.format(Locale.ROOT, " of the %d requests that reported it", n);
        return String.format(Locale.ROOT, "prompt tokens: %d (usage.prompt_tokens%s): %.1f per request (min %d, max %d), "
                + "%.1f tokens/s%n", stats.promptTokens(), of, (double) stats.promptTokens() / n, stats.promptMin(),
                stats.promptMax(), perSecond(stats.promptTokens(), wallSeconds()));
    }

    private static String failures(String title, BenchStats s) {
        if (s.failed() == 0) {
            return title + ": none\n";
        }
        StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%s: %d failed%n", title, s.failed()));
        s.failures().forEach((kind, f) -> sb.append(String.format(Locale.ROOT, "  %-18s %6d%s%n", kind, f.count(),
                f.firstMessage() == null ? "" : "  e.g. " + f.firstMessage())));
        return sb.toString();
    }

    /** The summary as one JSON object (milliseconds, requests/s, tokens/s). */
    public Map<String, Object> json() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("url", url);
        m.put("model", model);
        m.put("mode", plan.openLoop() ? "open-loop" : "closed-loop");
        if (plan.openLoop()) {
            m.put("rate_per_second", plan.rate());
            m.put("arrival_seed", plan.arrivalSeed());
            m.put("max_in_flight", plan.maxInFlight());
            m.put("in_flight_cap_hits", result.capHits());
            m.put("max_send_lag_ms", round(result.maxSendLagNanos() / 1e6));
        } else {
            m.put("concurrency", plan.concurrency());
        }
        m.put("co_corrected", plan.openLoop());
        m.put("prompts", requests.prompts().describe());
        m.put("max_tokens", requests.maxTokens());
        m.put("ignore_eos", requests.ignoreEos());
        m.put("requests_ok", stats.ok());
        m.put("requests_failed", stats.failed());
        m.put("wall_seconds", round(wallSeconds()));
        m.put("requests_per_second", round(perSecond(stats.ok(), wallSeconds())));
        m.put("output_tokens", stats.outputTokens());
        m.put("output_tokens_source", outputTokenSource());
        m.put("output_tokens_per_second", round(perSecond(stats.outputTokens(), wallSeconds())));
        m.put("prompt_tokens", stats.promptTokens());
        m.put("prompt_tokens_reported_by", stats.withPromptUsage());
        m.put("latency_ms", latencyJson());
        m.put("errors", errorsJson(stats));
        if (warmup != null) {
            Map<String, Object> w = new LinkedHashMap<>();
            w.put("requests_ok", warmup.ok());
            w.put("requests_failed", warmup.failed());
            w.put("errors", errorsJson(warmup));
            m.put("warmup", w);
        }
        return m;
    }

    private Map<String, Object> latencyJson() {
        Map<String, Object> l = new LinkedHashMap<>();
        for (Map.Entry<String, Histogram> e : stats.latencies().entrySet()) {
            Histogram h = e.getValue();
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("count", h.getTotalCount());
            boolean any = h.getTotalCount() > 0;
            row.put("mean", any ? round(h.getMean() / 1e6) : null);
            for (double p : PERCENTILES) {
                row.put("p" + (int) p, any ? round(h.getValueAtPercentile(p) / 1e6) : null);
            }
            row.put("max", any ? round(h.getMaxValue() / 1e6) : null);
            l.put(e.getKey(), row);
        }
        return l;
    }

    private static Map<String, Object> errorsJson(BenchStats s) {
        Map<String, Object> errors = new LinkedHashMap<>();
        s.failures().forEach((kind, f) -> {
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("count", f.count());
            row.put("first_message", f.firstMessage());
            errors.put(kind, row);
        });
        return errors;
    }

    private static double round(double v) {
        return Math.round(v * 1000) / 1000.0;
    }

    private static String plain(double v) {
        return BigDecimal.valueOf(v).stripTrailingZeros().toPlainString();
    }
}
