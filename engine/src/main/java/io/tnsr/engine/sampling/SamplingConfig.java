package io.tnsr.engine.sampling;

/**
 * How the next token is chosen from the logits.
 *
 * @param temperature 0 for greedy (argmax); otherwise logits are divided by it before the softmax
 * @param topK        keep only the K most likely tokens (0 = no limit)
 * @param topP        keep the smallest set of most likely tokens whose probability reaches P (1 = no limit)
 * @param seed        seed of the random choices; each sequence derives its own stream from it, so results do
 *                    not depend on how sequences were batched or split across stages
 */
public record SamplingConfig(float temperature, int topK, float topP, long seed) {

    public static final SamplingConfig GREEDY = new SamplingConfig(0f, 0, 1f, 0L);

    public SamplingConfig {
        if (!(temperature >= 0f) || Float.isInfinite(temperature)) {
            throw new IllegalArgumentException("temperature must be a finite number >= 0, got " + temperature);
        }
        if (topK < 0) {
            throw new IllegalArgumentException("top-k must be >= 0 (0 = off), got " + topK);
        }
        if (!(topP > 0f && topP <= 1f)) {
            throw new IllegalArgumentException("top-p must be in (0, 1], got " + topP);
        }
    }

    public boolean greedy() {
        return temperature == 0f;
    }
}
