package io.tnsr.perf.engine;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * llama.cpp's own figures for one weight type, read from the JSON its benchmark tools print, so that
 * {@code engine-bench --llama-cpp TYPE=FILE} compares against llama.cpp measured on the same machine and files,
 * in the same minutes, instead of fixed figures measured on another host. Made with one thread, on the model file
 * engine-bench uses ({@code .build/models/synthetic-<preset>-<type>-s42.gguf}):
 * <pre>
 *   llama-bench -m MODEL -t 1 -p 128 -n 128 -o jsonl                    &gt;  FILE
 *   llama-batched-bench -m MODEL -t 1 -tb 1 -c 4096 -npp 16 -ntg 64 -npl 8,16 --output-format jsonl &gt;&gt; FILE
 * </pre>
 * Each record becomes one workload, keyed as {@link EngineBench} names its rows:
 * <pre>
 *   llama-bench    n_prompt 0, n_gen N, n_depth 0  -&gt; "decode1"        (avg_ts)
 *   llama-bench    n_prompt 0, n_gen N, n_depth D  -&gt; "decodeAt" + D   (avg_ts)
 *   llama-bench    n_prompt P, n_gen 0, n_depth 0  -&gt; "prefill" + P    (avg_ts)
 *   batched-bench  pl B                            -&gt; "decode" + B     (speed_tg)
 * </pre>
 * Several records of one workload (repeated runs appended to the file) give a range, as the fixed "71-76".
 * The file holds JSON lines ({@code -o jsonl}) or one JSON array ({@code -o json}); lines that are not JSON objects
 * (a log line that reached stdout) are skipped. Refused, naming the file and line: a line that starts like JSON
 * but does not parse, a record run with more than one thread (engine-bench measures one), and a file with no
 * record of either tool.
 */
public final class LlamaCppFigures {

    /** tokens/s of one workload over the records that measured it. */
    public record Range(double low, double high) {
        public Range {
            if (!(low > 0) || !(high >= low) || Double.isInfinite(high)) {
                throw new IllegalArgumentException("not a range of tokens/s: " + low + ".." + high);
            }
        }

        public double middle() {
            return (low + high) / 2;
        }

        Range with(double value) {
            return new Range(Math.min(low, value), Math.max(high, value));
        }

        @Override
        public String toString() {
            return low == high ? String.format(Locale.ROOT, "%.0f", low) : String.format(Locale.ROOT, "%.0f-%.0f", low, high);
        }
    }

    /** A file that cannot be used as llama.cpp's figures: what is wrong and where. */
    public static final class InvalidFiguresException extends Exception {
        InvalidFiguresException(String message) {
            super(message);
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();

    private LlamaCppFigures() {
    }

    /** Workload key -> range of tokens/s, from one file of llama-bench / llama-batched-bench JSON run on one thread. */
    static Map<String, Range> read(Path file) throws InvalidFiguresException {
        return read(file, 1);
    }

    /**
     * Workload key -> range of tokens/s, from one file of llama-bench / llama-batched-bench JSON run on {@code threads}
     * threads (engine-bench --threads), every record checked for it.
     */
    static Map<String, Range> read(Path file, int threads) throws InvalidFiguresException {
        Map<String, Range> figures = new TreeMap<>();
        for (Located r : records(file)) {
            add(r.node(), figures, r.where(), threads);
        }
        if (figures.isEmpty()) {
            throw new InvalidFiguresException(file + " has no llama-bench or llama-batched-bench record (make it with"
                    + " `llama-bench -t 1 ... -o jsonl` and `llama-batched-bench -t 1 -tb 1 ... --output-format jsonl`)");
        }
        return Collections.unmodifiableMap(figures);
    }

    /** A llama-batched-bench workload: {@code sequences} decoding at once ({@code pl}) on {@code threads} threads. */
    public record Batched(long sequences, long threads) {
        @Override
        public String toString() {
            return sequences + " sequences on " + threads + " thread" + (threads == 1 ? "" : "s");
        }
    }

    /**
     * llama-batched-bench's decode figures ({@code speed_tg}) by sequences and generation threads ({@code pl},
     * {@code n_threads}), any thread count, for pipeline-bench, which compares a pipeline with llama.cpp running as
     * many threads as the pipeline has cores. llama-bench's records are skipped; a file with no llama-batched-bench
     * record is refused, as are records that do not parse.
     */
    public static Map<Batched, Range> readBatched(Path file) throws InvalidFiguresException {
        Map<Batched, Range> figures = new java.util.LinkedHashMap<>();
        for (Located r : records(file)) {
            JsonNode n = r.node();
            if (!n.isObject() || !n.has("pl")) {
                continue;
            }
            Batched key = new Batched(integer(n, "pl", r.where()), integer(n, "n_threads", r.where()));
            double tokensPerSecond = number(n, "speed_tg", r.where());
            if (!(tokensPerSecond > 0) || Double.isInfinite(tokensPerSecond) || key.sequences() < 1 || key.threads() < 1) {
                throw new InvalidFiguresException(r.where() + ": " + key + " at " + tokensPerSecond + " tokens/s is not a measurement");
            }
            figures.merge(key, new Range(tokensPerSecond, tokensPerSecond), (before, one) -> before.with(tokensPerSecond));
        }
        if (figures.isEmpty()) {
            throw new InvalidFiguresException(file + " has no llama-batched-bench record (make it with"
                    + " `llama-batched-bench -m MODEL -t T -tb T -c 4096 -npp 16 -ntg 64 -npl 1,8,16 --output-format jsonl`)");
        }
        return Collections.unmodifiableMap(figures);
    }

    /** One JSON record of a figures file and where it is (file and line, or file and record). */
    private record Located(JsonNode node, String where) {
    }

    /**
     * The file's records: the elements of one JSON array ({@code -o json}), or its lines that start with
     * {@code {} ({@code -o jsonl}; other lines, such as a log line that reached stdout, are skipped).
     */
    private static List<Located> records(Path file) throws InvalidFiguresException {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new InvalidFiguresException("cannot read llama.cpp's figures from " + file + ": " + e);
        }
        List<Located> records = new java.util.ArrayList<>();
        if (text.stripLeading().startsWith("[")) { // llama-bench -o json: one array
            JsonNode array = parse(text, file, "");
            for (int i = 0; i < array.size(); i++) {
                records.add(new Located(array.get(i), file + ", record " + (i + 1)));
            }
        } else {
            List<String> lines = text.lines().toList();
            for (int i = 0; i < lines.size(); i++) {
                String line = lines.get(i).strip();
                if (line.startsWith("{")) {
                    records.add(new Located(parse(line, file, ":" + (i + 1)), file + ":" + (i + 1)));
                }
            }
        }
        return records;
    }

    private static JsonNode parse(String json, Path file, String line) throws InvalidFiguresException {
        try {
            return JSON.readTree(json);
        } catch (JsonProcessingException e) {
            throw new InvalidFiguresException(file + line + " is not valid JSON: "
                    + (line.isEmpty() ? Jackson.problem(e) : Jackson.problemInLine(e)));
        }
    }

    private static void add(JsonNode r, Map<String, Range> figures, String where, int threads) throws InvalidFiguresException {
        if (!r.isObject()) {
            throw new InvalidFiguresException(where + ": expected a JSON object, found " + r.getNodeType());
        }
        String key;
        double tokensPerSecond;
        if (r.has("pl")) { // llama-batched-bench
            key = "decode" + integer(r, "pl", where);
            tokensPerSecond = number(r, "speed_tg", where);
            sameThreads(r, "n_threads_batch", where, threads);
        } else if (r.has("n_gen")) { // llama-bench
            long prompt = integer(r, "n_prompt", where);
            long gen = integer(r, "n_gen", where);
            long depth = r.has("n_depth") ? integer(r, "n_depth", where) : 0;
            if (prompt == 0 && gen > 0) {
                key = depth == 0 ? "decode1" : "decodeAt" + depth;
            } else if (gen == 0 && prompt > 0 && depth == 0) {
                key = "prefill" + prompt;
            } else {
                return; // a combined test (-pg) or a prefill at depth: no engine-bench row measures it
            }
            tokensPerSecond = number(r, "avg_ts", where);
        } else {
            throw new InvalidFiguresException(where + ": neither a llama-bench record (n_gen) nor a llama-batched-bench one (pl)");
        }
        sameThreads(r, "n_threads", where, threads);
        if (!(tokensPerSecond > 0) || Double.isInfinite(tokensPerSecond)) {
            throw new InvalidFiguresException(where + ": tokens/s of " + key + " is " + tokensPerSecond);
        }
        Range before = figures.get(key);
        figures.put(key, before == null ? new Range(tokensPerSecond, tokensPerSecond) : before.with(tokensPerSecond));
    }

    private static void sameThreads(JsonNode r, String field, String where, int threads) throws InvalidFiguresException {
        if (r.has(field) && integer(r, field, where) != threads) {
            String t = String.valueOf(threads);
            throw new InvalidFiguresException(where + ": llama.cpp ran with " + r.get(field).asText() + " threads ("
                    + field + "); engine-bench measures " + (threads == 1 ? "one compute thread" : t + " threads (--threads " + t + ")")
                    + ": run it with -t " + t + (field.endsWith("batch") ? " -tb " + t : ""));
        }
    }

    private static long integer(JsonNode r, String field, String where) throws InvalidFiguresException {
        JsonNode v = r.get(field);
        if (v == null || !v.canConvertToLong() || !v.isIntegralNumber()) {
            throw new InvalidFiguresException(where + ": field " + field + " is " + (v == null ? "missing" : v + ", not an integer"));
        }
        return v.asLong();
    }

    private static double number(JsonNode r, String field, String where) throws InvalidFiguresException {
        JsonNode v = r.get(field);
        if (v == null || !v.isNumber()) {
            throw new InvalidFiguresException(where + ": field " + field + " is " + (v == null ? "missing" : v + ", not a number"));
        }
        return v.asDouble();
    }
}
