package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.metrics.Correction;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.metrics.MetricsLog;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.xml.parsers.DocumentBuilderFactory;
import org.agrona.concurrent.status.AtomicCounter;
import org.junit.jupiter.api.Test;
import org.w3c.dom.Document;
import org.w3c.dom.Element;
import org.w3c.dom.NodeList;

/** tools/latency-report over run directories written the way the pipeline writes them (MetricsLog). */
class LatencyReportCommandTest {

    static final List<String> HOPS = List.of("hop-coordinator-stage0", "hop-stage0-stage1", "hop-stage1-coordinator");

    /** A run directory: each hop 1000 values spread over [100, 200) us times scale, a compute metric, a request metric, stalls. */
    static Path run(String name, int scale, long stalls) throws Exception {
        Path dir = Files.createTempDirectory(name);
        MetricsLog log = new MetricsLog(dir, 60_000, "test-metrics");
        List<LatencyMetric> hops = new ArrayList<>();
        for (String h : HOPS) {
            hops.add(log.add(new LatencyMetric(h, "one-way hop")));
        }
        LatencyMetric compute = log.add(new LatencyMetric("stage0-compute", "layers run per frame"));
        LatencyMetric request = log.add(new LatencyMetric("request", "whole request",
                Correction.fromIntendedStart("each sequence's scheduled arrival")));
        AtomicCounter stallCount = log.counter("stage0-stalls", "frames picked up > 1000 us after reaching the idle compute thread");
        log.start();
        for (int i = 0; i < 1000; i++) {
            for (LatencyMetric h : hops) {
                h.record((100_000L + i * 100L) * scale);
            }
            compute.record(250_000L * scale);
        }
        for (int i = 1; i <= 10; i++) {
            request.record(i * 10_000_000L * scale);
        }
        stallCount.set(stalls);
        log.close();
        return dir;
    }

    static String[] report(String... args) {
        Object[] r = CliRun.run(new LatencyReportCommand(), args);
        return new String[] {String.valueOf(r[0]), (String) r[1], (String) r[2]};
    }

    static Document parseSvg(Path f) throws Exception {
        DocumentBuilderFactory f2 = DocumentBuilderFactory.newInstance();
        f2.setNamespaceAware(true);
        return f2.newDocumentBuilder().parse(f.toFile());   // throws on anything not well-formed
    }

    static List<Element> polylines(Document d, String cls) {
        NodeList nodes = d.getElementsByTagNameNS("http://www.w3.org/2000/svg", "polyline");
        List<Element> found = new ArrayList<>();
        for (int i = 0; i < nodes.getLength(); i++) {
            Element e = (Element) nodes.item(i);
            if (List.of(e.getAttribute("class").split(" ")).contains(cls)) {
                found.add(e);
            }
        }
        return found;
    }

    static String row(String table, String metric) {
        return table.lines().filter(l -> l.startsWith(metric + " ")).findFirst().orElseThrow(() -> new AssertionError(metric + " in\n" + table));
    }

    @Test
    void oneRunGivesATableOfEveryMetricAndAChartWithOneLinePerHop() throws Exception {
        Path a = run("run-a", 1, 3);
        String[] r = report(a.toString());
        assertEquals("0", r[0], r[2]);
        String table = r[1];
        // p50 of 100..199.9 us is about 150 us; the max 199.9 us (3 significant digits)
        String[] hop = row(table, "hop-stage0-stage1").trim().split("\\s+");
        assertEquals("1000", hop[1]);
        assertEquals(150.0, Double.parseDouble(hop[2]), 0.2);
        assertEquals(199.9, Double.parseDouble(hop[6]), 0.2);
        assertEquals("no", hop[7]);
        assertTrue(row(table, "request").endsWith("yes"), "the request metric is marked corrected");
        assertEquals(250.0, Double.parseDouble(row(table, "stage0-compute").trim().split("\\s+")[2]), 0.3);
        assertTrue(row(table, "stage0-stalls").contains(" 3 "), row(table, "stage0-stalls"));
        assertTrue(table.contains("co (coordinated omission): request measured from each sequence's scheduled arrival"), table);

        Path svg = a.resolve("latency.svg");
        assertTrue(r[1].contains("chart: " + svg), "default chart location: DIR/latency.svg");
        Document d = parseSvg(svg);
        List<Element> hops = polylines(d, "hop");
        assertEquals(HOPS, hops.stream().map(e -> e.getAttribute("data-metric")).toList(), "one polyline per hop, in order");
        for (Element e : hops) {
            assertTrue(e.getAttribute("points").split(" ").length > 10, "a percentile curve, not a point");
            assertTrue(e.getAttribute("stroke-dasharray").isEmpty(), "one run: solid");
        }
        String text = Files.readString(svg);
        for (String label : List.of("50%", "90%", "99%", "99.9%", "99.99%", "latency (log scale)", "100 µs")) {
            assertTrue(text.contains(">" + label + "<"), label);
        }
    }

    @Test
    void twoRunsSideBySideWithTheRatioAndBothInOneChart() throws Exception {
        Path a = run("run-a", 1, 3);
        Path b = run("run-b", 2, 5);
        Path svg = Files.createTempDirectory("charts").resolve("sub/compare.svg");
        String[] r = report(a.toString(), b.toString(), "--out", svg.toString());
        assertEquals("0", r[0], r[2]);
        String[] cells = row(r[1], "hop-stage0-stage1").split("\\|");
        // count A, count B | p50 A, p50 B, B/A | p90 ... | max A, max B, B/A
        assertEquals(List.of("1000", "1000"), List.of(cells[0].trim().split("\\s+")).subList(1, 3));
        for (int i = 1; i <= 5; i++) {
            String[] g = cells[i].trim().split("\\s+");
            assertEquals(2.0 * Double.parseDouble(g[0]), Double.parseDouble(g[1]), 0.01 * Double.parseDouble(g[1]), cells[i]);
            assertEquals("2.00", g[2], "B/A of " + cells[i]);
        }
        assertTrue(row(r[1], "stage0-stalls").matches("stage0-stalls\\s+3\\s+5\\s+.*"), row(r[1], "stage0-stalls"));

        Document d = parseSvg(svg);
        List<Element> hops = polylines(d, "hop");
        assertEquals(2 * HOPS.size(), hops.size(), "each hop of each run");
        assertEquals(HOPS.size(), hops.stream().filter(e -> e.getAttribute("data-run").equals("A")
                && e.getAttribute("stroke-dasharray").isEmpty()).count(), "A solid");
        assertEquals(HOPS.size(), hops.stream().filter(e -> e.getAttribute("data-run").equals("B")
                && !e.getAttribute("stroke-dasharray").isEmpty()).count(), "B dashed");
    }

    @Test
    void aDirectoryWithoutLogsIsAOneLineErrorWithStatus2() throws Exception {
        Path empty = Files.createTempDirectory("empty");
        String[] r = report(empty.toString());
        assertEquals("2", r[0]);
        assertTrue(r[2].startsWith("latency-report: ") && r[2].contains("no .hlog files"), r[2]);
        assertEquals(1, r[2].strip().lines().count(), r[2]);
    }

    @Test
    void aLogCutShortIsAOneLineErrorNamingItsFile() throws Exception {
        Path a = run("run-cut", 1, 0);
        Path log = a.resolve("request.hlog");
        byte[] whole = Files.readAllBytes(log);
        Files.write(log, java.util.Arrays.copyOf(whole, whole.length - 40));
        String[] r = report(a.toString(), "--no-chart");
        assertEquals("2", r[0], r[2]);
        assertTrue(r[2].startsWith("latency-report: " + log + ": not a complete HdrHistogram interval log"), r[2]);
        assertEquals(1, r[2].strip().lines().count(), r[2]);
    }
}
