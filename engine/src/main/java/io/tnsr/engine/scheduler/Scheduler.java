package io.tnsr.engine.scheduler;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.TokenChooser;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.sampling.TokenLogprobs;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.LockSupport;
import org.agrona.collections.Int2IntCounterMap;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.collections.IntArrayList;

/**
 * Decides, step by step, which sequences run in which micro-batch of a pipeline. No sockets, no threads and no clock
 * of its own (every call is given the time), so the coordinator's links drive it, and so can a test.
 *
 * <p>M micro-batches take turns in the pipeline, each with at most one step in flight. A step carries the next token
 * of each running member (decode), then prompt chunks of members still prefilling, then, with rows to spare, prompt
 * chunks of the members of micro-batches in flight, within the step's row and entry budget.
 *
 * <p>So a prompt travels in the steps of several micro-batches at once and every stage works on it. A prompt's
 * chunks need no logits in between, and each stage runs the frames of every step in the order they were sent, so a
 * chunk always finds the chunks before it in the stage's cache. When all the prompt tokens left fit in one step of
 * each micro-batch, a prompt is cut into chunks of at most 1/M of it (at least {@link #MIN_CHUNK} tokens); with more
 * prompt than that, every step is full of prompt anyway, and whole chunks finish prompts sooner. A sequence gets no
 * decode token while a chunk of it rides in another micro-batch's step (its last chunk's logits are not back yet);
 * a step that fails whole fails the sequences whose chunks rode in it too.
 *
 * <p>When a step comes back, each logits row goes to the {@link TokenChooser}; a sequence that finishes or fails
 * leaves its micro-batch (its id is queued for END_SEQUENCE, so that every stage frees its cache), and the waiting
 * sequences that are due join the micro-batches not in flight, each to the one with the fewest members: micro-batches
 * stay balanced, and a sequence submitted while others run joins at the next step of the first micro-batch that
 * comes back with room.
 *
 * <pre>
 * The calling loop (Coordinator.run):
 *   submit(seq) ...                                   any time, from any thread
 *   admit(now, 0); for each mb: compose(mb, step++, now, plan) -> send a TOKENS frame
 *   while busy():
 *     nothing in flight: sleep until nextDueNanos(), admit, compose, send
 *     a frame back for mb: choose(seq, logits row, now) per row, or fail(seq) / failStep(mb)
 *                          stepDone(mb, now); ended ids -> send END_SEQUENCE; clearEnded()
 *                          admit(now, mb) (cancellations too: ended ids -> END_SEQUENCE)
 *                          compose and send each micro-batch not in flight
 * </pre>
 * One thread drives it; only {@link #submit} and {@link #cancel} may be called from others (they wake the driving
 * thread, see {@link #wakeOnSubmit}).
 */
public final class Scheduler {

    /**
     * @param microBatches        micro-batches taking turns in the pipeline
     * @param sequencesPerBatch   most members of one micro-batch
     * @param maxTokensPerStep    most token rows in one step (the stages' frame budget)
     * @param maxSequencesPerStep most sequences in one step
     */
    public record Limits(int microBatches, int sequencesPerBatch, int maxTokensPerStep, int maxSequencesPerStep) {
        public Limits {
            if (microBatches < 1 || sequencesPerBatch < 1 || maxTokensPerStep < 1 || maxSequencesPerStep < 1) {
                throw new IllegalArgumentException("scheduler limits must all be >= 1: " + microBatches + " micro-batches of "
                        + sequencesPerBatch + " sequences, steps of " + maxTokensPerStep + " tokens and "
                        + maxSequencesPerStep + " sequences");
            }
        }
    }

    /** Per-sequence latencies the scheduler records as tokens are chosen. */
    public record Metrics(LatencyMetric ttft, LatencyMetric tpot, LatencyMetric request) {
    }

    /** One step as composed: its token ids and the {@link Batch} of entries they belong to. Reused from step to step. */
    public static final class Step {
        private final Batch batch;
        private final int[] tokens;
        private long id;
        private int microBatch;

        public Step(Limits limits) {
            batch = new Batch(limits.maxSequencesPerStep(), limits.maxTokensPerStep());
            tokens = new int[limits.maxTokensPerStep()];
        }

        /** One entry per sequence: id, first position, token count, whether its logits come back. */
        public Batch batch() {
            return batch;
        }

        /** Token ids, {@code batch().tokens()} of them, entry by entry. */
        public int[] tokens() {
            return tokens;
        }

        public long id() {
            return id;
        }

        public int microBatch() {
            return microBatch;
        }
    }

    /** Fewest prompt tokens a chunk is cut to when a prompt is spread over the micro-batches' steps. */
    static final int MIN_CHUNK = 16;

    private static final class MicroBatch {
        final int id;
        final List<SequenceState> members = new ArrayList<>();
        /** Sequences of other micro-batches with a prompt chunk in the step in flight. */
        final IntArrayList guests = new IntArrayList();
        long inFlightStep = -1;
        long sentNanos;

        MicroBatch(int id) {
            this.id = id;
        }
    }

    private final Limits limits;
    private final TokenChooser chooser;
    private final Metrics metrics;
    private final MicroBatch[] batches;
    private final ConcurrentLinkedQueue<SequenceState> inbox = new ConcurrentLinkedQueue<>();
    private final ConcurrentLinkedQueue<Integer> cancels = new ConcurrentLinkedQueue<>();
    private final ArrayDeque<SequenceState> waiting = new ArrayDeque<>();
    private final Int2ObjectHashMap<SequenceState> live = new Int2ObjectHashMap<>();
    private final Int2ObjectHashMap<MicroBatch> batchOf = new Int2ObjectHashMap<>();
    /** Per sequence, its prompt chunks in flight in other micro-batches' steps (absent: none). */
    private final Int2IntCounterMap chunksAway = new Int2IntCounterMap(0);
    private volatile Thread wakeOnSubmit;
    private volatile int runningSeen;   // members and waiting as the last admit left them, for other threads
    private volatile int waitingSeen;
    /** Members admitted (or rewound) since the coordinator last told the last stage how to sample them. */
    private final List<SequenceState> undescribed = new ArrayList<>();
    private int[] ended = new int[64];
    private int endedCount;
    private long chosenTokens;
    private long steps;
    private int decodeWarmupTokens;
    private long decodeTokensSeen;   // decode tokens kept so far, warm-up included
    private long decodeStartNanos;   // when the warm-up ended
    private long firstDecodeNanos;   // when the step that carried the first decode token was sent

    public Scheduler(Limits limits, TokenChooser chooser, Metrics metrics) {
        this.limits = limits;
        this.chooser = chooser;
        this.metrics = metrics;
        this.batches = new MicroBatch[limits.microBatches()];
        for (int i = 0; i < batches.length; i++) {
            batches[i] = new MicroBatch(i);
        }
    }

    public Limits limits() {
        return limits;
    }

    /** Decode tokens to leave out of {@link #decodeTokens()} (the stages' JIT warm-up); 0 by default. */
    public void setDecodeWarmupTokens(int tokens) {
        this.decodeWarmupTokens = tokens;
    }

    /**
     * Queues a sequence; it joins a micro-batch at an {@link #admit} once its intended start has come. A sequence that
     * is finished already (refused: its prompt does not fit) is reported finished there and never runs. Thread-safe.
     */
    public void submit(SequenceState s) {
        inbox.add(s);
        LockSupport.unpark(wakeOnSubmit);
    }

    /** The thread that {@link #submit} and {@link #cancel} wake (the one driving this scheduler), or null. */
    public void wakeOnSubmit(Thread driver) {
        this.wakeOnSubmit = driver;
    }

    /**
     * Asks for sequence {@code seqId} to stop: at the next {@link #admit} it ends ({@link
     * io.tnsr.engine.generate.StopReason#CANCELLED}), waiting or running, and its id is queued for END_SEQUENCE; a
     * logits row of it still in flight is ignored. Unknown or ended ids are ignored. Thread-safe.
     */
    public void cancel(int seqId) {
        cancels.add(seqId);
        LockSupport.unpark(wakeOnSubmit);
    }

    /** Whether anything is waiting, running or in flight. */
    public boolean busy() {
        return inFlight() || !waiting.isEmpty() || !inbox.isEmpty();
    }

    /** Whether any micro-batch has a step in flight. */
    public boolean inFlight() {
        for (MicroBatch b : batches) {
            if (b.inFlightStep >= 0) {
                return true;
            }
        }
        return false;
    }

    /** Whether step {@code step} of micro-batch {@code mb} is the one in flight. */
    public boolean inFlight(int mb, long step) {
        return mb >= 0 && mb < batches.length && batches[mb].inFlightStep == step && step >= 0;
    }

    /** Members of micro-batch {@code mb}. */
    public int members(int mb) {
        return batches[mb].members.size();
    }

    /** Sequences waiting to join a micro-batch. */
    public int waiting() {
        drainInbox();
        return waiting.size();
    }

    /** The intended start of the next waiting sequence, or {@link Long#MAX_VALUE} when none waits. */
    public long nextDueNanos() {
        drainInbox();
        SequenceState s = waiting.peekFirst();
        return s == null ? Long.MAX_VALUE : s.intendedStartNanos();
    }

    /**
     * Joins the waiting sequences that are due to the micro-batches not in flight, each to the one with the fewest
     * members (scanning from {@code first}, so that ties go to the micro-batch that just came back), up to
     * {@link Limits#sequencesPerBatch()}.
     *
     * @return how many joined
     */
    public int admit(long nowNanos, int first) {
        drainInbox();
        drainCancels();
        expireWaiting(nowNanos);
        int joined = 0;
        int m = batches.length;
        while (!waiting.isEmpty() && waiting.peekFirst().intendedStartNanos() - nowNanos <= 0) {
            MicroBatch best = null;
            for (int i = 0; i < m; i++) {
                MicroBatch c = batches[(first + i) % m];
                if (c.inFlightStep < 0 && c.members.size() < limits.sequencesPerBatch()
                        && (best == null || c.members.size() < best.members.size())) {
                    best = c;
                }
            }
            if (best == null) {
                break;
            }
            SequenceState s = waiting.pollFirst();
            s.admitted(nowNanos);
            best.members.add(s);
            undescribed.add(s);
            batchOf.put(s.index(), best);
            joined++;
        }
        int members = 0;
        for (MicroBatch b : batches) {
            members += b.members.size();
        }
        runningSeen = members;
        waitingSeen = waiting.size();
        return joined;
    }

    /** Sequences in the micro-batches as the last {@link #admit} left them (at most a step old). Thread-safe. */
    public int runningNow() {
        return runningSeen;
    }

    /** Sequences waiting for a place as the last {@link #admit} left them (at most a step old). Thread-safe. */
    public int waitingNow() {
        return waitingSeen;
    }

    /**
     * Composes the next step of micro-batch {@code mb} into {@code step}: the decode token of each running member, then
     * its members' prompt chunks, then prompt chunks of the members of micro-batches in flight, within the budget;
     * marks it in flight as step {@code stepId}, sent at {@code nowNanos}.
     *
     * @return false when the micro-batch is in flight or there is nothing for it to send
     */
    public boolean compose(int mb, long stepId, long nowNanos, Step step) {
        MicroBatch b = batches[mb];
        if (b.inFlightStep >= 0) {
            return false;
        }
        Batch batch = step.batch.clear();
        boolean spread = batches.length > 1 && prefillLeft() <= (long) batches.length * limits.maxTokensPerStep();
        for (int j = 0; j < b.members.size(); j++) {   // decode: members whose last token's logits are back
            SequenceState s = b.members.get(j);
            if (s.prefillRemaining() == 0 && chunksAway.get(s.index()) == 0 && !full(batch)) {
                step.tokens[batch.tokens()] = s.lastToken();
                batch.add(s.index(), s.nextPosition(), 1, true);
            }
        }
        for (int j = 0; j < b.members.size(); j++) {
            addChunk(batch, step, b.members.get(j), spread);
        }
        for (int i = 1; i < batches.length && !full(batch); i++) {
            MicroBatch owner = batches[(mb + i) % batches.length];
            if (owner.inFlightStep < 0) {
                continue;   // it sends its own members' prompts itself, in its own step
            }
            for (int j = 0; j < owner.members.size(); j++) {
                SequenceState s = owner.members.get(j);
                if (addChunk(batch, step, s, spread)) {
                    b.guests.addInt(s.index());
                    chunksAway.incrementAndGet(s.index());
                }
            }
        }
        if (batch.sequences() == 0) {
            return false;
        }
        step.id = stepId;
        step.microBatch = mb;
        b.inFlightStep = stepId;
        b.sentNanos = nowNanos;
        return true;
    }

    /** Whether the step has no room for one more entry of one token. */
    private boolean full(Batch batch) {
        return batch.tokens() >= limits.maxTokensPerStep() || batch.sequences() == limits.maxSequencesPerStep();
    }

    /** Prompt tokens not yet sent, of every member. */
    private long prefillLeft() {
        long n = 0;
        for (MicroBatch b : batches) {
            for (int i = 0; i < b.members.size(); i++) {
                n += b.members.get(i).prefillRemaining();
            }
        }
        return n;
    }

    /**
     * Adds the next prompt chunk of {@code s}, if it has prompt left, to the step: at most what the budget leaves, and
     * when {@code spread}, 1/M of the prompt (at least {@link #MIN_CHUNK} tokens). Returns whether it did.
     */
    private boolean addChunk(Batch batch, Step step, SequenceState s, boolean spread) {
        int left = s.prefillRemaining();
        if (left == 0 || full(batch)) {
            return false;
        }
        int rows = batch.tokens();
        int share = spread ? Math.max(MIN_CHUNK, (s.prefillLength() + batches.length - 1) / batches.length) : left;
        int n = Math.min(left, Math.min(limits.maxTokensPerStep() - rows, share));
        int pos = s.takePrefill(n, step.tokens, rows);
        batch.add(s.index(), pos, n, s.prefillRemaining() == 0);
        return true;
    }

    /**
     * Members admitted, or rewound by {@link #rewindAll}, since the last {@link #clearUndescribed}: a coordinator whose
     * last stage samples sends a SAMPLING frame for them (settings and random state as they are now) before their
     * next step.
     */
    public List<SequenceState> undescribed() {
        return undescribed;
    }

    public void clearUndescribed() {
        undescribed.clear();
    }

    /** Whether sequence {@code seqId} is still running (its logits rows are wanted). */
    public boolean running(int seqId) {
        SequenceState s = live.get(seqId);
        return s != null && !s.finished();
    }

    /**
     * Hands a logits row of sequence {@code seqId} to sampling: chooses its next token, records the latencies, and
     * ends the sequence if that token finished it. A row for a sequence that is no longer running is ignored.
     */
    public void choose(int seqId, float[] logits, int offset, long nowNanos) {
        SequenceState s = live.get(seqId);
        if (s != null && !s.finished()) {
            chosen(s, chooser.choose(s, logits, offset, nowNanos), nowNanos);
        }
    }

    /**
     * Where the log-probabilities of sequence {@code seqId}'s next token go, or null when it is not running or did not
     * ask for them.
     */
    public TokenLogprobs logprobs(int seqId) {
        SequenceState s = live.get(seqId);
        return s == null || s.finished() ? null : s.logprobs();
    }

    /**
     * As {@link #choose}, for a token the last stage already sampled from the sequence's logits with its random state
     * (see {@link #undescribed}): the sequence's own copy of that state moves on as the stage's did.
     */
    public void accept(int seqId, int token, long nowNanos) {
        SequenceState s = live.get(seqId);
        if (s != null && !s.finished()) {
            chosen(s, chooser.accept(s, token, nowNanos), nowNanos);
        }
    }

    /** Counts a chosen token ({@link TokenChooser} bits {@code r}), records the latencies, ends a finished sequence. */
    private void chosen(SequenceState s, int r, long nowNanos) {
        MicroBatch b = batchOf.get(s.index());
        if ((r & TokenChooser.KEPT) != 0) {
            chosenTokens++;
            if ((r & TokenChooser.FIRST) == 0) {
                if (decodeTokensSeen++ == 0 && b != null) {
                    firstDecodeNanos = b.sentNanos;
                }
                if (decodeTokensSeen == decodeWarmupTokens) {
                    decodeStartNanos = nowNanos;
                }
            }
        }
        if ((r & TokenChooser.FIRST) != 0) {
            metrics.ttft().record(s.timeToFirstTokenNanos());
        }
        if ((r & TokenChooser.DONE) != 0) {
            leave(s);
            chooser.finished(s);
            metrics.request().record(s.elapsedNanos());
            if (s.generatedCount() > 1 && (r & TokenChooser.FAILED) == 0) { // a failed sequence has no pace, as fail()
                metrics.tpot().record((s.elapsedNanos() - s.timeToFirstTokenNanos()) / (s.generatedCount() - 1));
            }
        }
    }

    /**
     * The pipeline was replaced: every step in flight is lost and no stage holds any cache. Each running member
     * {@link SequenceState#rewind rewinds} to replay its history; ids waiting for END_SEQUENCE are dropped (no cache
     * holds them). Finished and waiting sequences are untouched.
     *
     * @return the running members rewound
     */
    public int rewindAll() {
        int n = 0;
        chunksAway.clear();
        for (MicroBatch b : batches) {
            b.inFlightStep = -1;
            b.guests.clear();
            for (SequenceState s : b.members) {
                s.rewind();
                n++;
            }
        }
        endedCount = 0;
        undescribed.clear();   // the new session's last stage knows none of them
        for (MicroBatch b : batches) {
            undescribed.addAll(b.members);
        }
        return n;
    }

    /** Fails one sequence (the pipeline could not run it); the others go on. Unknown or ended ids are ignored. */
    public void fail(int seqId, String message) {
        SequenceState s = live.get(seqId);
        if (s != null && !s.finished()) {
            s.fail(message);
            leave(s);
            chooser.finished(s);
            metrics.request().record(s.elapsedNanos());
        }
    }

    /**
     * Fails every member of micro-batch {@code mb} and every sequence with a prompt chunk in its step (the pipeline
     * could not run the step, so their caches miss it), and ends the step.
     */
    public long failStep(int mb, String message, long nowNanos) {
        MicroBatch b = batches[mb];
        for (SequenceState s : new ArrayList<>(b.members)) {
            fail(s.index(), message);
        }
        for (int i = 0; i < b.guests.size(); i++) {
            fail(b.guests.getInt(i), message);
        }
        return stepDone(mb, nowNanos);
    }

    /**
     * The step of micro-batch {@code mb} is back and handled: the micro-batch can take sequences and send again.
     *
     * @return the step's round trip, sent to done
     */
    public long stepDone(int mb, long nowNanos) {
        MicroBatch b = batches[mb];
        b.inFlightStep = -1;
        for (int i = 0; i < b.guests.size(); i++) {
            chunksAway.decrementAndGet(b.guests.getInt(i));
        }
        b.guests.clear();
        steps++;
        return nowNanos - b.sentNanos;
    }

    /** Ids of the sequences that ended since {@link #clearEnded}: [0, {@link #endedCount()}). */
    public int[] ended() {
        return ended;
    }

    public int endedCount() {
        return endedCount;
    }

    public void clearEnded() {
        endedCount = 0;
    }

    /** Tokens chosen and kept. */
    public long chosenTokens() {
        return chosenTokens;
    }

    /** Steps completed (or failed whole). */
    public long steps() {
        return steps;
    }

    /** Decode tokens kept after the warm-up. */
    public long decodeTokens() {
        return Math.max(0, decodeTokensSeen - decodeWarmupTokens);
    }

    /** When the decode rate's clock starts: the warm-up's end, or the first decode step's send without warm-up; 0 if none. */
    public long decodeStartNanos() {
        return decodeWarmupTokens == 0 ? firstDecodeNanos : decodeStartNanos;
    }

    private void drainInbox() {
        SequenceState s;
        while ((s = inbox.poll()) != null) {
            if (s.finished()) {
                chooser.finished(s);
            } else {
                waiting.add(s);
                live.put(s.index(), s);
            }
        }
    }

    private void drainCancels() {
        Integer id;
        while ((id = cancels.poll()) != null) {
            SequenceState s = live.get(id);
            if (s != null && !s.finished()) {
                s.cancel();
                leave(s);
                chooser.finished(s);
                metrics.request().record(s.elapsedNanos());
            }
        }
    }

    /**
     * Ends the waiting sequences at the head of the queue whose wait limit has passed ({@link SequenceState#admitBy}).
     * Sequences wait in submission order, so with one limit for all (a server's) the expired ones are all at the head.
     */
    private void expireWaiting(long nowNanos) {
        SequenceState s;
        while ((s = waiting.peekFirst()) != null && s.waitExpired(nowNanos)) {
            s.expire(nowNanos);
            leave(s);
            chooser.finished(s);
        }
    }

    private void leave(SequenceState s) {
        live.remove(s.index());
        MicroBatch b = batchOf.remove(s.index());
        if (b == null) {
            waiting.remove(s);
            return;
        }
        b.members.remove(s);
        if (endedCount == ended.length) {
            ended = Arrays.copyOf(ended, ended.length * 2);
        }
        ended[endedCount++] = s.index();
    }
}
