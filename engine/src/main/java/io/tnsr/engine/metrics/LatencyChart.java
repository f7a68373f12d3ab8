package io.tnsr.engine.metrics;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.HistogramIterationValue;

/**
 * Latency-by-percentile charts of one or two runs as a self-contained SVG file (hand-written, no dependencies):
 * the classic HdrHistogram plot, x = percentile on a log scale of 1/(1-p) (50%, 90%, 99%, 99.9%, 99.99%, each
 * a decade further right), y = latency on a log scale. One panel per group of metrics:
 * <ol>
 *   <li>hops, one line per hop ({@code <polyline class="series hop" data-metric="hop-stage0-stage1" ...>});</li>
 *   <li>inside the stages, per frame: queue wait (thin, light) and compute (thick) per stage, and the
 *       coordinator's whole step round trip;</li>
 *   <li>per sequence, end to end: ttft, tpot, request (and the admission delay of an open-loop run).</li>
 * </ol>
 * The points are those of the {@code .hgrm} export (HdrHistogram's percentile iteration, 5 ticks per half
 * distance); a line ends at its maximum (a dot), where its samples run out: with N samples nothing beyond the
 * 1 - 1/N percentile is known. With two runs, the first is drawn solid and the second dashed.
 */
public final class LatencyChart {

    /** One run to draw: a label for the legend and its metrics. */
    public record Run(String label, LatencySummary summary) {
    }

    private record Panel(String kind, String title, Predicate<String> metrics) {
    }

    private static final Pattern STAGE_FRAME = Pattern.compile("stage(\\d+)-(compute|queue-wait)");
    private static final List<String> END_TO_END = List.of("ttft", "tpot", "request", "admission-delay");
    private static final List<Panel> PANELS = List.of(
            new Panel("hop", "Hops, one way: frame written by the sender to decoded by the receiver",
                    m -> m.startsWith("hop-")),
            new Panel("stage", "Per frame: queue wait (thin) and compute (thick) in each stage; coordinator step round trip",
                    m -> STAGE_FRAME.matcher(m).matches() || m.equals("coordinator-step")),
            new Panel("sequence", "Per sequence, end to end", END_TO_END::contains));

    /** Tableau 10: distinguishable, and readable by most colour-blind people. */
    private static final String[] PALETTE = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
        "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
    private static final String[] DASH = {null, "7 4"};

    private static final int WIDTH = 1040;
    private static final int LEFT = 78;
    private static final int PLOT_RIGHT = 700;
    private static final int LEGEND_X = 722;
    private static final int HEADER = 78;
    private static final int PANEL_HEIGHT = 330;
    private static final int PANEL_GAP = 26;
    private static final int PLOT_TOP = 40;        // below the panel's top: title and note
    private static final int PLOT_BOTTOM = 52;     // above the panel's bottom: tick labels and axis title

    private LatencyChart() {
    }

    /** The SVG document for one run, or two (A solid, B dashed). */
    public static String svg(String title, List<Run> runs) {
        if (runs.isEmpty() || runs.size() > 2) {
            throw new IllegalArgumentException("a chart shows one or two runs, not " + runs.size());
        }
        List<Panel> panels = new ArrayList<>();
        for (Panel p : PANELS) {
            if (!metricsOf(p, runs).isEmpty()) {
                panels.add(p);
            }
        }
        int height = HEADER + Math.max(1, panels.size()) * (PANEL_HEIGHT + PANEL_GAP);
        StringBuilder sb = new StringBuilder(32_768);
        sb.append("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        sb.append(String.format(Locale.ROOT, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                + "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\">%n", WIDTH, height,
                WIDTH, height));
        sb.append("<title>").append(esc(title)).append("</title>\n");
        sb.append("<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n");
        header(sb, title, runs);
        if (panels.isEmpty()) {
            text(sb, LEFT, HEADER + 40, "no latency recorded", "start", 14, "#666");
        }
        int top = HEADER;
        for (Panel p : panels) {
            panel(sb, p, runs, top);
            top += PANEL_HEIGHT + PANEL_GAP;
        }
        return sb.append("</svg>\n").toString();
    }

    private static void header(StringBuilder sb, String title, List<Run> runs) {
        text(sb, LEFT, 28, title, "start", 18, "#222");
        int y = 52;
        for (int r = 0; r < runs.size(); r++) {
            Run run = runs.get(r);
            String mode = run.summary().modeDescription();
            String label = run.label() + (mode.isEmpty() ? "" : " (" + mode + ")");
            if (runs.size() == 1) {
                text(sb, LEFT, y, label, "start", 12, "#444");
            } else {
                int x = LEFT + r * 440;
                line(sb, x, y - 4, x + 34, y - 4, "#444", 2, DASH[r], 1);
                text(sb, x + 42, y, (r == 0 ? "A: " : "B: ") + label, "start", 12, "#444");
            }
        }
        text(sb, LEFT, y + 16, "x: percentile, log scale of 1/(1-p); y: latency, log scale. A line ends at its max "
                + "(dot): N samples say nothing beyond the 1-1/N percentile.", "start", 11, "#777");
    }

    private static Set<String> metricsOf(Panel p, List<Run> runs) {
        Set<String> names = new LinkedHashSet<>();
        for (Run r : runs) {
            for (var e : r.summary().histograms().entrySet()) {
                if (p.metrics().test(e.getKey()) && e.getValue().getTotalCount() > 0) {
                    names.add(e.getKey());
                }
            }
        }
        List<String> sorted = new ArrayList<>(names);
        sorted.sort(p.kind().equals("sequence") ? (a, b) -> END_TO_END.indexOf(a) - END_TO_END.indexOf(b)
                : LatencySummary::metricOrder);
        return new LinkedHashSet<>(sorted);
    }

    /** One series: points in (x = log10(1/(1-p)), y = ns), as HdrHistogram's percentile iteration gives them. */
    private static List<double[]> points(Histogram h) {
        List<double[]> pts = new ArrayList<>();
        double lastX = 0;
        for (HistogramIterationValue v : h.percentiles(5)) {
            double p = v.getPercentileLevelIteratedTo();
            double x = p >= 100.0 ? lastX : Math.log10(100.0 / (100.0 - p));
            pts.add(new double[] {x, v.getValueIteratedTo()});
            lastX = x;
        }
        return pts;
    }

    private static void panel(StringBuilder sb, Panel p, List<Run> runs, int top) {
        Set<String> metrics = metricsOf(p, runs);
        double minNs = Double.MAX_VALUE;
        double maxNs = 1;
        long maxCount = 1;
        for (Run r : runs) {
            for (String m : metrics) {
                Histogram h = r.summary().histograms().get(m);
                if (h == null || h.getTotalCount() == 0) {
                    continue;
                }
                long lowest = h.getMinNonZeroValue();
                minNs = Math.min(minNs, lowest == Long.MAX_VALUE ? 1 : lowest);
                maxNs = Math.max(maxNs, h.getMaxValue());
                maxCount = Math.max(maxCount, h.getTotalCount());
            }
        }
        int yLo = (int) Math.floor(Math.log10(Math.max(1, minNs)));
        int yHi = Math.max(yLo + 1, (int) Math.ceil(Math.log10(Math.max(maxNs, 1)) - 1e-9));
        int xMax = Math.min(6, Math.max(4, (int) Math.ceil(Math.log10(maxCount) - 1e-9)));
        double plotTop = top + PLOT_TOP;
        double plotBottom = top + PANEL_HEIGHT - PLOT_BOTTOM;
        Scale s = new Scale(LEFT, PLOT_RIGHT, xMax, plotBottom, plotTop, yLo, yHi);

        sb.append(String.format(Locale.ROOT, "<g class=\"panel\" data-panel=\"%s\">%n", p.kind()));
        text(sb, LEFT, top + 14, p.title(), "start", 13, "#222");
        axes(sb, s);
        String note = panelNote(p, runs);
        if (!note.isEmpty()) {
            text(sb, LEFT, top + 30, note, "start", 11, "#a33");
        }

        int legendY = (int) plotTop + 6;
        int index = 0;
        for (String m : metrics) {
            String[] style = style(p, m, index++);
            for (int r = 0; r < runs.size(); r++) {
                Histogram h = runs.get(r).summary().histograms().get(m);
                if (h != null && h.getTotalCount() > 0) {
                    series(sb, p, m, r, h, style, s);
                }
            }
            legendEntry(sb, legendY, m, style, runs);
            legendY += 17;
        }
        sb.append("</g>\n");
    }

    private static String panelNote(Panel p, List<Run> runs) {
        for (Run r : runs) {
            if (p.kind().equals("hop") && !r.summary().crossHostHops().isEmpty()) {
                return "x-host hops compare two hosts' clocks: not meaningful";
            }
        }
        if (p.kind().equals("sequence")) {
            List<String> corrected = new ArrayList<>();
            List<String> not = new ArrayList<>();
            for (String m : metricsOf(p, runs)) {
                (runs.get(0).summary().info(m).correction().corrected() ? corrected : not).add(m);
            }
            return (corrected.isEmpty() ? "" : String.join(", ", corrected)
                    + ": corrected for coordinated omission (measured from each sequence's intended start)")
                    + (corrected.isEmpty() || not.isEmpty() ? "" : "; ") + (not.isEmpty() ? "" : String.join(", ", not) + ": not corrected");
        }
        return "per-frame times: not corrected for coordinated omission";
    }

    /** Colour, stroke width, opacity. */
    private static String[] style(Panel p, String metric, int index) {
        if (p.kind().equals("stage")) {
            Matcher m = STAGE_FRAME.matcher(metric);
            if (!m.matches()) {
                return new String[] {"#333333", "2", "1"};
            }
            String c = PALETTE[Integer.parseInt(m.group(1)) % PALETTE.length];
            return m.group(2).equals("compute") ? new String[] {c, "2.6", "1"} : new String[] {lighter(c), "1.4", "1"};
        }
        return new String[] {PALETTE[index % PALETTE.length], "2", "1"};
    }

    private static String lighter(String hex) {
        int rgb = Integer.parseInt(hex.substring(1), 16);
        int r = (rgb >> 16) & 0xff;
        int g = (rgb >> 8) & 0xff;
        int b = rgb & 0xff;
        return String.format(Locale.ROOT, "#%02x%02x%02x", r + (255 - r) * 45 / 100, g + (255 - g) * 45 / 100,
                b + (255 - b) * 45 / 100);
    }

    private static void series(StringBuilder sb, Panel p, String metric, int run, Histogram h, String[] style, Scale s) {
        StringBuilder pts = new StringBuilder();
        double lastPx = Double.NaN;
        double lastPy = Double.NaN;
        for (double[] pt : points(h)) {
            double px = s.x(pt[0]);
            double py = s.y(pt[1]);
            if (Math.abs(px - lastPx) < 0.05 && Math.abs(py - lastPy) < 0.05) {
                continue;
            }
            pts.append(pts.length() == 0 ? "" : " ").append(fmt(px)).append(',').append(fmt(py));
            lastPx = px;
            lastPy = py;
        }
        sb.append(String.format(Locale.ROOT, "<polyline class=\"series %s\" data-metric=\"%s\" data-run=\"%s\" fill=\"none\" "
                + "stroke=\"%s\" stroke-width=\"%s\" stroke-opacity=\"%s\" stroke-linejoin=\"round\"%s points=\"%s\"/>%n",
                p.kind(), esc(metric), run == 0 ? "A" : "B", style[0], style[1], style[2],
                DASH[run] == null ? "" : " stroke-dasharray=\"" + DASH[run] + "\"", pts));
        sb.append(String.format(Locale.ROOT, "<circle cx=\"%s\" cy=\"%s\" r=\"3\" fill=\"%s\"><title>%s %s max %s</title></circle>%n",
                fmt(lastPx), fmt(lastPy), style[0], esc(metric), run == 0 ? "A" : "B", esc(duration(h.getMaxValue()))));
    }

    private static void legendEntry(StringBuilder sb, int y, String metric, String[] style, List<Run> runs) {
        line(sb, LEGEND_X, y, LEGEND_X + 26, y, style[0], Double.parseDouble(style[1]), null, Double.parseDouble(style[2]));
        String label = metric;
        if (runs.size() == 1) {
            Histogram h = runs.get(0).summary().histograms().get(metric);
            label += "  p99 " + duration(h.getValueAtPercentile(99)) + "  n=" + h.getTotalCount();
        }
        text(sb, LEGEND_X + 32, y + 4, label, "start", 11, "#333");
    }

    private static void axes(StringBuilder sb, Scale s) {
        sb.append("<g class=\"axes\" stroke-width=\"1\">\n");
        for (int d = s.yLo; d <= s.yHi; d++) {
            double y = s.y(Math.pow(10, d));
            line(sb, s.left, y, s.right, y, "#d0d0d0", 1, null, 1);
            text(sb, s.left - 6, y + 4, duration((long) Math.pow(10, d)), "end", 11, "#444");
            if (d < s.yHi) {
                for (int k : new int[] {2, 5}) {
                    double ym = s.y(k * Math.pow(10, d));
                    line(sb, s.left, ym, s.right, ym, "#eeeeee", 1, null, 1);
                }
            }
        }
        String[] labels = {"0%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"};
        for (int d = 0; d <= s.xMax; d++) {
            double x = s.x(d);
            line(sb, x, s.top, x, s.bottom, "#d0d0d0", 1, null, 1);
            text(sb, x, s.bottom + 16, labels[d], "middle", 11, "#444");
        }
        double x50 = s.x(Math.log10(2));
        line(sb, x50, s.top, x50, s.bottom, "#eeeeee", 1, null, 1);
        text(sb, x50, s.bottom + 16, "50%", "middle", 11, "#444");
        sb.append(String.format(Locale.ROOT, "<rect x=\"%s\" y=\"%s\" width=\"%s\" height=\"%s\" fill=\"none\" stroke=\"#888\"/>%n",
                fmt(s.left), fmt(s.top), fmt(s.right - s.left), fmt(s.bottom - s.top)));
        text(sb, (s.left + s.right) / 2, s.bottom + 36, "percentile (log scale of 1/(1-p))", "middle", 12, "#222");
        double cy = (s.top + s.bottom) / 2;
        sb.append(String.format(Locale.ROOT, "<text x=\"%s\" y=\"%s\" text-anchor=\"middle\" font-size=\"12\" fill=\"#222\" "
                + "transform=\"rotate(-90 %s %s)\">latency (log scale)</text>%n", fmt(20), fmt(cy), fmt(20), fmt(cy)));
        sb.append("</g>\n");
    }

    /** "250 ns", "42 µs", "1.5 ms", "2 s": the unit that keeps the number short. */
    static String duration(long ns) {
        double v;
        String unit;
        if (ns < 1_000) {
            v = ns;
            unit = "ns";
        } else if (ns < 1_000_000) {
            v = ns / 1e3;
            unit = "µs";
        } else if (ns < 1_000_000_000) {
            v = ns / 1e6;
            unit = "ms";
        } else {
            v = ns / 1e9;
            unit = "s";
        }
        String n = v >= 100 || v == Math.rint(v) ? String.format(Locale.ROOT, "%.0f", v) : String.format(Locale.ROOT, "%.3g", v);
        return n + " " + unit;
    }

    /** Data to pixels: x = log10(1/(1-p)) over [0, xMax], y = log10(ns) over [yLo, yHi] decades. */
    private record Scale(double left, double right, int xMax, double bottom, double top, int yLo, int yHi) {
        double x(double decades) {
            return left + (right - left) * Math.min(decades, xMax) / xMax;
        }

        double y(double ns) {
            double d = Math.log10(Math.max(ns, Math.pow(10, yLo)));
            return bottom - (bottom - top) * (d - yLo) / (yHi - yLo);
        }
    }

    private static void line(StringBuilder sb, double x1, double y1, double x2, double y2, String color, double width,
                             String dash, double opacity) {
        sb.append(String.format(Locale.ROOT, "<line x1=\"%s\" y1=\"%s\" x2=\"%s\" y2=\"%s\" stroke=\"%s\" stroke-width=\"%s\"%s%s/>%n",
                fmt(x1), fmt(y1), fmt(x2), fmt(y2), color, fmt(width), dash == null ? "" : " stroke-dasharray=\"" + dash + "\"",
                opacity == 1 ? "" : " stroke-opacity=\"" + fmt(opacity) + "\""));
    }

    private static void text(StringBuilder sb, double x, double y, String s, String anchor, int size, String color) {
        sb.append(String.format(Locale.ROOT, "<text x=\"%s\" y=\"%s\" text-anchor=\"%s\" font-size=\"%d\" fill=\"%s\">%s</text>%n",
                fmt(x), fmt(y), anchor, size, color, esc(s)));
    }

    private static String fmt(double v) {
        String s = String.format(Locale.ROOT, "%.1f", v);
        return s.endsWith(".0") ? s.substring(0, s.length() - 2) : s;
    }

    /** XML text and attribute escaping. */
    static String esc(String s) {
        StringBuilder sb = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '&' -> sb.append("&amp;");
                case '<' -> sb.append("&lt;");
                case '>' -> sb.append("&gt;");
                case '"' -> sb.append("&quot;");
                default -> sb.append(c < 0x20 && c != '\t' ? ' ' : c);
            }
        }
        return sb.toString();
    }
}
