package io.tnsr.perf.gate;

import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import org.openjdk.jmh.annotations.Mode;

/**
 * One measurement the gate makes in each build: a process started from that build's own launchers, whose
 * result becomes one {@link Sample}. Both kinds call only what a build offers its users (JMH's command line
 * through {@code tools/jmh}, {@code tools/pipeline-bench --json}), so the reference build needs nothing of the
 * gate's own code.
 */
public sealed interface Probe permits Probe.Jmh, Probe.Pipeline {

    /** Short and unique, for the progress lines, logs and the results file. */
    String key();

    /**
     * Rounds before a compared metric may pass: one for a JMH probe (each round runs several forks of each build,
     * iterations in turns), two for a pipeline (one run of each build per round).
     */
    int minRounds();

    /**
     * One JMH fork of a benchmark method.
     *
     * @param benchmark      fully qualified benchmark method, e.g. {@code io.tnsr.perf.stage.HopBenchmark.roundTrip}
     * @param params         JMH parameters (the benchmark's others keep their first value)
     * @param mode           {@link Mode#AverageTime}: the sample's time is the median over iterations of the mean
     *                       time per operation; {@link Mode#SampleTime}: the median (and p99) of all sampled
     *                       operations, so a call the scheduler interrupted does not move it
     * @param iterationScale iteration time = the gate's iteration time x this (for operations of many milliseconds)
     * @param forks          forks of each build in one round, when compared (their fastest counts)
     */
    record Jmh(String benchmark, Map<String, String> params, Mode mode, int iterationScale, int forks) implements Probe {
        /** Forks of each build per round unless a probe asks for more. */
        public static final int FORKS = 2;

        public Jmh {
            params = new TreeMap<>(params);
            if (iterationScale < 1 || forks < 1) {
                throw new IllegalArgumentException("iterationScale and forks must be >= 1: " + iterationScale + ", " + forks);
            }
        }

        public static Jmh avgt(String benchmark, String... keyValues) {
            return new Jmh(benchmark, map(keyValues), Mode.AverageTime, 1, FORKS);
        }

        public static Jmh sample(String benchmark, String... keyValues) {
            return new Jmh(benchmark, map(keyValues), Mode.SampleTime, 1, FORKS);
        }

        public Jmh scaled(int scale) {
            return new Jmh(benchmark, params, mode, scale, forks);
        }

        /** The same probe with {@code n} forks of each build per round. */
        public Jmh forks(int n) {
            return new Jmh(benchmark, params, mode, iterationScale, n);
        }

        /** The same measurement of another benchmark method (an injected variant), {@code drop} parameters removed. */
        public Jmh of(String otherBenchmark, java.util.Set<String> drop) {
            Map<String, String> p = new TreeMap<>(params);
            p.keySet().removeAll(drop);
            return new Jmh(otherBenchmark, p, mode, iterationScale, forks);
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

        @Override
        public int minRounds() {
            return 1;
        }

        /** Class.method{k=v,...}/mode. */
        @Override
        public String key() {
            String b = benchmark.substring(benchmark.lastIndexOf('.', benchmark.lastIndexOf('.') - 1) + 1);
            String p = params.isEmpty() ? "" : params.entrySet().stream().map(e -> e.getKey() + "=" + e.getValue())
                    .collect(Collectors.joining(",", "{", "}"));
            return b + p + "/" + mode.shortLabel();
        }

        @Override
        public String toString() {
            return key();
        }
    }

    /**
     * One run of {@code tools/pipeline-bench --scenarios LAYOUT --type TYPE --repeats 1 --json}: real stage processes
     * on the synthetic stories110M-shape model; the sample's time is nanoseconds per decode token (1e9 / tokens/s).
     *
     * @param layout SxMxB: S stages, M micro-batches of B sequences
     * @param type   the model's weight type
     */
    record Pipeline(String layout, String type) implements Probe {
        @Override
        public int minRounds() {
            return 2;
        }

        @Override
        public String key() {
            return "pipeline-bench{" + layout + "," + type + "}";
        }

        @Override
        public String toString() {
            return key();
        }
    }
}
