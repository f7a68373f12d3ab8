package io.tnsr.engine.pipeline;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

/**
 * Decides, once per run, how each stage's compute thread waits and which CPU it is pinned to.
 *
 * <p>Busy-spinning threads beyond the machine's cores starve each other (and the network threads). A stage
 * gets a spinning, pinned compute thread only when every stage can have its own core and one core is left for
 * everything else (N stages need N + 1 CPUs); otherwise none does, because giving some stages a core would
 * leave the others sharing what is left, and the slowest stage sets the pipeline's pace. They back off (spin
 * briefly, yield, then park) instead, and {@link #warning()} says so.
 *
 * @param waits   per stage
 * @param cpus    per stage, -1 = not pinned
 * @param warning a message for the user when spinning was asked for but not granted, or null
 */
public record SpinPolicy(List<WaitMode> waits, List<Integer> cpus, String warning) {

    public SpinPolicy {
        waits = List.copyOf(waits);
        cpus = List.copyOf(cpus);
    }

    /**
     * @param spin  whether spinning was asked for (the --spin flag, or wait_strategy "spin" in the config)
     * @param cores CPUs this machine gives the process
     */
    public static SpinPolicy decide(PipelineConfig pc, boolean spin, int cores) {
        int n = pc.stages().size();
        boolean spinning = spin || pc.waitMode() == WaitMode.SPIN;
        boolean granted = spinning && n <= cores - 1;
        List<WaitMode> waits = new ArrayList<>();
        List<Integer> cpus = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            StageSpec s = pc.stages().get(i);
            if (granted) {
                waits.add(WaitMode.SPIN);
                cpus.add(s.cpus().isEmpty() ? (i + 1) % cores : s.cpus().get(0));
            } else {
                waits.add(spinning ? WaitMode.BACKOFF : pc.waitMode());
                cpus.add(-1);
            }
        }
        String warning = spinning && !granted ? String.format(Locale.ROOT, "spinning asks for %d busy-spinning compute "
                + "threads, but this machine has %d CPUs (one is kept for the network threads and the coordinator); "
                + "the stages will back off instead (spin, then yield, then park)", n, cores) : null;
        return new SpinPolicy(waits, cpus, warning);
    }

    /** Every stage blocking, unpinned. */
    public static SpinPolicy blocking(int stages) {
        return new SpinPolicy(Collections.nCopies(stages, WaitMode.BLOCK), Collections.nCopies(stages, -1), null);
    }

    /** "stage0->CPU1 stage1->CPU0", or null when nothing is pinned. */
    public String pinning() {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < cpus.size(); i++) {
            if (cpus.get(i) >= 0) {
                sb.append(sb.length() == 0 ? "" : " ").append("stage").append(i).append("->CPU").append(cpus.get(i));
            }
        }
        return sb.length() == 0 ? null : sb.toString();
    }
}
