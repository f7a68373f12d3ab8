package io.tnsr.perf.gate;

import io.tnsr.engine.util.Json;
import io.tnsr.engine.util.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * {@code perf/baseline.json}: for each metric its value on the reference machine and the tolerance the gate
 * allows, plus a few facts about where and how it was measured. Plain JSON, one metric per line, so that a
 * {@code --update-baseline} shows up in review as a readable diff.
 *
 * <pre>
 * {
 *   "format": 1,
 *   "machine": "...", "measured": "...", "calibration": "...",
 *   "background_alloc_bytes_per_iteration": 16384,
 *   "metrics": {
 *     "time.kernel.f32.4096x4096.n1": {"kind": "ratio", "value": 0.7512, "tolerance": 0.25, "spread": 0.081},
 *     "alloc.codec.decode16k": {"kind": "alloc", "value": 0.0001, "tolerance": 1},
 *     ...
 *   }
 * }
 * </pre>
 * ratio: value = time per op / the reference's time per op; regression when now > value x (1 + tolerance).
 * alloc: value = B/op when measured (informative, 2 decimals); failure when now > tolerance + background / operations
 * per iteration.
 * info: value = ns per op, never judged. spread (optional) = (max - min) / median over the calibration runs.
 */
public record Baseline(Map<String, Entry> metrics, double backgroundAllocBytesPerIteration, Map<String, String> notes) {

    /**
     * Allowance for what JMH and the JVM allocate in each measured iteration besides the benchmark (about 6 KB
     * per iteration here, whatever its length: gc.alloc.rate.norm counts every thread), spread over the
     * iteration's operations.
     */
    public static final double DEFAULT_BACKGROUND = 16 * 1024;

    /** One metric's line. {@code spread} is NaN when not calibrated. */
    public record Entry(Metric.Kind kind, double value, double tolerance, double spread) {
    }

    public static Baseline read(Path path) throws IOException {
        Object parsed = JsonParser.parse(Files.readString(path, StandardCharsets.UTF_8));
        if (!(parsed instanceof Map<?, ?> root) || !(root.get("metrics") instanceof Map<?, ?> ms)) {
            throw new IOException(path + ": not a perf baseline (expected an object with \"metrics\")");
        }
        Map<String, Entry> metrics = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : ms.entrySet()) {
            if (!(e.getValue() instanceof Map<?, ?> m)) {
                throw new IOException(path + ": metric " + e.getKey() + " is not an object");
            }
            metrics.put((String) e.getKey(), new Entry(Metric.Kind.valueOf(((String) m.get("kind")).toUpperCase(Locale.ROOT)),
                    num(m.get("value")), m.containsKey("tolerance") ? num(m.get("tolerance")) : Double.NaN,
                    m.containsKey("spread") ? num(m.get("spread")) : Double.NaN));
        }
        Map<String, String> notes = new LinkedHashMap<>();
        for (Map.Entry<?, ?> e : root.entrySet()) {
            if (e.getValue() instanceof String s) {
                notes.put((String) e.getKey(), s);
            }
        }
        double bg = root.get("background_alloc_bytes_per_iteration") instanceof Number n ? n.doubleValue() : DEFAULT_BACKGROUND;
        return new Baseline(metrics, bg, notes);
    }

    private static double num(Object o) {
        return o == null ? Double.NaN : ((Number) o).doubleValue();
    }

    public void write(Path path) throws IOException {
        Files.writeString(path, toJson(), StandardCharsets.UTF_8);
    }

    public String toJson() {
        StringBuilder sb = new StringBuilder("{\n  \"format\": 1,\n");
        for (Map.Entry<String, String> n : notes.entrySet()) {
            sb.append("  ").append(Json.quote(n.getKey())).append(": ").append(Json.quote(n.getValue())).append(",\n");
        }
        sb.append("  \"background_alloc_bytes_per_iteration\": ").append(fmt(backgroundAllocBytesPerIteration)).append(",\n");
        sb.append("  \"metrics\": {\n");
        int i = 0;
        for (Map.Entry<String, Entry> e : metrics.entrySet()) {
            Entry m = e.getValue();
            sb.append("    ").append(Json.quote(e.getKey())).append(": {\"kind\": \"")
                    .append(m.kind().name().toLowerCase(Locale.ROOT)).append("\", \"value\": ").append(fmt(m.value()));
            if (!Double.isNaN(m.tolerance())) {
                sb.append(", \"tolerance\": ").append(fmt(m.tolerance()));
            }
            if (!Double.isNaN(m.spread())) {
                sb.append(", \"spread\": ").append(fmt(m.spread()));
            }
            sb.append('}').append(++i < metrics.size() ? ",\n" : "\n");
        }
        return sb.append("  }\n}\n").toString();
    }

    /** Four significant digits, no exponent for ordinary magnitudes: small diffs, exact enough. */
    static String fmt(double v) {
        if (Double.isNaN(v) || Double.isInfinite(v)) {
            throw new IllegalArgumentException("not a finite number: " + v);
        }
        if (v == Math.rint(v) && Math.abs(v) < 1e15) {
            return Long.toString((long) v);
        }
        String s = new java.math.BigDecimal(v).round(new java.math.MathContext(4)).stripTrailingZeros().toPlainString();
        return s;
    }
}
