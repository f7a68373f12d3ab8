package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code tools/serve-bench} in-process against a fake OpenAI server on a real socket. */
@Timeout(30)
class ServeBenchCommandTest {
    private FakeOpenAiServer fake;

    @BeforeEach
    void start() throws Exception {
        fake = new FakeOpenAiServer();
    }

    @AfterEach
    void stop() throws Exception {
        fake.close();
    }

    /** {exit status, stdout, stderr}. */
    private static String[] bench(String... args) {
        Object[] r = CliRun.run(new ServeBenchCommand(), args);
        return new String[] {String.valueOf(r[0]), (String) r[1], (String) r[2]};
    }

    private String[] benchFake(String... args) {
        List<String> all = new ArrayList<>(List.of(fake.url()));
        all.addAll(List.of(args));
        return bench(all.toArray(String[]::new));
    }

    private static JsonNode json(String[] r) throws Exception {
        return Jackson.MAPPER.readTree(r[1]);
    }

    private static String line(String text, String start) {
        return text.lines().filter(l -> l.startsWith(start)).findFirst()
                .orElseThrow(() -> new AssertionError("no line starting with '" + start + "' in\n" + text));
    }

    @Test
    void aClosedLoopCountsEveryRequestAndTokenAndTimesTheFirstToken() throws Exception {
        fake.chunks = 5;
        fake.firstDelayMillis = 60;
        fake.chunkDelayMillis = 30;
        String[] r = benchFake("--concurrency", "3", "--requests", "9", "--warmup", "2", "--prompt-tokens", "20",
                "--max-tokens", "5", "--json");
        assertEquals("0", r[0], r[2]);
        JsonNode j = json(r);
        assertEquals("fake-model", j.get("model").asText(), "the model is the first /v1/models lists");
        assertEquals("closed-loop", j.get("mode").asText());
        assertEquals(9, j.get("requests_ok").asLong());
        assertEquals(0, j.get("requests_failed").asLong());
        assertEquals(45, j.get("output_tokens").asLong());
        assertEquals("usage.completion_tokens", j.get("output_tokens_source").asText());
        assertEquals(9 * 20, j.get("prompt_tokens").asLong(), "usage.prompt_tokens of 20-word prompts");
        assertEquals(2, j.get("warmup").get("requests_ok").asLong());
        JsonNode lat = j.get("latency_ms");
        for (String m : List.of("ttft", "tpot", "e2e")) {
            assertEquals(9, lat.get(m).get("count").asLong(), m);
        }
        assertTrue(lat.get("ttft").get("p50").asDouble() >= 60, "TTFT includes the first chunk's delay: " + lat);
        assertTrue(lat.get("tpot").get("p50").asDouble() >= 29, "TPOT: 30 ms between chunks: " + lat);
        assertTrue(lat.get("e2e").get("p50").asDouble() >= 180, "E2E: 60 ms + 4 x 30 ms: " + lat);
        assertTrue(lat.get("ttft").get("p50").asDouble() < lat.get("e2e").get("p50").asDouble() - 90,
                "the first token is timed as it arrives, not when the body has ended: " + lat);
        double wall = j.get("wall_seconds").asDouble();
        assertEquals(45 / wall, j.get("output_tokens_per_second").asDouble(), 0.01 * 45 / wall);

        List<JsonNode> bodies = fake.bodies();
        assertEquals(11, bodies.size(), "9 measured + 2 warmup requests reached the server");
        HashSet<String> prompts = new HashSet<>();
        for (JsonNode b : bodies) {
            assertEquals("fake-model", b.get("model").asText());
            assertTrue(b.get("stream").asBoolean());
            assertTrue(b.get("stream_options").get("include_usage").asBoolean());
            assertEquals(5, b.get("max_tokens").asInt());
            assertFalse(b.has("ignore_eos"));
            assertEquals(20, b.get("prompt").asText().split(" ").length);
            prompts.add(b.get("prompt").asText());
        }
        assertEquals(11, prompts.size(), "each request has a prompt of its own");
    }

    @Test
    void theTableGivesPercentilesThroughputAndCountsTextChunksWhenTheServerSendsNoUsage() {
        fake.chunks = 3;
        fake.usage = false;
        String[] r = benchFake("--concurrency", "2", "--requests", "4", "--model", "mine", "--seed", "7", "--temperature",
                "0.5", "--ignore-eos");
        assertEquals("0", r[0], r[2]);
        String out = r[1];
        assertTrue(out.startsWith("serve-bench " + fake.url() + "  model mine  closed loop, 2 clients"), out);
        assertTrue(line(out, "latency (ms)").matches("latency \\(ms\\)\\s+count\\s+mean\\s+p50\\s+p90\\s+p99\\s+max"), out);
        for (String m : List.of("ttft", "tpot", "e2e")) {
            assertEquals("4", line(out, m + " ").trim().split("\\s+")[1], out);
        }
        assertTrue(line(out, "requests:").contains("4 ok, 0 failed"), out);
        assertTrue(line(out, "output tokens:").contains("12 (text chunks counted (the server sent no usage))"), out);
        assertTrue(line(out, "prompt tokens:").contains("unknown"), out);
        assertTrue(out.contains("errors: none"), out);
        List<JsonNode> bodies = fake.bodies();
        assertEquals("mine", bodies.get(0).get("model").asText());
        assertTrue(bodies.get(0).get("ignore_eos").asBoolean());
        assertEquals(0.5, bodies.get(0).get("temperature").asDouble());
        assertEquals(List.of(7L, 8L, 9L, 10L), bodies.stream().map(b -> b.get("seed").asLong()).sorted().toList(),
                "request i is sent seed + i");
        assertFalse(r[2].contains("measuring"), "no progress bar when stderr is not a terminal: " + r[2]);
    }

    @Test
    void refusedRequestsAreCountedAndReportedAndTheExitStatusIsOne() throws Exception {
        fake.status = 429;
        String[] r = benchFake("--concurrency", "2", "--requests", "5");
        assertEquals("1", r[0], r[1] + r[2]);
        assertTrue(line(r[1], "requests:").contains("0 ok, 5 failed"), r[1]);
        assertTrue(r[1].contains("errors: 5 failed"), r[1]);
        assertTrue(line(r[1], "  HTTP 429").matches("\\s+HTTP 429\\s+5\\s+e\\.g\\. every place is taken"), r[1]);

        String[] allowed = benchFake("--requests", "2", "--allow-errors", "--json");
        assertEquals("0", allowed[0], allowed[2]);
        assertEquals(2, json(allowed).get("errors").get("HTTP 429").get("count").asLong());
    }

    @Test
    void aRequestOverItsTimeoutFails() throws Exception {
        fake.firstDelayMillis = 700;
        String[] r = benchFake("--requests", "1", "--timeout", "0.2", "--json");
        assertEquals("1", r[0], r[2]);
        JsonNode j = json(r);
        assertEquals(1, j.get("errors").get("timeout").get("count").asLong(), r[1]);
        assertTrue(j.get("wall_seconds").asDouble() < 1.0, "ended at its timeout: " + r[1]);
    }

    @Test
    void anOpenLoopCountsTheQueueingBehindASlowServerAndWritesLogsLatencyReportReads() throws Exception {
        fake.serial = true;              // one request at a time, 100 ms each
        fake.chunks = 2;
        fake.firstDelayMillis = 100;
        Path dir = Files.createTempDirectory("serve-bench").resolve("run");
        String[] r = benchFake("--rate", "50", "--requests", "8", "--max-in-flight", "2", "--histograms", dir.toString(),
                "--json");
        assertEquals("0", r[0], r[2]);
        JsonNode j = json(r);
        assertEquals("open-loop", j.get("mode").asText());
        assertTrue(j.get("co_corrected").asBoolean());
        assertEquals(8, j.get("requests_ok").asLong());
        assertTrue(j.get("in_flight_cap_hits").asLong() > 0, "at 50/s, 2 places fill up behind 100 ms requests: " + r[1]);
        JsonNode e2e = j.get("latency_ms").get("e2e");
        // 8 x 100 ms served one after another while all 8 arrive in about 160 ms: the last waits most of 800 ms.
        // Measured from its send, a request would wait at most for the one other in flight (about 200 ms).
        assertTrue(e2e.get("max").asDouble() > 400, "latency from the intended start includes the queueing: " + e2e);
        assertTrue(e2e.get("p50").asDouble() > 200, "" + e2e);

        for (String f : List.of("ttft.hlog", "tpot.hlog", "request.hlog", "run.json")) {
            assertTrue(Files.isRegularFile(dir.resolve(f)), f);
        }
        Object[] report = CliRun.run(new LatencyReportCommand(), dir.toString());
        assertEquals(0, report[0], (String) report[2]);
        String table = (String) report[1];
        assertTrue(table.startsWith(dir + " (open loop at 50 sequences/s)"), table);
        for (String m : List.of("ttft", "request")) {
            String[] row = line(table, m + " ").trim().split("\\s+");
            assertEquals("8", row[1], table);
            assertEquals("yes", row[row.length - 1], m + " is corrected for coordinated omission: " + table);
        }
        String[] request = line(table, "request ").trim().split("\\s+");
        assertEquals(e2e.get("max").asDouble() * 1000, Double.parseDouble(request[6]), e2e.get("max").asDouble(),
                "the log holds the figures the summary printed");
        assertTrue(line(table, "tpot ").trim().endsWith("no"), table);
        assertTrue(Files.readString(dir.resolve("latency.svg")).contains("data-metric=\"request\""), "charted with run-pipeline's names");
    }

    @Test
    void aDurationStopsSendingAndPromptsFromAFileGoRoundRobin() throws Exception {
        fake.chunks = 2;
        fake.firstDelayMillis = 20;
        Path prompts = Files.createTempFile("prompts", ".txt");
        Files.writeString(prompts, "first prompt\n{\"prompt\": \"second\", \"id\": 2}\n\nthird one\n");
        String[] r = benchFake("--prompts", prompts.toString(), "--duration", "0.3", "--json");
        assertEquals("0", r[0], r[2]);
        long ok = json(r).get("requests_ok").asLong();
        assertTrue(ok >= 3 && ok <= 20, "one client, about 20 ms each, for 0.3 s: " + ok);
        List<String> got = fake.bodies().stream().map(b -> b.get("prompt").asText()).toList();
        assertEquals(List.of("first prompt", "second", "third one"), got.subList(0, 3));
        assertEquals("first prompt", got.get(3));
        assertTrue(r[2].isEmpty(), "no warm-up, nothing repeated: " + r[2]);
    }

    @Test
    void measuredRequestsThatRepeatTheWarmUpsPromptsAreNoted() throws Exception {
        Path prompts = Files.createTempFile("prompts", ".txt");
        Files.writeString(prompts, "one\ntwo\nthree\nfour\n");
        String[] r = benchFake("--prompts", prompts.toString(), "--warmup", "2", "--requests", "3", "--json");
        assertEquals("0", r[0], r[2]);
        assertTrue(r[2].contains("measured requests repeat prompts the warm-up sent (4 from " + prompts), r[2]);
        String[] fits = benchFake("--prompts", prompts.toString(), "--warmup", "2", "--requests", "2", "--json");
        assertFalse(fits[2].contains("repeat"), "four prompts hold two warm-up and two measured requests: " + fits[2]);
        String[] generated = benchFake("--prompt-tokens", "8", "--warmup", "2", "--requests", "2", "--json");
        assertFalse(generated[2].contains("repeat"), generated[2]);
    }

    @Test
    void helpPrintsTheOptionsCleanly() {
        String[] r = bench("--help");
        assertEquals("0", r[0]);
        assertEquals("", r[2]);
        assertTrue(r[1].startsWith("Usage: serve-bench "), r[1]);
        for (String o : List.of("URL", "--concurrency", "--rate", "--requests", "--duration", "--warmup", "--prompts",
                "--prompt-tokens", "--max-tokens", "--model", "--ignore-eos", "--api-key-file", "--histograms", "--json",
                "--timeout", "--allow-errors")) {
            assertTrue(r[1].contains(o), o);
        }
        assertTrue(r[1].contains("(default: 128)"), "defaults are shown");
        assertTrue(r[1].lines().allMatch(l -> l.length() <= 80), "lines fit 80 columns:\n" + r[1]);
    }

    @Test
    void anUnreachableServerOrABadUrlIsOneLineNamingItWithStatusTwo() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0)) {
            port = s.getLocalPort();
        }
        String url = "http://127.0.0.1:" + port;
        String[] r = bench(url, "--requests", "1");
        assertEquals("2", r[0], r[1] + r[2]);
        assertTrue(r[2].startsWith("serve-bench: cannot reach " + url), r[2]);
        assertEquals(1, r[2].strip().lines().count(), r[2]);
        assertEquals("", r[1]);

        String[] bad = bench("localhost:8080");
        assertEquals("2", bad[0]);
        assertTrue(bad[2].startsWith("serve-bench: 'localhost:8080' is not an http:// or https:// URL"), bad[2]);
        assertEquals(1, bad[2].strip().lines().count(), bad[2]);

        String[] both = bench(fake.url(), "--rate", "1", "--concurrency", "2");
        assertEquals("2", both[0]);
        assertTrue(both[2].contains("not both"), both[2]);
    }
}
