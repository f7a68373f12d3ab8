package io.tnsr.engine.pipeline;

import java.util.Locale;

/**
 * Whether a pipeline's compute threads fit this machine's cores, said once at start-up. A stage of several threads
 * meets them at a barrier after every matmul; with more compute threads on the machine than cores, that barrier
 * waits each time for a thread that is off its core. Measured on a 2-vCPU host: 16 sequences through one stage of
 * two threads 370-391 tokens/s, two stages of one thread (2 micro-batches of 8) 297; two threads beside a busy
 * process decoded one sequence at 29-35 tokens/s, one thread at 38 (docs/pipelining.md). Stages of one thread
 * each have no barrier, so more of them than cores only share the cores (pipelining); that is not flagged. One
 * process's {@code --threads} ({@code tools/generate}) meets the same barrier.
 */
public final class ThreadBudget {
    private ThreadBudget() {
    }

    /**
     * A one-line advice when the stages this machine starts (not the external ones) run more compute threads than
     * {@code cores} and some stage has more than one, else null.
     */
    public static String advice(PipelineConfig pc, int cores) {
        return advice(pc, cores, pc.localStages());
    }

    /**
     * {@link #advice(PipelineConfig, int)} for a coordinator that keeps {@code microBatches} in flight through blocking
     * stages: only {@link PipelineConfig#computingStages} of them compute at once, so only their threads need cores.
     */
    public static String advice(PipelineConfig pc, int cores, int microBatches) {
        int local = pc.localStages();
        int computing = pc.computingStages(microBatches);
        int threads = pc.threadsPerStage(cores);
        if (threads < 2 || computing * threads <= cores) {
            return null;
        }
        int fit = Math.max(1, cores / computing);
        String instead = local == 1 || fit > 1 ? "--threads-per-stage " + fit
                : "--threads-per-stage 1, or fewer stages of more threads (for many sequences on " + cores
                        + " cores: --stages 1 --threads-per-stage " + cores + "),";
        return String.format(Locale.ROOT, "%d stage%s x %d threads = %d compute threads on %d CPUs: every matmul's"
                + " threads wait for one that is off its core; %s keeps them within the cores", computing,
                computing == 1 ? "" : "s", threads, computing * threads, cores, instead);
    }

    /**
     * A one-line advice when one process's matmuls are shared by more {@code threads} than it has {@code cores}, else
     * null: their barrier after every matmul then waits for a thread that is off its core.
     */
    public static String advice(int threads, int cores) {
        if (threads <= cores) {
            return null;
        }
        return String.format(Locale.ROOT, "%d threads on %d CPUs: every matmul's threads wait for one that is off its"
                + " core; --threads %d keeps them within the cores", threads, cores, cores);
    }
}
