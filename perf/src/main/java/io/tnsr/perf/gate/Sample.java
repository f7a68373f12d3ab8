package io.tnsr.perf.gate;

/**
 * What one run of a {@link Probe} in one build measured.
 *
 * @param time            nanoseconds per operation: the median over measured iterations of each iteration's median
 *                        (JMH sample mode) or mean (average-time mode); per decode token for a pipeline
 * @param p99             the median over measured iterations of each iteration's 99th percentile (sample mode), else NaN
 * @param alloc           bytes allocated per operation by all threads of the JVM ({@code -prof gc}:
 *                        {@code gc.alloc.rate.norm}), the least over the measured iterations (a hot path's allocation shows
 *                        in every one, a background thread's periodic one in some); NaN when not measured
 * @param opsPerIteration operations in one measured iteration (the background allocation allowance is spread
 *                        over them), NaN when not known
 * @param iterations      each measured iteration's figure (as {@code time}), in order: iteration i of one build was
 *                        measured next to iteration i of the other ({@link Turns}); empty for a pipeline
 * @param iterationsP99   each measured iteration's 99th percentile (sample mode), else empty
 * @param error           why there is no figure (the process failed, timed out, or the build lacks the
 *                        benchmark), else null
 */
public record Sample(double time, double p99, double alloc, double opsPerIteration, double[] iterations,
                     double[] iterationsP99, String error) {

    public static Sample failed(String error) {
        return new Sample(Double.NaN, Double.NaN, Double.NaN, Double.NaN, new double[0], new double[0], error);
    }

    /** A figure without iterations (a pipeline run, or a test's made-up sample). */
    public static Sample of(double time, double p99, double alloc, double opsPerIteration) {
        return new Sample(time, p99, alloc, opsPerIteration, new double[0], new double[0], null);
    }

    public boolean ok() {
        return error == null;
    }
}
