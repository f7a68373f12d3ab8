package io.tnsr.perf.gate;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The order in which the gate measures its probes, and how metrics are computed from the measurements.
 *
 * <p>Each ratio metric's reference is measured right before and right after the figure it divides
 * ({@code ref, a, ref, b, ref, ...}), and the figure is divided by the geometric mean of those two: on a shared
 * machine the load drifts over tens of seconds, and a reference bracketing the figure in time cancels most of
 * that drift (a reference measured once, a minute earlier, does not).
 */
public final class Schedule {
    private final List<Probe> order;

    private Schedule(List<Probe> order) {
        this.order = order;
    }

    public List<Probe> probes() {
        return order;
    }

    /** The schedule of {@code metrics}. */
    public static Schedule of(List<Metric> metrics) {
        return ofVariants(List.of(metrics));
    }

    /**
     * One schedule for several variants of the same metric list (the self-test's injected regressions): every
     * variant's figure for a metric is measured next to the real one, bracketed by the same reference.
     */
    public static Schedule ofVariants(List<List<Metric>> variants) {
        Map<Probe, Probe> referenceOf = new LinkedHashMap<>(); // a probe some ratio metric divides
        for (List<Metric> v : variants) {
            for (Metric m : v) {
                if (m.reference() != null) {
                    referenceOf.put(m.probe(), m.reference());
                }
            }
        }
        List<Probe> order = new ArrayList<>();
        int n = variants.get(0).size();
        for (int i = 0; i < n; i++) {
            for (List<Metric> v : variants) {
                Probe p = v.get(i).probe();
                if (order.contains(p)) {
                    continue;
                }
                Probe ref = referenceOf.get(p);
                if (ref != null && (order.isEmpty() || !order.get(order.size() - 1).equals(ref))) {
                    order.add(ref);
                }
                order.add(p);
                if (ref != null) {
                    order.add(ref);
                }
            }
        }
        return new Schedule(order);
    }

    /** The first measurement of each probe, in schedule order (for the throughput table). */
    public Map<Probe, ProbeRunner.Measurement> firstOfEach(List<ProbeRunner.Measurement> results) {
        Map<Probe, ProbeRunner.Measurement> m = new LinkedHashMap<>();
        for (int i = 0; i < order.size(); i++) {
            m.putIfAbsent(order.get(i), results.get(i));
        }
        return m;
    }

    /**
     * Each metric's value from {@code results} ({@code results.get(i)} measured {@code probes().get(i)}):
     * alloc: B/op of its probe; info: its probe's time (median over its measurements); ratio: its probe's time /
     * the geometric mean of the reference's measurements just before and just after it.
     *
     * @param iterationMillis the iteration time the probes ran with (for the allocation allowance)
     */
    public Map<String, GateCheck.Observation> observe(List<Metric> metrics, List<ProbeRunner.Measurement> results,
                                                      int iterationMillis) {
        Map<String, GateCheck.Observation> obs = new LinkedHashMap<>();
        for (Metric m : metrics) {
            int i = order.indexOf(m.probe());
            ProbeRunner.Measurement p = i < 0 ? null : results.get(i);
            if (p == null || !p.ok()) {
                obs.put(m.name(), GateCheck.Observation.missing(p == null ? "not measured" : p.error()));
                continue;
            }
            double ops = iterationMillis * 1e6 * m.probe().iterationScale() / p.nanosPerOp();
            switch (m.kind()) {
                case ALLOC -> obs.put(m.name(), new GateCheck.Observation(p.allocBytesPerOp(), ops, null));
                case INFO -> {
                    List<Double> all = new ArrayList<>();
                    for (int j = 0; j < order.size(); j++) {
                        if (order.get(j).equals(m.probe()) && results.get(j).ok()) {
                            all.add(results.get(j).nanosPerOp());
                        }
                    }
                    obs.put(m.name(), new GateCheck.Observation(
                            ProbeRunner.median(all.stream().mapToDouble(Double::doubleValue).toArray()), ops, null));
                }
                case RATIO -> {
                    double ref = bracket(m.reference(), i, results);
                    obs.put(m.name(), Double.isNaN(ref)
                            ? GateCheck.Observation.missing("reference " + m.reference().key() + " failed")
                            : new GateCheck.Observation(p.nanosPerOp() / ref, ops, null));
                }
            }
        }
        return obs;
    }

    /**
     * Geometric mean of the reference's measurements nearest before and after position i; one of them alone
     * when the other failed (NaN when both did).
     */
    private double bracket(Probe ref, int i, List<ProbeRunner.Measurement> results) {
        double before = Double.NaN;
        for (int j = i - 1; j >= 0; j--) {
            if (order.get(j).equals(ref)) {
                before = results.get(j).ok() ? results.get(j).nanosPerOp() : Double.NaN;
                break;
            }
        }
        double after = Double.NaN;
        for (int j = i + 1; j < order.size(); j++) {
            if (order.get(j).equals(ref)) {
                after = results.get(j).ok() ? results.get(j).nanosPerOp() : Double.NaN;
                break;
            }
        }
        if (Double.isNaN(before)) {
            return after;
        }
        return Double.isNaN(after) ? before : Math.sqrt(before * after);
    }
}
