package io.tnsr.engine.loadgen;

import io.tnsr.engine.metrics.LatencyMetric;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.HdrHistogram.Histogram;

/**
 * What the requests of one phase came to, in constant memory: latencies in HdrHistograms (nanoseconds, 3 significant
 * digits), tokens and requests as sums, failures counted per category (a handful: HTTP statuses, timeout, ...) with
 * the first message of each. Requests finish on many threads; each is recorded under this object's lock, which also
 * makes the optional interval logs ({@link LatencyMetric}, one writer at a time) safe.
 *
 * <p>Latencies are those of successful requests: TTFT (first non-empty text), TPOT ((end - first token) /
 * (tokens - 1), requests of two tokens or more) and end to end, the first and last measured from each request's
 * start as the load generator gives it (its intended start in an open loop).
 */
public final class BenchStats {
    /** A failure category: how many, and what the first one said. */
    public record Failure(long count, String firstMessage) {
    }

    private final Histogram ttft = histogram();
    private final Histogram tpot = histogram();
    private final Histogram e2e = histogram();
    private final LatencyMetric ttftLog;
    private final LatencyMetric tpotLog;
    private final LatencyMetric e2eLog;
    private final Map<String, Failure> failures = new TreeMap<>();
    private long ok;
    private long failed;
    private long outputTokens;
    private long withUsage;
    private long promptTokens;
    private long promptMin = Long.MAX_VALUE;
    private long promptMax;
    private long withPromptUsage;

    /** Stats without interval logs. */
    public BenchStats() {
        this(null, null, null);
    }

    /** Stats that also record each latency into these metrics' interval logs. */
    public BenchStats(LatencyMetric ttftLog, LatencyMetric tpotLog, LatencyMetric e2eLog) {
        this.ttftLog = ttftLog;
        this.tpotLog = tpotLog;
        this.e2eLog = e2eLog;
    }

    private static Histogram histogram() {
        return new Histogram(1, LatencyMetric.HIGHEST, LatencyMetric.DIGITS);
    }

    /** Counts {@code o}; its latencies are measured from {@code startNanos}. */
    public synchronized void record(Outcome o, long startNanos) {
        if (!o.ok()) {
            failed++;
            failures.merge(o.error(), new Failure(1, o.message()), (a, b) -> new Failure(a.count() + 1, a.firstMessage()));
            return;
        }
        ok++;
        long tokens = o.outputTokens();
        outputTokens += tokens;
        withUsage += o.hasUsage() ? 1 : 0;
        if (o.promptTokens() >= 0) {
            withPromptUsage++;
            promptTokens += o.promptTokens();
            promptMin = Math.min(promptMin, o.promptTokens());
            promptMax = Math.max(promptMax, o.promptTokens());
        }
        add(e2e, e2eLog, o.endNanos() - startNanos);
        if (o.firstTokenNanos() != 0) {
            add(ttft, ttftLog, o.firstTokenNanos() - startNanos);
            if (tokens >= 2) {
                add(tpot, tpotLog, (o.endNanos() - o.firstTokenNanos()) / (tokens - 1));
            }
        }
    }

    private static void add(Histogram h, LatencyMetric log, long nanos) {
        long v = Math.max(0, Math.min(nanos, LatencyMetric.HIGHEST));
        h.recordValue(v);
        if (log != null) {
            log.record(v);
        }
    }

    public synchronized long ok() {
        return ok;
    }

    public synchronized long failed() {
        return failed;
    }

    /** Requests recorded, successful or not. */
    public synchronized long done() {
        return ok + failed;
    }

    /** Output tokens of the successful requests (usage.completion_tokens, else text chunks counted). */
    public synchronized long outputTokens() {
        return outputTokens;
    }

    /** Successful requests whose output tokens came from a usage chunk. */
    public synchronized long withUsage() {
        return withUsage;
    }

    /** Sum of usage.prompt_tokens over the successful requests that reported it. */
    public synchronized long promptTokens() {
        return promptTokens;
    }

    /** Successful requests that reported usage.prompt_tokens. */
    public synchronized long withPromptUsage() {
        return withPromptUsage;
    }

    public synchronized long promptMin() {
        return withPromptUsage == 0 ? 0 : promptMin;
    }

    public synchronized long promptMax() {
        return promptMax;
    }

    /** Failures by category, sorted by name. */
    public synchronized Map<String, Failure> failures() {
        return Collections.unmodifiableMap(new LinkedHashMap<>(failures));
    }

    /** Copies of the whole-phase latency histograms: ttft, tpot, e2e. */
    public synchronized Map<String, Histogram> latencies() {
        Map<String, Histogram> m = new LinkedHashMap<>();
        m.put("ttft", ttft.copy());
        m.put("tpot", tpot.copy());
        m.put("e2e", e2e.copy());
        return m;
    }
}
