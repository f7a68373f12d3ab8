package io.tnsr.engine.loadgen;

import io.tnsr.engine.util.Jackson;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The body of each benchmark request: always streamed with {@code stream_options.include_usage}, so that the server
 * reports the tokens it really read and wrote.
 *
 * @param model       the model's id, as {@code /v1/models} lists it
 * @param prompts     the prompt of each request
 * @param maxTokens   {@code max_tokens}
 * @param temperature {@code temperature}, or null to leave the server's default
 * @param seed        request i is sent {@code seed + i}; null sends no seed
 * @param ignoreEos   sends {@code "ignore_eos": true} (llama-server then generates exactly max_tokens; servers that do
 *                    not know the field ignore it)
 */
public record CompletionRequests(String model, PromptSource prompts, int maxTokens, Double temperature, Long seed,
                                 boolean ignoreEos) {

    /** The JSON body of request {@code index} (0 = the first request, warmup included). */
    public String body(long index) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("model", model);
        m.put("prompt", prompts.prompt(index));
        m.put("max_tokens", maxTokens);
        if (temperature != null) {
            m.put("temperature", temperature);
        }
        if (seed != null) {
            m.put("seed", seed + index);
        }
        if (ignoreEos) {
            m.put("ignore_eos", true);
        }
        m.put("stream", true);
        m.put("stream_options", Map.of("include_usage", true));
        return Jackson.write(m);
    }
}
