package io.tnsr.perf.gate;

import io.tnsr.engine.util.TaskProgress;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Measures the gate's probes in the reference build and the tree under test (and, for the self-test, the injected
 * variants) side by side, in rounds. In a round of a JMH probe, {@link Probe.Jmh#forks()} forks of every contender
 * run at once, taking turns iteration by iteration ({@link ForkRunner#together}); in a round of a pipeline probe,
 * one run of each contender, one after the other, the order reversed every other round. A probe that a compared
 * metric uses gets {@link Probe#minRounds()} rounds, and more, up to {@link GateCheck#MAX_ROUNDS}, while some round
 * is beyond a limit ({@link GateCheck#undecided}); a probe only allocation is judged on runs one fork of the tree
 * under test (and of each allocation variant) per round, another while a fork allocated and fewer than three have
 * run ({@link GateCheck#allocUndecided}).
 *
 * <pre>
 *   for each probe:
 *     for round in 0, 1, ...:
 *       run the round (JMH: every fork at once, in turns; pipeline: in order, reversed on odd rounds)
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

    /** Every sample: by the gate's probe, then round, then contender name (its forks in that round). */
    public record Measurements(Map<Probe, List<Map<String, List<Sample>>>> samples) {
        /** The rounds of {@code probe} that measured the reference and {@code contender}. */
        public List<GateCheck.Round> rounds(Probe probe, String contender) {
            List<GateCheck.Round> out = new ArrayList<>();
            for (Map<String, List<Sample>> r : samples.getOrDefault(probe, List.of())) {
                if (r.containsKey(contender)) {
                    out.add(new GateCheck.Round(r.getOrDefault(REFERENCE, List.of()), r.get(contender)));
                }
            }
            return out;
        }

        /** Every sample of {@code contender} for {@code probe}, all rounds. */
        public List<Sample> all(Probe probe, String contender) {
            return samples.getOrDefault(probe, List.of()).stream().flatMap(r -> r.getOrDefault(contender, List.of()).stream()).toList();
        }
    }

    private final ForkRunner runner;
    private final PrintStream out;
    private final TaskProgress progress;

    /** Rows go to {@code out}; {@code progress} steps once per probe measured, and names the one in flight. */
    public SideBySide(ForkRunner runner, PrintStream out, TaskProgress progress) {
        this.runner = runner;
        this.out = out;
        this.progress = progress;
    }

    /** The probes {@link #measure} runs: every metric's, or only those of allocation metrics without a reference. */
    static List<Probe> probes(List<Metric> metrics, boolean withReference) {
        List<Probe> probes = GateSuite.probes(metrics);
        return withReference ? probes
                : probes.stream().filter(p -> metrics.stream().anyMatch(m -> m.probe().equals(p) && !m.kind().compared())).toList();
    }

    /**
     * @param reference  the reference build, or null to measure the tree alone (allocation only)
     * @param injections self-test variants, each measured in {@code tree} beside its expected metric's probe
     */
    public Measurements measure(List<Metric> metrics, ForkRunner.Build reference, ForkRunner.Build tree,
                                List<GateSuite.Injection> injections) {
        Map<Probe, List<Map<String, List<Sample>>>> all = new LinkedHashMap<>();
        List<Probe> probes = probes(metrics, reference != null);
        long t0 = System.nanoTime();
        int n = 0;
        for (Probe p : probes) {
            n++;
            List<Metric> compared = compared(metrics, p, reference);
            List<Contender> contenders = contenders(metrics, p, compared, reference, tree, injections);
            List<Map<String, List<Sample>>> rounds = new ArrayList<>();
            all.put(p, rounds);
            for (int round = 0; ; round++) {
                progress.message(" " + p.key() + (round == 0 ? "" : ", round " + (round + 1)));
                long s = System.nanoTime();
                List<Contender> order = new ArrayList<>(contenders);
                if (round % 2 == 1) {
                    Collections.reverse(order);
                }
                Map<String, List<Sample>> byName = new LinkedHashMap<>();
                for (Contender c : contenders) {
                    byName.put(c.name(), new ArrayList<>());
                }
                if (p instanceof Probe.Jmh) {
                    Started now = start(order, compared.isEmpty());
                    List<Sample> samples = now.batch().run();
                    for (int i = 0; i < samples.size(); i++) {
                        byName.get(now.of().get(i).name()).add(samples.get(i));
                    }
                } else {
                    for (Contender c : order) {
                        byName.get(c.name()).add(runner.pipeline(c.build(), (Probe.Pipeline) c.probe()));
                    }
                }
                rounds.add(byName);
                out.printf(Locale.ROOT, "[%2d/%d] %-58s %s (%.0f s)%n", n, probes.size(), round == 0 ? p.key() : "",
                        line(contenders, byName), (System.nanoTime() - s) / 1e9);
                if (round + 1 >= GateCheck.MAX_ROUNDS || !undecided(p, metrics, contenders, rounds, reference != null)) {
                    break;
                }
            }
            progress.stepBy(1);
        }
        out.printf(Locale.ROOT, "measured %d probes in %.0f s%n", probes.size(), (System.nanoTime() - t0) / 1e9);
        return new Measurements(all);
    }

    /** Forks started for one round, and the contender of each. */
    private record Started(ForkRunner.Batch batch, List<Contender> of) {
    }

    /** Starts a round of a JMH probe: its forks of every contender, interleaved (one fork each when not compared). */
    private Started start(List<Contender> order, boolean alone) {
        int forks = alone ? 1 : ((Probe.Jmh) order.get(0).probe()).forks();
        List<ForkRunner.Fork> list = new ArrayList<>();
        List<Contender> of = new ArrayList<>();
        for (int k = 0; k < forks; k++) {
            for (Contender c : order) {
                list.add(new ForkRunner.Fork(c.name() + "-" + (k + 1), c.build(), (Probe.Jmh) c.probe()));
                of.add(c);
            }
        }
        return new Started(runner.start(list), of);
    }

    private static List<Metric> compared(List<Metric> metrics, Probe p, ForkRunner.Build reference) {
        return reference == null ? List.of() : metrics.stream().filter(m -> m.probe().equals(p) && m.kind().compared()).toList();
    }

    /** The reference (when a metric of {@code p} is compared), the tree, and each variant injected beside {@code p}. */
    private static List<Contender> contenders(List<Metric> metrics, Probe p, List<Metric> compared, ForkRunner.Build reference,
                                              ForkRunner.Build tree, List<GateSuite.Injection> injections) {
        List<Contender> contenders = new ArrayList<>();
        if (!compared.isEmpty()) {
            contenders.add(new Contender(REFERENCE, reference, p));
        }
        contenders.add(new Contender(TREE, tree, p));
        for (GateSuite.Injection inj : injections) {
            metrics.stream().filter(m -> m.name().equals(inj.expected()) && m.probe().equals(p)).findFirst()
                    .ifPresent(m -> contenders.add(new Contender(inj.name(), tree, inj.variant(m))));
        }
        return contenders;
    }

    /** Whether any compared metric of the probe, for the tree or a variant, needs another round. */
    private static boolean undecided(Probe p, List<Metric> metrics, List<Contender> contenders,
                                     List<Map<String, List<Sample>>> rounds, boolean comparing) {
        Measurements m = new Measurements(Map.of(p, rounds));
        for (Contender c : contenders) {
            for (Metric x : metrics) {
                if (!x.probe().equals(p) || c.name().equals(REFERENCE)) {
                    continue;
                }
                if (x.kind().compared() ? comparing && GateCheck.undecided(x, m.rounds(p, c.name()))
                        : GateCheck.allocUndecided(x, m.all(p, c.name()))) {
                    return true;
                }
            }
        }
        return false;
    }

    /** "reference 26.8 us | tree 26.9 us 0.00 B/op x1.004 | kernel-2x 53.1 us x1.98" for one round. */
    private static String line(List<Contender> contenders, Map<String, List<Sample>> byName) {
        StringBuilder sb = new StringBuilder();
        List<Sample> ref = byName.get(REFERENCE);
        for (Contender c : contenders) {
            List<Sample> l = byName.get(c.name());
            sb.append(sb.length() == 0 ? "" : " | ").append(c.name()).append(' ');
            List<Sample> ok = l.stream().filter(Sample::ok).toList();
            if (ok.isEmpty()) {
                sb.append("FAILED: ").append(l.get(0).error());
                continue;
            }
            double[] t = ok.stream().mapToDouble(Sample::time).sorted().toArray();
            sb.append(GateTable.time(t[0]));
            if (t.length > 1) {
                sb.append(String.format(Locale.ROOT, "..%s", GateTable.time(t[t.length - 1])));
            }
            if (ok.size() < l.size()) {
                sb.append(" (").append(l.size() - ok.size()).append(" failed: ")
                        .append(l.stream().filter(x -> !x.ok()).findFirst().orElseThrow().error()).append(')');
            }
            double alloc = ok.stream().mapToDouble(Sample::alloc).filter(x -> !Double.isNaN(x)).max().orElse(Double.NaN);
            if (!Double.isNaN(alloc) && !c.name().equals(REFERENCE)) {
                sb.append(String.format(Locale.ROOT, " %.2f B/op", alloc));
            }
            if (ref != null && !c.name().equals(REFERENCE)) {
                double r = GateCheck.ratio(Metric.Kind.TIME, new GateCheck.Round(ref, l));
                if (!Double.isNaN(r)) {
                    sb.append(String.format(Locale.ROOT, " x%.3f", r));
                }
            }
        }
        return sb.toString();
    }
}
