package io.tnsr.perf.gate;

import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.openjdk.jmh.annotations.Mode;

/**
 * One JMH measurement the gate makes: a benchmark method, its parameters, the mode, and how much longer than
 * the gate's default iteration time each iteration runs (for slow operations).
 *
 * @param benchmark      fully qualified benchmark method, e.g. {@code io.tnsr.perf.stage.HopBenchmark.roundTrip}
 * @param params         JMH parameters (the benchmark's others keep their first value)
 * @param mode           {@link Mode#AverageTime}: the figure is the median over iterations of the mean time per
 *                       operation; {@link Mode#SampleTime}: the median of all sampled operations (p0.50)
 * @param iterationScale iteration time = the gate's iteration time x this
 * @param forks          JMH forks; the figure is the fastest fork's. A fork's figure can land about 15% above the
 *                       others for the whole fork (seen once in five runs on the stage hop: where the JIT put the
 *                       code, which pages the buffers got), whatever the mode; noise only ever adds time, so the
 *                       fastest of a few forks is the figure the code itself sets, and a regression in the code
 *                       still raises every fork
 */
public record Probe(String benchmark, Map<String, String> params, Mode mode, int iterationScale, int forks) {

    public Probe {
        params = new TreeMap<>(params);
        if (iterationScale < 1 || forks < 1) {
            throw new IllegalArgumentException("iterationScale and forks must be >= 1: " + iterationScale + ", " + forks);
        }
    }

    public Probe(String benchmark, Map<String, String> params, Mode mode, int iterationScale) {
        this(benchmark, params, mode, iterationScale, 1);
    }

    public static Probe avgt(String benchmark, String... keyValues) {
        return new Probe(benchmark, map(keyValues), Mode.AverageTime, 1);
    }

    public static Probe sample(String benchmark, String... keyValues) {
        return new Probe(benchmark, map(keyValues), Mode.SampleTime, 1);
    }

    public Probe scaled(int scale) {
        return new Probe(benchmark, params, mode, scale, forks);
    }

    /** The same probe measured in {@code n} forks, keeping the fastest fork's figure. */
    public Probe bestOfForks(int n) {
        return new Probe(benchmark, params, mode, iterationScale, n);
    }

    private static Map<String, String> map(String... kv) {
        if (kv.length % 2 != 0) {
            throw new IllegalArgumentException("parameters come in key, value pairs");
        }
        Map<String, String> m = new TreeMap<>();
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    /** Class.method{k=v,...}/mode: short and unique, for logs and the results file. */
    public String key() {
        String b = benchmark.substring(benchmark.lastIndexOf('.', benchmark.lastIndexOf('.') - 1) + 1);
        String p = params.isEmpty() ? "" : params.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                .collect(Collectors.joining(",", "{", "}"));
        return b + p + "/" + mode.shortLabel() + (forks > 1 ? "/best-of-" + forks : "");
    }

    @Override
    public String toString() {
        return key();
    }
}
