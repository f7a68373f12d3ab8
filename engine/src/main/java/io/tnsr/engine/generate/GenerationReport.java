package io.tnsr.engine.generate;

import io.tnsr.engine.util.Jackson;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntFunction;

/**
 * The JSON object {@code tools/generate --json} and {@code tools/run-pipeline --json} print: the same shape
 * for both, a contract users' scripts rely on. Fields: {@code model}, {@code stages}, {@code sequences[]}
 * ({@code prompt}, {@code prompt_tokens}, {@code generated_tokens}, {@code text}, {@code stopped_by}, and
 * {@code error} when it failed), {@code tokens_per_second}; callers add more with {@link #put}.
 */
public final class GenerationReport {
    private final Map<String, Object> root = new LinkedHashMap<>();

    public GenerationReport(String model, int stages, List<SequenceState> seqs, IntFunction<String> text,
                            double tokensPerSecond) {
        root.put("model", model);
        root.put("stages", stages);
        List<Object> list = new ArrayList<>();
        for (SequenceState s : seqs) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("prompt", s.prompt());
            m.put("prompt_tokens", s.promptTokens());
            m.put("generated_tokens", s.generatedTokens());
            m.put("text", text.apply(s.index()));
            m.put("stopped_by", s.stoppedBy() == null ? "limit" : s.stoppedBy().json());
            if (s.error() != null) {
                m.put("error", s.error());
            }
            m.put("time_to_first_token_ms", round(s.timeToFirstTokenNanos() / 1e6));
            list.add(m);
        }
        root.put("sequences", list);
        root.put("tokens_per_second", round(tokensPerSecond));
    }

    public GenerationReport put(String key, Object value) {
        root.put(key, value instanceof Double d ? round(d) : value);
        return this;
    }

    public static double round(double v) {
        return Math.round(v * 1000.0) / 1000.0;
    }

    /** One line of JSON. */
    public String toJson() {
        return Jackson.write(root);
    }
}
