package io.tnsr.engine.forward;

import io.tnsr.engine.model.RowParts;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.Agent;
import org.agrona.concurrent.AgentRunner;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;

/**
 * Threads that share the rows of every matmul with the thread that calls {@link #matmul}: the caller and the workers
 * claim the {@link RowParts#chunks} of a matmul one at a time until none is left (each thread through its own view of
 * the matrix); the call returns when every chunk is written. Each chunk is its own rows, computed as one thread
 * would, so results keep their bits whichever thread takes it. Claiming rather than a fixed share per thread matters
 * when threads fill the cores: a thread preempted for a moment (by the network threads, the JIT, another process)
 * holds up the others by the chunk it holds, not by its whole share. Other work that splits the same way
 * (attention's rows or heads) goes through {@link #run}, one fixed part per thread.
 *
 * <pre>
 * caller:   job = a matmul (parts, x, n, out, next chunk = 0) or other Parts; posted++ -> run part 0 -> wait until
 *           every worker's done == posted
 * worker k: (Agent, run by an AgentRunner) idle until posted > seen -> job.run(k, threads) -> done[k] = posted
 * matmul part k: prepare x on view k; claim chunks (next++) and run them until next >= chunks
 * </pre>
 *
 * Workers spin between the matmuls of a step (a step's matmuls come tens of microseconds apart) and back off to
 * yielding, then parking, when no work comes for about half a millisecond; each call unparks them, so a parked
 * worker starts at once rather than at the end of its park. A caller that knows no work is coming (a pipeline stage
 * whose ring is empty after a frame) says so with {@link #rest}, and the workers park at once: when the stages of one
 * machine take turns (one micro-batch in flight) the next stage's threads need those cores straight away, where a
 * worker's half millisecond of spinning after every step held one (docs/pipelining.md). A caller waiting for
 * the workers spins briefly, then yields its core at each check. Give a process no more threads in all than it has
 * cores: with a busy process beside it on a 2-core host, two threads decoded one F32 sequence at 29-35 tokens/s (with a
 * fixed share per thread and a caller that only spins: 17-19), one thread at 38 (docs/pipelining.md).
 * One caller at a time; allocation-free per call.
 */
public final class RowParallel implements AutoCloseable {
    /** Longest a caller waits for the workers' parts of one matmul: far beyond any one matmul, short of a hang. */
    private static final long PART_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(60);
    /**
     * Spins (about 50 us) of a caller waiting for the workers before it yields its core at each further check: when
     * the process shares its cores, the worker it waits for may be queued behind it on its own core.
     */
    private static final int WAIT_SPINS = 1_000;
    /**
     * Spins (about 0.5 ms) of an idle worker before it backs off to yielding, then parking: longer than the gaps
     * between the matmuls of a step, short enough not to hold a core that another process needs between steps.
     */
    private static final int IDLE_SPINS = 10_000;
    /** A backed-off worker's longest park. */
    private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    /** A resting worker's park: the next call or {@link #close} unparks it sooner; the bound only caps a lost wake-up. */
    private static final long REST_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    private final int threads;
    private final Worker[] workers;   // [threads - 1]
    private final AgentRunner[] runners;
    private volatile long posted;     // written by the caller only, after the job's fields
    private volatile boolean resting; // set by rest(), cleared by the next call before it posts
    private Parts job;                // the work posted last
    private final Matmul matmul = new Matmul();
    private volatile Throwable failure;

    /** @param threads threads per matmul, the caller's included (1: no workers, every matmul on the caller) */
    public RowParallel(int threads, String name) {
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be at least 1, not " + threads);
        }
        this.threads = threads;
        this.workers = new Worker[threads - 1];
        this.runners = new AgentRunner[threads - 1];
        for (int k = 1; k < threads; k++) {
            workers[k - 1] = new Worker(k, name + "-matmul-" + k);
            runners[k - 1] = new AgentRunner(new WorkerIdle(), this::failed, null, workers[k - 1]);
            AgentRunner.startOnThread(runners[k - 1], r -> {
                Thread t = new Thread(r);
                t.setDaemon(true);
                return t;
            });
        }
    }

    public int threads() {
        return threads;
    }

    /**
     * No work comes until the next call: the workers park at once rather than spin for their half millisecond. The
     * next call wakes them as usual (it unparks every worker), so nothing is lost but that wake-up.
     */
    public void rest() {
        if (threads > 1) {
            resting = true;
        }
    }

    /** Work in parts: {@code run(part, parts)} does part {@code part} of {@code parts}, all parts disjoint. */
    public interface Parts {
        void run(int part, int parts);
    }

    /**
     * {@code job.run(k, threads())} for every k at once, part 0 on this thread; returns when all are done.
     * {@code what} names the work in an error ("did not finish WHAT"): a constant, so that a call allocates nothing.
     */
    public void run(Parts job, String what) {
        if (threads == 1) {
            job.run(0, 1);
            return;
        }
        this.job = job;
        if (resting) {   // rest() and run() are called by this thread only: a read, not a fenced write, per call
            resting = false;
        }
        long p = posted + 1;
        posted = p;   // publishes the job and its fields (and the end of a rest)
        for (AgentRunner r : runners) {
            LockSupport.unpark(r.thread());   // a worker parked since the last step starts now, not at its next wake-up
        }
        job.run(0, threads);
        long deadline = System.nanoTime() + PART_TIMEOUT_NANOS;
        int spins = 0;
        for (Worker w : workers) {
            while (w.done < p) {
                if (failure != null || System.nanoTime() - deadline > 0) {
                    throw new IllegalStateException(w.roleName + " did not finish "
                            + (job == matmul ? "its rows of " + matmul.parts.matrix().name() : what)
                            + (failure != null ? ": " + failure : " within " + TimeUnit.NANOSECONDS.toSeconds(PART_TIMEOUT_NANOS) + " s"),
                            failure);
                }
                if (++spins > WAIT_SPINS) {
                    Thread.yield(); // a worker preempted on this core runs now, rather than after our time slice
                } else {
                    Thread.onSpinWait();
                }
            }
        }
    }

    /** {@code parts.matrix().matmul(x, 0, n, out, 0)}, its parts on this thread and the workers. */
    public void matmul(RowParts parts, float[] x, int n, float[] out) {
        if (threads == 1) {
            parts.run(0, x, 0, n, out, 0);
            return;
        }
        matmul.parts = parts;
        matmul.x = x;
        matmul.n = n;
        matmul.out = out;
        matmul.next.set(0);
        run(matmul, null);
    }

    /**
     * The matmul in progress, as parts: thread k prepares x on its view and claims chunks until none is left (a type
     * without chunks: {@link RowParts#run} of part k).
     */
    private static final class Matmul implements Parts {
        final AtomicInteger next = new AtomicInteger();
        RowParts parts;
        float[] x;
        int n;
        float[] out;

        @Override
        public void run(int part, int parts) {
            RowParts p = this.parts;
            int chunks = p.chunks();
            if (chunks == 0) {
                p.run(part, x, 0, n, out, 0);
                return;
            }
            int c = next.getAndIncrement();
            if (c >= chunks) {
                return; // the others took every chunk before this thread started
            }
            p.begin(part, x, 0, n);
            do {
                p.runChunk(part, c, x, 0, n, out, 0);
            } while ((c = next.getAndIncrement()) < chunks);
        }
    }

    private void failed(Throwable t) {
        failure = t;
    }

    /** Stops the workers (bounded by AgentRunner's close); resting ones are woken to see it. */
    @Override
    public void close() {
        resting = false;
        for (AgentRunner r : runners) {
            LockSupport.unpark(r.thread());
            r.close();
        }
    }

    /**
     * A worker's wait for work: spins, then yields, then parks ({@link BackoffIdleStrategy}); while the caller
     * {@link #rest}s, parks at once. A post after the worker read {@code resting} still wakes it: the caller unparks
     * every worker after posting, and a park that follows an unpark returns at once.
     */
    private final class WorkerIdle implements IdleStrategy {
        private final BackoffIdleStrategy backoff = new BackoffIdleStrategy(IDLE_SPINS, 100,
                TimeUnit.MICROSECONDS.toNanos(1), MAX_PARK_NANOS);

        @Override
        public void idle(int workCount) {
            if (workCount > 0) {
                backoff.reset();
            } else if (resting) {
                LockSupport.parkNanos(REST_PARK_NANOS);
            } else {
                backoff.idle();
            }
        }

        @Override
        public void idle() {
            backoff.idle();
        }

        @Override
        public void reset() {
            backoff.reset();
        }
    }

    /** Worker k: runs part k of each posted job. */
    private final class Worker implements Agent {
        private final int k;
        private final String roleName;
        private long seen;
        private volatile long done;

        Worker(int k, String roleName) {
            this.k = k;
            this.roleName = roleName;
        }

        @Override
        public int doWork() {
            long p = posted;
            if (p == seen) {
                return 0;
            }
            seen = p;
            job.run(k, threads);
            done = p;
            return 1;
        }

        @Override
        public String roleName() {
            return roleName;
        }
    }
}
