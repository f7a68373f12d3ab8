package io.tnsr.engine.cli;

/**
 * The value of a thread-count option ({@code --threads}, {@code --threads-per-stage}): a number of threads from 1 to
 * {@value #MAX}, or {@code auto}, returned as 0, which the caller turns into this machine's CPUs (shared among its
 * stages, for a pipeline: {@link io.tnsr.engine.pipeline.PipelineConfig#threadsPerStage(int)}).
 */
final class ThreadCount {
    /** Most threads an option takes (the config key {@code threads_per_stage}'s bound too). */
    static final int MAX = 256;

    private ThreadCount() {
    }

    /** {@code value} of {@code option}: 1 to {@value #MAX}, or 0 for auto (also given as 0). */
    static int parse(String option, String value) {
        String v = value.strip();
        if (v.equalsIgnoreCase("auto")) {
            return 0;
        }
        try {
            int n = Integer.parseInt(v);
            if (n >= 0 && n <= MAX) {
                return n;
            }
        } catch (NumberFormatException e) {
            // the message below
        }
        throw new IllegalArgumentException(option + ": must be auto (or 0, the same) or a number of threads from 1 to " + MAX
                + ", got '" + value + "'");
    }

    /** The CPUs this process may use, at most {@value #MAX}: what auto gives one process. */
    static int cpus() {
        return Math.min(MAX, Runtime.getRuntime().availableProcessors());
    }
}
