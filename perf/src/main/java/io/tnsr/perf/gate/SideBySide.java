package io.tnsr.perf.gate;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Measures the gate's probes in the reference build and the tree under test (and, for the self-test, the injected
 * variants) side by side. A JMH probe runs one fork per contender at once, the forks taking turns iteration by
 * iteration ({@link ForkRunner#together}); a pipeline probe runs one contender after the other, the order reversed
 * every other round. A probe that a compared metric uses gets {@link Probe#minPairs()} rounds, and more, up to
 * {@link GateCheck#MAX_PAIRS}, while some round is beyond a limit ({@link GateCheck#undecided}); a probe only
 * allocation is judged on runs once, in the tree under test alone.
 *
 * <pre>
 *   for each probe:
 *     for round in 0, 1, ...:
 *       run every contender (JMH: together, in turns; pipeline: in order, reversed on odd rounds)
 *       stop when no metric of the probe is undecided
 * </pre>
 */
public final class SideBySide {
    /** Names of the two builds in {@link Measurements}. */
    public static final String REFERENCE = "reference";
    public static final String TREE = "tree";

    /** One thing measured in a round: a build and the probe run there. */
    record Contender(String name, ForkRunner.Build build, Probe probe) {
    }

    /** Every sample, by the gate's probe, then by contender name, in measuring order. */
    public record Measurements(Map<Probe, Map<String, List<Sample>>> samples) {
        public List<Sample> of(Probe probe, String contender) {
            return samples.getOrDefault(probe, Map.of()).getOrDefault(contender, List.of());
        }
    }

    private final ForkRunner runner;
    private final PrintStream out;

    public SideBySide(ForkRunner runner, PrintStream out) {
        this.runner = runner;
        this.out = out;
    }

    /**
     * @param reference  the reference build, or null to measure the tree alone (allocation only)
     * @param injections self-test variants, each measured in {@code tree} beside its expected metric's probe
     */
    public Measurements measure(List<Metric> metrics, ForkRunner.Build reference, ForkRunner.Build tree,
                                List<GateSuite.Injection> injections) {
        Map<Probe, Map<String, List<Sample>>> all = new LinkedHashMap<>();
        List<Probe> probes = GateSuite.probes(metrics);
        if (reference == null) {
            probes = probes.stream().filter(p -> metrics.stream().anyMatch(m -> m.probe().equals(p) && !m.kind().compared())).toList();
        }
        long t0 = System.nanoTime();
        int n = 0;
        for (Probe p : probes) {
            n++;
            List<Metric> compared = reference == null ? List.of()
                    : metrics.stream().filter(m -> m.probe().equals(p) && m.kind().compared()).toList();
            List<Contender> contenders = new ArrayList<>();
            if (!compared.isEmpty()) {
                contenders.add(new Contender(REFERENCE, reference, p));
            }
            contenders.add(new Contender(TREE, tree, p));
            for (GateSuite.Injection inj : injections) {
                metrics.stream().filter(m -> m.name().equals(inj.expected()) && m.probe().equals(p)).findFirst()
                        .ifPresent(m -> contenders.add(new Contender(inj.name(), tree, inj.variant(m))));
            }
            Map<String, List<Sample>> byName = new LinkedHashMap<>();
            for (Contender c : contenders) {
                byName.put(c.name(), new ArrayList<>());
            }
            all.put(p, byName);
            for (int round = 0; ; round++) {
                long s = System.nanoTime();
                List<Contender> order = new ArrayList<>(contenders);
                if (round % 2 == 1) {
                    Collections.reverse(order);
                }
                if (p instanceof Probe.Jmh) {
                    List<ForkRunner.Fork> forks = order.stream()
                            .map(c -> new ForkRunner.Fork(c.name(), c.build(), (Probe.Jmh) c.probe())).toList();
                    List<Sample> samples = runner.together(forks);
                    for (int i = 0; i < order.size(); i++) {
                        byName.get(order.get(i).name()).add(samples.get(i));
                    }
                } else {
                    for (Contender c : order) {
                        byName.get(c.name()).add(runner.pipeline(c.build(), (Probe.Pipeline) c.probe()));
                    }
                }
                out.printf(Locale.ROOT, "[%2d/%d] %-58s %s (%.0f s)%n", n, probes.size(), round == 0 ? p.key() : "",
                        line(contenders, byName, round), (System.nanoTime() - s) / 1e9);
                if (compared.isEmpty() || !undecided(compared, contenders, byName)) {
                    break;
                }
            }
        }
        out.printf(Locale.ROOT, "measured %d probes in %.0f s%n", probes.size(), (System.nanoTime() - t0) / 1e9);
        return new Measurements(all);
    }

    /** Whether any compared metric of the probe, for the tree or a variant, needs another round. */
    private static boolean undecided(List<Metric> compared, List<Contender> contenders, Map<String, List<Sample>> byName) {
        List<Sample> ref = byName.get(REFERENCE);
        for (Contender c : contenders) {
            if (c.name().equals(REFERENCE)) {
                continue;
            }
            for (Metric m : compared) {
                if (GateCheck.undecided(m, ref, byName.get(c.name()))) {
                    return true;
                }
            }
        }
        return false;
    }

    /** "reference 26.8 us | tree 26.9 us 0.00 B/op x1.004 | kernel-2x 53.1 us x1.98" for one round. */
    private static String line(List<Contender> contenders, Map<String, List<Sample>> byName, int round) {
        StringBuilder sb = new StringBuilder();
        List<Sample> ref = byName.get(REFERENCE);
        for (Contender c : contenders) {
            List<Sample> l = byName.get(c.name());
            Sample s = l.get(round);
            sb.append(sb.length() == 0 ? "" : " | ").append(c.name()).append(' ');
            if (!s.ok()) {
                sb.append("FAILED: ").append(s.error());
                continue;
            }
            sb.append(GateTable.time(s.time()));
            if (!Double.isNaN(s.alloc()) && !c.name().equals(REFERENCE)) {
                sb.append(String.format(Locale.ROOT, " %.2f B/op", s.alloc()));
            }
            if (ref != null && s != ref.get(round)) {
                double[] r = GateCheck.ratios(Metric.Kind.TIME, List.of(ref.get(round)), List.of(s));
                if (r.length == 1) {
                    sb.append(String.format(Locale.ROOT, " x%.3f", r[0]));
                }
            }
        }
        return sb.toString();
    }
}
