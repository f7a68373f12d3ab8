package io.tnsr.engine.coordinator;

import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Consumer;

/**
 * Brings a broken pipeline back: finds the stages that are gone, replaces them, and opens a new session.
 * <pre>
 *   until the recovery timeout:
 *     probe every stage at once (a PROBE handshake, bounded): alive and the same model?
 *     each one that is not: a stage this side started is killed (if still there: hung) and started again, at most
 *       restartAttempts times; an external one is waited for at its address, or its config's alternatives in turn
 *     open a new session over all of them (PipelineLinks.open); done, or back off (0.2, 0.5, 1, 2, 2 ... s) and again
 * </pre>
 * A new session drops every stage's KV caches, so the caller then replays each running sequence's history (the
 * whole prefix through every stage: simple, and the cost is one prefill of the live context; see docs).
 * Reports what it is doing to {@code status} (for {@code /health} and the console), and what it did as figures.
 */
public final class PipelineRecovery {
    private static final long[] BACKOFF_MILLIS = {200, 500, 1000, 2000};
    /** Probes run at once, one thread each (a silent stage takes the whole probe bound). */
    private static final java.util.concurrent.ExecutorService PROBES = java.util.concurrent.Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "stage-probe");
        t.setDaemon(true);
        return t;
    });

    /** One recovery that succeeded: how long it took, and which stages were replaced. */
    public record Done(long nanos, List<Integer> replaced, String cause) {
    }

    private final Stages stages;
    private final PipelineConfig cfg;
    private final LlamaConfig model;
    private final byte[] fingerprint;
    private final LinkOptions link;
    private final RecoveryOptions options;
    private final Consumer<String> status;
    private final List<Done> done = new ArrayList<>();

    public PipelineRecovery(Stages stages, PipelineConfig cfg, LlamaConfig model, byte[] fingerprint, LinkOptions link,
                            RecoveryOptions options, Consumer<String> status) {
        this.stages = stages;
        this.cfg = cfg;
        this.model = model;
        this.fingerprint = fingerprint.clone();
        this.link = link;
        this.options = options;
        this.status = status;
    }

    /** The recoveries so far, in order. */
    public List<Done> done() {
        return List.copyOf(done);
    }

    /**
     * Replaces what is lost and opens a new session; throws {@link PipelineException} naming the stage still down when
     * the recovery timeout runs out or a stage cannot be restarted.
     */
    public PipelineLinks.Links recover(String cause) {
        long t0 = System.nanoTime();
        long deadline = t0 + TimeUnit.MILLISECONDS.toNanos(options.timeoutMillis());
        int n = cfg.stages().size();
        int[] restarts = new int[n];
        List<Integer> replaced = new ArrayList<>();
        String last = cause;
        status.accept("recovering: " + cause);
        for (int attempt = 0; ; attempt++) {
            List<String> addresses = stages.addresses();
            List<CompletableFuture<String>> probes = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String address = addresses.get(i);
                int index = i;
                probes.add(CompletableFuture.supplyAsync(() -> PipelineLinks.probe(address, index, n, cfg, model, fingerprint, link,
                        options.probeMillis()), PROBES));
            }
            String down = null;
            for (int i = 0; i < n; i++) {
                String why = probes.get(i).join();
                if (why == null) {
                    continue;
                }
                String what = "stage" + i + " (" + addresses.get(i) + ") is down: " + why;
                down = down == null ? what : down;
                if (!stages.replaceable(i)) {
                    String next = stages.nextAddress(i);
                    status.accept("recovering: " + what + (next.equals(addresses.get(i)) ? "; waiting for it to come back"
                            : "; trying its alternative " + next));
                    continue;
                }
                if (restarts[i] >= options.restartAttempts()) {
                    throw PipelineException.fatal(String.format(Locale.ROOT, "recovery gave up after %.1f s: stage%d was restarted %d"
                            + " times and is still down: %s", (System.nanoTime() - t0) / 1e9, i, restarts[i], why));
                }
                restarts[i]++;
                status.accept("recovering: " + what + "; restarting it (attempt " + restarts[i] + ")");
                try {
                    stages.replace(i, Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
                    if (!replaced.contains(i)) {
                        replaced.add(i);
                    }
                } catch (PipelineException e) {
                    down = "stage" + i + " could not be restarted: " + e.getMessage();
                }
            }
            if (down != null) {
                last = down;
            } else {
                try {
                    PipelineLinks.Links links = PipelineLinks.open(stages.addresses(), cfg, model, fingerprint, link,
                            Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
                    long took = System.nanoTime() - t0;
                    done.add(new Done(took, List.copyOf(replaced), cause));
                    status.accept(null);
                    return links;
                } catch (PipelineException e) {
                    last = e.getMessage();
                }
            }
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                throw PipelineException.fatal(String.format(Locale.ROOT, "recovery gave up after %.1f s: %s",
                        (System.nanoTime() - t0) / 1e9, last));
            }
            LockSupport.parkNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(
                    BACKOFF_MILLIS[Math.min(attempt, BACKOFF_MILLIS.length - 1)])));
        }
    }
}
