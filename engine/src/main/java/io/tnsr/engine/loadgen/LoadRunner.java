package io.tnsr.engine.loadgen;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * Sends the requests of one phase in one of two ways and records each into a {@link BenchStats}:
 * <ul>
 *   <li><b>closed loop</b> ({@code concurrency} clients): each client sends its next request when its previous one
 *       ended, so the server is never asked for more than C at once, and a slow server is sent less. Latencies run
 *       from each request's send.</li>
 *   <li><b>open loop</b> ({@code rate}): requests arrive as a seeded Poisson process, whether or not earlier ones have
 *       ended, up to {@code maxInFlight} at once (beyond that the next waits for a place). Latencies run from each
 *       request's <i>intended</i> start, so time spent waiting, for the server or for a place, is counted: the
 *       correction for coordinated omission.</li>
 * </ul>
 * A phase ends after {@code requests} requests, or when {@code durationNanos} have passed (no request is sent after
 * that; those in flight finish), whichever comes first.
 */
public final class LoadRunner {
    /**
     * How to send.
     *
     * @param concurrency   closed-loop clients (ignored when {@code rate > 0})
     * @param rate          open-loop arrivals per second; 0 for a closed loop
     * @param arrivalSeed   the seed of the arrival times
     * @param maxInFlight   open loop: most requests in flight at once
     * @param requests      most requests to send ({@link Long#MAX_VALUE}: no limit)
     * @param durationNanos no request is sent after this long (0: no limit)
     */
    public record Plan(int concurrency, double rate, long arrivalSeed, int maxInFlight, long requests, long durationNanos) {
        public boolean openLoop() {
            return rate > 0;
        }
    }

    /**
     * How a phase went, as the load generator saw it.
     *
     * @param wallNanos       from the start of the phase to the end of its last request
     * @param sent            requests sent
     * @param capHits         open loop: arrivals that found {@code maxInFlight} requests in flight and waited
     * @param maxSendLagNanos open loop: the longest a request was sent after its intended start
     */
    public record Result(long wallNanos, long sent, long capHits, long maxSendLagNanos) {
    }

    private final OpenAiClient client;
    private final CompletionRequests bodies;
    private final AtomicLong sent = new AtomicLong();

    public LoadRunner(OpenAiClient client, CompletionRequests bodies) {
        this.client = client;
        this.bodies = bodies;
    }

    /** Requests sent so far by the phase running (for progress). */
    public long sent() {
        return sent.get();
    }

    /** Runs one phase; request bodies are numbered from {@code firstIndex}. */
    public Result run(Plan plan, long firstIndex, BenchStats stats) {
        sent.set(0);
        return plan.openLoop() ? openLoop(plan, firstIndex, stats) : closedLoop(plan, firstIndex, stats);
    }

    private Result closedLoop(Plan plan, long firstIndex, BenchStats stats) {
        AtomicLong next = new AtomicLong();
        long t0 = System.nanoTime();
        long stopAt = t0 + plan.durationNanos();
        List<Thread> clients = new ArrayList<>();
        for (int c = 0; c < plan.concurrency(); c++) {
            Thread t = new Thread(() -> client(plan, firstIndex, stats, next, stopAt), "serve-bench-client-" + c);
            t.setDaemon(true);
            clients.add(t);
            t.start();
        }
        for (Thread t : clients) {
            joinUninterruptibly(t);
        }
        return new Result(System.nanoTime() - t0, sent.get(), 0, 0);
    }

    /** One closed-loop client: the next request when the previous one has ended. */
    private void client(Plan plan, long firstIndex, BenchStats stats, AtomicLong next, long stopAt) {
        boolean timed = plan.durationNanos() > 0;
        for (long i; (i = next.getAndIncrement()) < plan.requests() && !(timed && System.nanoTime() - stopAt >= 0); ) {
            sent.incrementAndGet();
            Outcome o = client.complete(bodies.body(firstIndex + i)).join();
            stats.record(o, o.sendNanos());
        }
    }

    private Result openLoop(Plan plan, long firstIndex, BenchStats stats) {
        Semaphore places = new Semaphore(plan.maxInFlight());
        PoissonArrivals arrivals = new PoissonArrivals(plan.rate(), plan.arrivalSeed());
        long capHits = 0;
        long maxLag = 0;
        long t0 = System.nanoTime();
        for (long i = 0; i < plan.requests(); i++) {
            long offset = arrivals.next();
            if (plan.durationNanos() > 0 && offset >= plan.durationNanos()) {
                break;
            }
            long intended = t0 + offset;
            sleepUntil(intended);
            if (!places.tryAcquire()) {
                capHits++;
                places.acquireUninterruptibly();
            }
            maxLag = Math.max(maxLag, System.nanoTime() - intended);
            sent.incrementAndGet();
            client.complete(bodies.body(firstIndex + i)).whenComplete((o, t) -> {
                try {
                    stats.record(o, intended);
                } finally {
                    places.release();
                }
            });
        }
        places.acquireUninterruptibly(plan.maxInFlight());   // every request has ended
        return new Result(System.nanoTime() - t0, sent.get(), capHits, maxLag);
    }

    private static void sleepUntil(long deadline) {
        for (long left; (left = deadline - System.nanoTime()) > 0; ) {
            LockSupport.parkNanos(left);
        }
    }

    private static void joinUninterruptibly(Thread t) {
        boolean interrupted = false;
        while (true) {
            try {
                t.join();
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
