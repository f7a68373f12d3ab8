package io.tnsr.engine.server;

import io.prometheus.metrics.core.metrics.Counter;
import io.prometheus.metrics.core.metrics.GaugeWithCallback;
import io.prometheus.metrics.core.metrics.Histogram;
import io.prometheus.metrics.expositionformats.PrometheusTextFormatWriter;
import io.prometheus.metrics.model.registry.MultiCollector;
import io.prometheus.metrics.model.registry.PrometheusRegistry;
import io.prometheus.metrics.model.snapshots.ClassicHistogramBuckets;
import io.prometheus.metrics.model.snapshots.GaugeSnapshot;
import io.prometheus.metrics.model.snapshots.HistogramSnapshot;
import io.prometheus.metrics.model.snapshots.Labels;
import io.prometheus.metrics.model.snapshots.MetricSnapshots;
import io.prometheus.metrics.model.snapshots.Unit;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.metrics.CounterFile;
import io.tnsr.engine.metrics.LatencyBuckets;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.function.IntSupplier;

/**
 * A server's metrics in Prometheus's text format ({@code GET /metrics}), through the Prometheus Java client:
 * <ul>
 * <li>{@code tnsr_requests_running}, {@code tnsr_requests_waiting}: sequences in the micro-batches and waiting for a
 * place (as the scheduler last saw them);</li>
 * <li>{@code tnsr_requests_total{finish_reason}}, {@code tnsr_requests_rejected_total{status}}: requests ended, and
 * refused before they ran (429 full, 400 invalid);</li>
 * <li>{@code tnsr_prompt_tokens_total}, {@code tnsr_generation_tokens_total};</li>
 * <li>{@code tnsr_time_to_first_token_seconds}, {@code tnsr_time_per_output_token_seconds},
 * {@code tnsr_request_duration_seconds} (histograms, from a request's arrival);</li>
 * <li>{@code tnsr_kv_cache_pages_used{stage}}, {@code tnsr_kv_cache_pages_capacity{stage}} and
 * {@code tnsr_hop_latency_seconds{hop}} (histogram), read at each scrape from the counters and buckets files that
 * every stage process and the coordinator keep in the run directory.</li>
 * </ul>
 */
public final class ServingMetrics {
    private static final double[] TOKEN_BOUNDS = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0};
    private static final double[] REQUEST_BOUNDS = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0};

    private final PrometheusRegistry registry = new PrometheusRegistry();
    private final PrometheusTextFormatWriter writer = PrometheusTextFormatWriter.create();
    private final Counter requests;
    private final Counter rejected;
    private final Counter promptTokens;
    private final Counter generationTokens;
    private final Histogram ttft;
    private final Histogram tpot;
    private final Histogram duration;

    /**
     * @param runDir  where the stages and the coordinator keep their counters and buckets files ({@code stage<i>-metrics.counters}, {@code .buckets})
     * @param stages  stage count
     * @param running sequences running now
     * @param waiting sequences waiting now
     */
    public ServingMetrics(Path runDir, int stages, IntSupplier running, IntSupplier waiting) {
        GaugeWithCallback.builder().name("tnsr_requests_running").help("Requests whose sequences are in the micro-batches")
                .callback(cb -> cb.call(running.getAsInt())).register(registry);
        GaugeWithCallback.builder().name("tnsr_requests_waiting").help("Requests waiting for a place in a micro-batch")
                .callback(cb -> cb.call(waiting.getAsInt())).register(registry);
        requests = Counter.builder().name("tnsr_requests").help("Requests ended, by finish reason")
                .labelNames("finish_reason").register(registry);
        rejected = Counter.builder().name("tnsr_requests_rejected").help("Requests refused before they ran, by HTTP status")
                .labelNames("status").register(registry);
        promptTokens = Counter.builder().name("tnsr_prompt_tokens").help("Prompt tokens of the requests that ran").register(registry);
        generationTokens = Counter.builder().name("tnsr_generation_tokens").help("Tokens generated").register(registry);
        ttft = Histogram.builder().name("tnsr_time_to_first_token_seconds").help("Arrival to first generated token")
                .unit(Unit.SECONDS).classicOnly().classicUpperBounds(REQUEST_BOUNDS).register(registry);
        tpot = Histogram.builder().name("tnsr_time_per_output_token_seconds")
                .help("Per request, (end - first token) / (tokens - 1)").unit(Unit.SECONDS).classicOnly()
                .classicUpperBounds(TOKEN_BOUNDS).register(registry);
        duration = Histogram.builder().name("tnsr_request_duration_seconds").help("Arrival to last token")
                .unit(Unit.SECONDS).classicOnly().classicUpperBounds(REQUEST_BOUNDS).register(registry);
        registry.register(new PipelineCollector(runDir, stages));
    }

    /** A sequence's first token was chosen (coordinator thread). */
    void firstToken(SequenceState s) {
        ttft.observe(s.timeToFirstTokenNanos() / 1e9);
    }

    /** A sequence ended (coordinator thread). */
    void finished(SequenceState s, Completion.Finish finish) {
        requests.labelValues(finish.json()).inc();
        int generated = s.generatedCount();
        if (generated > 0) {
            promptTokens.inc(s.promptLength());
            generationTokens.inc(generated);
            duration.observe(s.elapsedNanos() / 1e9);
        }
        if (generated > 1) {
            tpot.observe((s.elapsedNanos() - s.timeToFirstTokenNanos()) / 1e9 / (generated - 1));
        }
    }

    /** A request was refused with {@code status} before it ran. */
    void rejected(int status) {
        rejected.labelValues(Integer.toString(status)).inc();
    }

    /** Content type of {@link #write}. */
    public String contentType() {
        return PrometheusTextFormatWriter.CONTENT_TYPE;
    }

    /** Writes every metric in the text format. */
    public void write(OutputStream out) throws IOException {
        writer.write(out, registry.scrape(), io.prometheus.metrics.config.EscapingScheme.DEFAULT);
    }

    /** The stages' KV cache use and the hops' latency, read from the run directory's counters and buckets files at each scrape. */
    private static final class PipelineCollector implements MultiCollector {
        private final Path runDir;
        private final int stages;

        PipelineCollector(Path runDir, int stages) {
            this.runDir = runDir;
            this.stages = stages;
        }

        @Override
        public MetricSnapshots collect() {
            GaugeSnapshot.Builder used = GaugeSnapshot.builder().name("tnsr_kv_cache_pages_used")
                    .help("KV cache pages a stage holds after its last frame");
            GaugeSnapshot.Builder capacity = GaugeSnapshot.builder().name("tnsr_kv_cache_pages_capacity")
                    .help("KV cache pages a stage can hold");
            HistogramSnapshot.Builder hops = HistogramSnapshot.builder().name("tnsr_hop_latency_seconds").unit(Unit.SECONDS)
                    .help("One-way hop latency, written by one process to decoded by the next");
            for (int i = 0; i <= stages; i++) {
                String process = i < stages ? "stage" + i : "coordinator";
                Map<String, CounterFile.Reading> counters = read(runDir.resolve(process + "-metrics" + CounterFile.SUFFIX));
                if (i < stages && counters != null) {
                    Labels stage = Labels.of("stage", Integer.toString(i));
                    gauge(used, counters.get(process + "-kv-pages-used"), stage);
                    gauge(capacity, counters.get(process + "-kv-pages-capacity"), stage);
                }
                Map<String, CounterFile.Reading> buckets = read(runDir.resolve(process + "-metrics" + LatencyBuckets.SUFFIX));
                String upstream = i == 0 ? "coordinator" : "stage" + (i - 1);
                String hop = i < stages ? "hop-" + upstream + "-" + process : "hop-stage" + (stages - 1) + "-coordinator";
                LatencyBuckets.Snapshot b = buckets == null ? null : LatencyBuckets.read(buckets, hop);
                if (b != null) {
                    hops.dataPoint(HistogramSnapshot.HistogramDataPointSnapshot.builder()
                            .labels(Labels.of("hop", hop.substring("hop-".length())))
                            .classicHistogramBuckets(ClassicHistogramBuckets.of(b.upperBoundsSeconds(), b.counts()))
                            .sum(b.sumSeconds()).build());
                }
            }
            return MetricSnapshots.of(used.build(), capacity.build(), hops.build());
        }

        private static void gauge(GaugeSnapshot.Builder b, CounterFile.Reading r, Labels labels) {
            if (r != null) {
                b.dataPoint(GaugeSnapshot.GaugeDataPointSnapshot.builder().value(r.value()).labels(labels).build());
            }
        }

        private static Map<String, CounterFile.Reading> read(Path file) {
            if (!Files.isRegularFile(file)) {
                return null;   // that process has not started yet
            }
            try {
                return CounterFile.read(file);
            } catch (IOException e) {
                return null;   // being created: the next scrape reads it
            }
        }
    }
}
