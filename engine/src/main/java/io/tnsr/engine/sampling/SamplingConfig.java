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

    /** @throws InvalidSamplingException a value out of its range, naming the parameter */
    public SamplingConfig {
        check(temperature, topK, topP);
    }

    /**
     * Settings given as doubles (a JSON request, say), checked before they are narrowed to floats, so that a value
     * beyond float's range is reported as written rather than as infinity.
     *
     * @throws InvalidSamplingException a value out of its range, naming the parameter
     */
    public static SamplingConfig of(double temperature, int topK, double topP, long seed) {
        check(temperature, topK, topP);
        return new SamplingConfig((float) temperature, topK, (float) topP, seed);
    }

    private static void check(double temperature, int topK, double topP) {
        if (!(temperature >= 0 && temperature <= Float.MAX_VALUE)) {
            throw new InvalidSamplingException("temperature", "must be a finite number >= 0, got " + temperature);
        }
        if (topK < 0) {
            throw new InvalidSamplingException("top_k", "must be >= 0 (0 = off), got " + topK);
        }
        if (!(topP > 0 && topP <= 1)) {
            throw new InvalidSamplingException("top_p", "must be in (0, 1], got " + topP);
        }
    }

    public boolean greedy() {
        return temperature == 0f;
    }

    /**
     * A sampling setting out of its range. {@link #parameter()} is the setting's name as requests and config files
     * spell it ({@code temperature}, {@code top_k}, {@code top_p}), so that each front end can name it its own way:
     * {@code 'top_p'} in an HTTP error, {@code --top-p} on a command line.
     */
    public static final class InvalidSamplingException extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;
        private final String parameter;
        private final String problem;

        InvalidSamplingException(String parameter, String problem) {
            super(parameter + " " + problem);
            this.parameter = parameter;
            this.problem = problem;
        }

        /** {@code temperature}, {@code top_k} or {@code top_p}. */
        public String parameter() {
            return parameter;
        }

        /** What is wrong with the value, without the parameter's name: "must be in (0, 1], got 1.5". */
        public String problem() {
            return problem;
        }

        /** The parameter as a command-line option spells it: {@code --top-p}. */
        public String option() {
            return "--" + parameter.replace('_', '-');
        }
    }
}
