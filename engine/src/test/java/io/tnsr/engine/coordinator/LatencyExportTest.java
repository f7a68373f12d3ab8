package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.StopReason;
import io.tnsr.engine.metrics.CounterFile;
import io.tnsr.engine.metrics.LatencySummary;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestJson;
import io.tnsr.engine.testing.TestModels;
import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.HdrHistogram.EncodableHistogram;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramLogReader;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A small pipeline run with its histograms kept: every hop and metric is logged with the counts the run implies,
 * read back with HdrHistogram's own reader (not through {@link LatencySummary}), and the exports agree with them.
 */
@Timeout(120)
class LatencyExportTest {

    /** Every interval of every .hlog in dir, added up per metric, by HdrHistogram's reader alone. */
    static Map<String, Histogram> readLogs(Path dir) throws IOException {
        Map<String, Histogram> all = new TreeMap<>();
        try (DirectoryStream<Path> logs = Files.newDirectoryStream(dir, "*.hlog")) {
            for (Path f : logs) {
                Histogram total = new Histogram(1, 3_600_000_000_000L, 3);
                HistogramLogReader r = new HistogramLogReader(f.toFile());
                EncodableHistogram e;
                while ((e = r.nextIntervalHistogram()) != null) {
                    total.add((Histogram) e);
                }
                r.close();
                String name = f.getFileName().toString();
                all.put(name.substring(0, name.length() - ".hlog".length()), total);
            }
        }
        return all;
    }

    @Test
    void everyHopAndMetricIsLoggedWithTheFramesCountsAndTheExportsAgree() throws IOException {
        PipelineHarness h = new PipelineHarness(TestModels.get(ModelSpec.tiny()), 3);
        h.sampleInLastStage = false;   // logits come back: the control frames are END_SEQUENCE and SHUTDOWN alone
        PipelineConfig p = h.pipeline;
        // a 1 us stall threshold: nearly every pick-up by a blocked compute thread counts, so the counter shows up
        h.pipeline = new PipelineConfig(p.host(), p.stages(), p.ringSize(), p.maxFrameBytes(), p.maxTokensPerFrame(),
                p.maxSequencesPerFrame(), p.waitMode(), p.kvCacheTokens(), p.socketBufferBytes(), 1);
        h.microBatches = 2;
        h.batchSize = 1;       // one sequence per frame: frames follow from the tokens chosen
        List<String> prompts = List.of("a b c", "once upon a time", "the quick fox", "hello there my friend", "yo");
        List<SequenceState> seqs = h.runLocal(prompts, 6, SamplingConfig.GREEDY);

        // Each sequence: its prefill frame, then one decode frame per further token chosen (an EOS or BOS that ends
        // it is chosen but not kept); every frame samples exactly one token for its one sequence.
        long frames = 0;
        long longerThanOne = 0;
        for (SequenceState s : seqs) {
            assertTrue(s.error() == null, s.error());
            frames += s.generatedCount() + (s.stoppedBy() == StopReason.EOS || s.stoppedBy() == StopReason.BOS ? 1 : 0);
            longerThanOne += s.generatedCount() > 1 ? 1 : 0;
        }
        assertEquals(frames, h.outcome.result().steps(), "a LOGITS frame per frame sent");
        int n = seqs.size();
        long controlFrames = n + 1L;   // one END_SEQUENCE per finished sequence (one per micro-batch step), SHUTDOWN

        Map<String, Histogram> logs = readLogs(h.runDir);
        Map<String, Long> expected = new TreeMap<>();
        for (String hop : List.of("hop-coordinator-stage0", "hop-stage0-stage1", "hop-stage1-stage2", "hop-stage2-coordinator")) {
            expected.put(hop, frames);   // control frames carry no trace stamp
        }
        for (int i = 0; i < 3; i++) {
            expected.put("stage" + i + "-compute", frames);
            expected.put("stage" + i + "-compute-per-token", frames);
            expected.put("stage" + i + "-queue-wait", frames + controlFrames);
            expected.put("stage" + i + "-residence", frames + controlFrames);
        }
        expected.put("coordinator-step", frames);
        expected.put("ttft", (long) n);
        expected.put("request", (long) n);
        expected.put("admission-delay", (long) n);
        expected.put("tpot", longerThanOne);
        assertEquals(new TreeSet<>(expected.keySet()), new TreeSet<>(logs.keySet()), "one .hlog per metric, named after it");
        for (Map.Entry<String, Long> e : expected.entrySet()) {
            assertEquals(e.getValue(), logs.get(e.getKey()).getTotalCount(), e.getKey());
        }

        // each hop is also counted in fixed buckets in its receiver's buckets file, for a server's /metrics
        int stageCount = h.pipeline.stages().size();
        for (int i = 0; i <= stageCount; i++) {
            String receiver = i < stageCount ? "stage" + i : "coordinator";
            String hop = i < stageCount ? "hop-" + (i == 0 ? "coordinator" : "stage" + (i - 1)) + "-" + receiver
                    : "hop-stage" + (stageCount - 1) + "-coordinator";
            io.tnsr.engine.metrics.LatencyBuckets.Snapshot b = io.tnsr.engine.metrics.LatencyBuckets.read(
                    io.tnsr.engine.metrics.CounterFile.read(h.runDir.resolve(receiver + "-metrics.buckets")), hop);
            assertEquals(logs.get(hop).getTotalCount(), java.util.Arrays.stream(b.counts()).sum(), hop + " buckets");
        }

        // summary.json: the same counts and percentiles, in microseconds
        Map<?, ?> summary = (Map<?, ?>) TestJson.read(h.runDir.resolve("summary.json"));
        Map<?, ?> metrics = (Map<?, ?>) summary.get("metrics");
        assertEquals(logs.keySet(), new TreeSet<>(castKeys(metrics)));
        for (Map.Entry<String, Histogram> e : logs.entrySet()) {
            Map<?, ?> row = (Map<?, ?>) metrics.get(e.getKey());
            Histogram hist = e.getValue();
            assertEquals(hist.getTotalCount(), ((Number) row.get("count")).longValue(), e.getKey());
            assertMicros(hist.getValueAtPercentile(50), row.get("p50_us"), e.getKey() + " p50");
            assertMicros(hist.getValueAtPercentile(90), row.get("p90_us"), e.getKey() + " p90");
            assertMicros(hist.getValueAtPercentile(99), row.get("p99_us"), e.getKey() + " p99");
            assertMicros(hist.getValueAtPercentile(99.9), row.get("p99_9_us"), e.getKey() + " p99.9");
            assertMicros(hist.getMaxValue(), row.get("max_us"), e.getKey() + " max");
            boolean corrected = List.of("ttft", "request", "admission-delay").contains(e.getKey());
            assertEquals(corrected, row.get("co_corrected"), e.getKey() + " coordinated omission");

            // the .hgrm: HdrHistogram's percentile distribution in microseconds, ending with its totals
            List<String> hgrm = Files.readAllLines(h.runDir.resolve(e.getKey() + ".hgrm"));
            assertTrue(hgrm.stream().anyMatch(l -> l.contains("microseconds")), e.getKey() + ".hgrm says its unit");
            String totals = hgrm.stream().filter(l -> l.startsWith("#[Max")).findFirst().orElseThrow();
            assertTrue(totals.matches(".*Total count\\s*=\\s*" + hist.getTotalCount() + "]"), totals);
            double maxUs = Double.parseDouble(totals.replaceAll("#\\[Max\\s*=\\s*([0-9.]+),.*", "$1"));
            assertEquals(hist.getMaxValue() / 1000.0, maxUs, 0.001, e.getKey() + ".hgrm max");
        }
        Map<?, ?> co = (Map<?, ?>) summary.get("coordinated_omission");
        assertEquals(List.of("admission-delay", "request", "ttft"), co.get("corrected"));
        assertTrue(((List<?>) co.get("uncorrected")).contains("hop-stage0-stage1"));
        assertEquals(Boolean.TRUE, ((Map<?, ?>) summary.get("clock")).get("same_host"));
        assertEquals("closed-loop", ((Map<?, ?>) summary.get("run")).get("mode"));

        Map<?, ?> counters = (Map<?, ?>) summary.get("counters");
        long stalls = 0;
        for (int i = 0; i < 3; i++) {
            Map<?, ?> c = (Map<?, ?>) counters.get("stage" + i + "-stalls");
            assertNotNull(c, "stage" + i + "-stalls in " + counters.keySet());
            long count = ((Number) c.get("count")).longValue();
            assertEquals(count, CounterFile.read(h.runDir.resolve("stage" + i + "-metrics" + CounterFile.SUFFIX))
                    .get("stage" + i + "-stalls").value(), "the stage's own counters file");
            Map<?, ?> ran = (Map<?, ?>) counters.get("stage" + i + "-frames");
            assertTrue(((Number) ran.get("count")).longValue() > 0, "stage" + i + " ran frames");
            assertTrue(((String) c.get("description")).contains("> 1 us"), (String) c.get("description"));
            assertEquals(count, h.outcome.stalls()[i], "the run summary's stalls of stage " + i);
            stalls += count;
        }
        assertTrue(stalls > 0, "with a 1 us threshold some pick-up is a stall");

        // the end-of-run table reads the same histograms
        String table = h.outcome.latency().table(true);
        assertTrue(table.contains("hop-stage1-stage2"), table);
        assertTrue(table.contains("co (coordinated omission)"), table);
    }

    private static List<String> castKeys(Map<?, ?> m) {
        return m.keySet().stream().map(String::valueOf).toList();
    }

    private static void assertMicros(long nanos, Object json, String what) {
        assertEquals(nanos / 1000.0, ((Number) json).doubleValue(), 0.006, what);
    }

    @Test
    void hopsIntoAndOutOfAStageOnAnotherHostAreMarkedCrossHost() {
        List<StageSpec> local = PipelineConfig.evenSplit(4, 3);
        PipelineConfig sameHost = PipelineConfig.defaults(4, 3, WaitMode.BLOCK)
                .withStages(List.of(local.get(0), new StageSpec(2, 3, 0, List.of(), "127.0.0.1:9000"), local.get(2)));
        assertTrue(PipelineRun.crossHostHops(sameHost).isEmpty());
        // 192.0.2.0/24 is reserved for documentation: never an address of this machine
        PipelineConfig remote = sameHost.withStages(List.of(local.get(0), new StageSpec(2, 3, 0, List.of(), "192.0.2.7:9000"),
                local.get(2)));
        assertEquals(List.of("hop-stage0-stage1", "hop-stage1-stage2"), PipelineRun.crossHostHops(remote));
        PipelineConfig remoteFirst = sameHost.withStages(List.of(new StageSpec(0, 2, 0, List.of(), "192.0.2.7:9000"),
                local.get(1), local.get(2)));
        assertEquals(List.of("hop-coordinator-stage0", "hop-stage0-stage1"), PipelineRun.crossHostHops(remoteFirst));
    }

    @Test
    void theStallThresholdIsAPipelineConfigKey() throws IOException {
        Path f = Files.createTempFile("pipeline", ".json");
        Files.writeString(f, "{\"stages\": 2, \"stall_threshold_us\": 250}");
        assertEquals(250, PipelineConfig.load(f, 4).stallThresholdMicros());
        Files.writeString(f, "{\"stages\": 2}");
        assertEquals(PipelineConfig.DEFAULT_STALL_THRESHOLD_MICROS, PipelineConfig.load(f, 4).stallThresholdMicros());
        Files.writeString(f, "{\"stages\": 2, \"stall_threshold_us\": 0}");
        assertFalse(assertThrowsMessage(f).isEmpty());
    }

    private static String assertThrowsMessage(Path f) {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> PipelineConfig.load(f, 4));
        assertTrue(e.getMessage().contains("stall_threshold_us"), e.getMessage());
        return e.getMessage();
    }
}
