package io.tnsr.engine.coordinator;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.TokenChooser;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.pipeline.FrameSizes;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.ErrorPayload;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FrameValidator;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Drives the autoregressive ring over the pipeline's two links: sends each step that the {@link Scheduler} composes
 * to the first stage as a TOKENS frame, reads the tokens the last stage sampled (SAMPLED; or logits rows, which the
 * scheduler samples, see {@link Options#sampleInLastStage}) and hands them to the scheduler, sends SAMPLING for the
 * sequences admitted (how the last stage samples them) and END_SEQUENCE for the sequences that ended, keeping up to
 * M micro-batches in flight so that while the last stage works on micro-batch 0 the first works on micro-batch 1, and
 * so on. Frames come back in the order they were sent (every stage is FIFO).
 *
 * <p>When the pipeline breaks and a {@link Recovery} is set, the coordinator gets new links from it, rewinds every
 * running sequence to replay its history ({@link Scheduler#rewindAll}), and goes on; nothing already chosen is
 * chosen or emitted again.
 *
 * <p>One thread; every wait is bounded by the caller's watchdog, which closes the channels (and so fails the
 * blocking read or write here) when a stage dies or stops answering, and which also sends the first stage a
 * HEARTBEAT whenever the link to it has been idle for a while ({@link #heartbeatIfIdle}; a lock keeps frames whole).
 *
 * <p><b>Closed loop</b> (the default): every sequence is submitted at the start of the run and joins a micro-batch
 * as soon as one has room. <b>Open loop</b> ({@link Options#ratePerSecond()} > 0): sequence k is due at
 * {@code start + k / rate} and joins no earlier, whatever the pipeline's state; if the pipeline is behind, it
 * joins later, and its time to first token and request latency are still measured from when it was due (so the
 * wait is counted: no coordinated omission). Admission happens on every frame that comes back (a micro-batch
 * that is not in flight can take due sequences), and, when nothing is in flight, by sleeping until the next
 * sequence is due. Hazard: while frames are in flight the thread blocks in a read, so a sequence that falls due
 * then joins when the next frame returns (at most one step round trip later); that delay is part of its
 * measured latency, as it would be for a real client.
 */
public final class Coordinator {

    /**
     * @param microBatches         most micro-batches in flight
     * @param sequencesPerBatch    most sequences per micro-batch (0 = spread evenly)
     * @param maxTokensPerFrame    most token rows per frame (the stages' slot size)
     * @param maxSequencesPerFrame most sequences per frame
     * @param maxFrameBytes        largest frame accepted back
     * @param ratePerSecond        open loop: sequences admitted per second, sequence k at start + k / rate
     *                             (0 = closed loop: every sequence submitted at the start)
     * @param sampleInLastStage    where tokens are chosen: in the last stage, which returns token ids (true, the
     *                             default), or here from the logits rows it returns (4 x vocabulary bytes per sequence
     *                             per step cross the last link); the same tokens either way, greedy or seeded
     */
    public record Options(int microBatches, int sequencesPerBatch, int maxTokensPerFrame, int maxSequencesPerFrame,
                          int maxFrameBytes, double ratePerSecond, boolean sampleInLastStage) {
        public Options {
            if (microBatches < 1) {
                throw new IllegalArgumentException("--micro-batches must be >= 1, got " + microBatches);
            }
            if (!(ratePerSecond >= 0) || Double.isInfinite(ratePerSecond)) {
                throw new IllegalArgumentException("--rate must be a positive number of sequences per second, got " + ratePerSecond);
            }
        }

        /** Sampling in the last stage. */
        public Options(int microBatches, int sequencesPerBatch, int maxTokensPerFrame, int maxSequencesPerFrame,
                       int maxFrameBytes, double ratePerSecond) {
            this(microBatches, sequencesPerBatch, maxTokensPerFrame, maxSequencesPerFrame, maxFrameBytes, ratePerSecond, true);
        }

        /** Closed loop, sampling in the last stage. */
        public Options(int microBatches, int sequencesPerBatch, int maxTokensPerFrame, int maxSequencesPerFrame,
                       int maxFrameBytes) {
            this(microBatches, sequencesPerBatch, maxTokensPerFrame, maxSequencesPerFrame, maxFrameBytes, 0);
        }

        /** These options with tokens chosen in the last stage ({@code true}) or by the coordinator from logits. */
        public Options withSampleInLastStage(boolean inLastStage) {
            return new Options(microBatches, sequencesPerBatch, maxTokensPerFrame, maxSequencesPerFrame, maxFrameBytes,
                    ratePerSecond, inLastStage);
        }

        public boolean openLoop() {
            return ratePerSecond > 0;
        }
    }

    /** Latency metrics the coordinator records (all on its one thread). */
    public record Metrics(LatencyMetric hopIn, LatencyMetric stepRoundTrip, LatencyMetric ttft, LatencyMetric tpot,
                          LatencyMetric request) {
    }

    /**
     * What a run did. Decode figures count the tokens chosen after a sequence's first one (each from a
     * one-token step), from the moment the first {@code decodeWarmupTokens} of them were chosen to the end.
     */
    public record Result(long generatedTokens, long wallNanos, long steps, long decodeTokens, long decodeNanos) {
        public double tokensPerSecond() {
            return wallNanos == 0 ? 0 : generatedTokens * 1e9 / wallNanos;
        }

        public double decodeTokensPerSecond() {
            return decodeNanos == 0 ? 0 : decodeTokens * 1e9 / decodeNanos;
        }
    }

    private volatile FrameChannel toFirst;    // replaced by a recovery
    private volatile FrameChannel fromLast;
    private final TokenChooser chooser;
    private final Options o;
    private final Metrics metrics;
    private final int vocab;
    private final ByteBuffer sendBytes;   // [one TOKENS frame or one END_SEQUENCE frame]
    private final UnsafeBuffer send;
    private final ByteBuffer recvBytes;   // [one LOGITS frame]
    private final UnsafeBuffer recv;
    private final FloatBuffer recvFloats;
    private final float[] row;            // [vocab] one row of logits
    /** Longest sleep with nothing in flight and nothing due: a submission wakes the thread sooner. */
    static final long IDLE_WAIT_NANOS = 50_000_000L;

    private final ReentrantLock writing = new ReentrantLock();
    private final ByteBuffer heartbeatBytes = ByteBuffer.allocateDirect(FrameHeader.HEADER_LENGTH + 64).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer heartbeat = new UnsafeBuffer(heartbeatBytes);
    private volatile long lastWriteNanos = System.nanoTime();
    private volatile long writeStartedNanos;
    private volatile long lastHeardNanos = System.nanoTime();

    private long nextStep = 1;
    private volatile Recovery recovery;
    private int recoveries;
    private long tokensAtRecovery = -1;
    private int fruitless;
    private volatile long lastProgressNanos = System.nanoTime();
    private int decodeWarmupTokens;
    private final int wantFlags;   // entry flags of a row whose next token is wanted

    public Coordinator(FrameChannel toFirst, FrameChannel fromLast, int vocab, Options o, Generator.Listener listener,
                       Metrics metrics) {
        this.toFirst = toFirst;
        this.fromLast = fromLast;
        this.chooser = new TokenChooser(listener);
        this.o = o;
        this.metrics = metrics;
        this.vocab = vocab;
        this.wantFlags = o.sampleInLastStage() ? SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE : SequenceTable.WANT_LOGITS;
        int sendCap = FrameHeader.HEADER_LENGTH + 4 * Math.max(o.maxTokensPerFrame(), 4096)
                + FrameHeader.MAX_SEQUENCE_COUNT * FrameHeader.SEQUENCE_ENTRY_LENGTH + FrameHeader.TRACE_LENGTH;
        sendBytes = ByteBuffer.allocateDirect(sendCap).order(ByteOrder.LITTLE_ENDIAN);
        send = new UnsafeBuffer(sendBytes);
        int recvCap = (int) Math.min(o.maxFrameBytes(), FrameSizes.logitsFrameBytes(o.maxSequencesPerFrame(), vocab) + 65536);
        recvBytes = ByteBuffer.allocateDirect(recvCap).order(ByteOrder.LITTLE_ENDIAN);
        recv = new UnsafeBuffer(recvBytes);
        recvFloats = recvBytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        row = new float[vocab];
    }

    /** Decode tokens to leave out of the decode rate (JIT warm-up of the stages); 0 by default. */
    public void setDecodeWarmupTokens(int tokens) {
        this.decodeWarmupTokens = tokens;
    }

    /** When a frame last arrived (for the watchdog's "no answer" bound). */
    public long lastProgressNanos() {
        return lastProgressNanos;
    }

    /** Runs every sequence to its end. Throws {@link PipelineException} when the pipeline breaks. */
    public Result run(List<SequenceState> sequences) {
        long start = System.nanoTime();
        int live = 0;
        for (int k = 0; k < sequences.size(); k++) {
            SequenceState s = sequences.get(k);
            s.started(o.openLoop() ? start + (long) (k * 1e9 / o.ratePerSecond()) : start);
            live += s.finished() ? 0 : 1;
        }
        int m = Math.max(1, Math.min(o.microBatches(), live));
        int perBatch = o.sequencesPerBatch() > 0 ? o.sequencesPerBatch() : Math.max(1, (live + m - 1) / m);
        int perStep = Math.min(o.maxSequencesPerFrame(), FrameHeader.MAX_SEQUENCE_COUNT);
        Scheduler scheduler = newScheduler(new Scheduler.Limits(m, Math.min(perBatch, perStep), o.maxTokensPerFrame(), perStep));
        scheduler.setDecodeWarmupTokens(decodeWarmupTokens);
        for (SequenceState s : sequences) {
            scheduler.submit(s);
        }
        serve(scheduler, () -> true);
        long end = System.nanoTime();
        long decodeStart = scheduler.decodeStartNanos() == 0 ? end : scheduler.decodeStartNanos();
        return new Result(scheduler.chosenTokens(), end - start, scheduler.steps(), scheduler.decodeTokens(), end - decodeStart);
    }

    /**
     * A scheduler whose tokens go to this coordinator's listener and whose latencies to its metrics, for {@link #serve}.
     */
    public Scheduler newScheduler(Scheduler.Limits limits) {
        return new Scheduler(limits, chooser, new Scheduler.Metrics(metrics.ttft(), metrics.tpot(), metrics.request()));
    }

    /**
     * Runs the sequences submitted to {@code scheduler}, before or during the call and from any thread, until
     * {@code stopWhenIdle} says so at a moment when nothing waits, runs or is in flight. Between frames it admits the
     * sequences that are due and sends every micro-batch's next step; with nothing in flight it sleeps until the next
     * sequence is due or one is submitted ({@link Scheduler#submit} wakes this thread), at most
     * {@link #IDLE_WAIT_NANOS} at a time, telling the watchdog it is idle by schedule, not stalled. Throws
     * {@link PipelineException} when the pipeline breaks.
     */
    public void serve(Scheduler scheduler, BooleanSupplier stopWhenIdle) {
        scheduler.wakeOnSubmit(Thread.currentThread());
        Scheduler.Step step = new Scheduler.Step(scheduler.limits());
        int first = 0;
        try {
            while (true) {
                try {
                    scheduler.admit(System.nanoTime(), first);
                    sendEnds(scheduler);   // sequences cancelled meanwhile
                    sendSampling(scheduler);
                    sendReady(scheduler, step, first);
                    if (scheduler.inFlight()) {
                        readFrame();
                        first = handleFrame(scheduler);
                        continue;
                    }
                    first = 0;
                    drainIdle(scheduler);
                    if (!scheduler.busy() && stopWhenIdle.getAsBoolean()) {
                        return;
                    }
                    awaitAdmission(Math.min(scheduler.nextDueNanos(), System.nanoTime() + IDLE_WAIT_NANOS));
                } catch (IOException | PipelineException e) {
                    recover(scheduler, e);
                    first = 0;
                }
            }
        } finally {
            scheduler.wakeOnSubmit(null);
        }
    }

    /** Replaces a broken pipeline: given new links to stages that hold no KV cache, or throws when it gives up. */
    public interface Recovery {
        PipelineLinks.Links recover(String cause);
    }

    /** What replaces a broken pipeline (null, the default: a broken pipeline ends the run). */
    public void setRecovery(Recovery recovery) {
        this.recovery = recovery;
    }

    /** Pipelines replaced so far. */
    public int recoveries() {
        return recoveries;
    }

    /**
     * The pipeline broke ({@code e}): without a recovery, or when it gives up, or when the pipeline broke again with no
     * token chosen since the last recovery (twice), a {@link PipelineException}; otherwise new links, every running
     * sequence rewound to replay its history, and the loop goes on.
     */
    private void recover(Scheduler scheduler, Exception e) {
        PipelineException failure = e instanceof PipelineException p ? p
                : new PipelineException("pipeline connection failed: " + e.getMessage(), e);
        if (recovery == null || failure.fatal()) {
            throw failure;
        }
        if (scheduler.chosenTokens() == tokensAtRecovery && ++fruitless >= 2) {
            throw new PipelineException("the pipeline broke again before any token since the last recovery: "
                    + failure.getMessage(), e);
        }
        if (scheduler.chosenTokens() != tokensAtRecovery) {
            fruitless = 0;
        }
        PipelineLinks.Links links = recovery.recover(failure.getMessage());
        writing.lock();
        try {
            toFirst.closeQuietly();
            fromLast.closeQuietly();
            toFirst = links.toFirst();
            fromLast = links.fromLast();
            long now = System.nanoTime();
            lastWriteNanos = now;
            lastHeardNanos = now;
            lastProgressNanos = now;
        } finally {
            writing.unlock();
        }
        scheduler.rewindAll();
        recoveries++;
        tokensAtRecovery = scheduler.chosenTokens();
    }

    /** Closes both links (the watchdog's way of ending a blocked read or write). */
    public void closeLinks() {
        toFirst.closeQuietly();
        fromLast.closeQuietly();
    }

    /**
     * Acts on the frame in recv: logits to the scheduler, errors to the sequences or the step they name.
     *
     * @return the micro-batch whose step it ended (admission looks there first), else 0
     */
    private int handleFrame(Scheduler scheduler) throws IOException {
        MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(recv, 0));
        long stepId = FrameHeader.stepId(recv, 0);
        int mb = FrameHeader.microBatchId(recv, 0);
        boolean ours = scheduler.inFlight(mb, stepId);
        long now = System.nanoTime();
        switch (type) {
            case LOGITS, SAMPLED -> {
                if (!ours) {
                    throw new PipelineException(type + " for step " + stepId + " of micro-batch " + mb + ", which is not in flight");
                }
                if (type == MessageType.SAMPLED) {
                    acceptAll(scheduler);
                } else {
                    chooseAll(scheduler);
                }
                metrics.stepRoundTrip().record(scheduler.stepDone(mb, System.nanoTime()));
                sendEnds(scheduler);
            }
            case ERROR -> {
                int seqId = ErrorPayload.seqId(recv, 0);
                String msg = ErrorPayload.message(recv, 0);
                if (seqId != ErrorCode.SEQ_ID_NONE) {
                    scheduler.fail(seqId, msg);
                } else if (ours) {
                    metrics.stepRoundTrip().record(scheduler.failStep(mb, msg, now));
                    sendEnds(scheduler);
                } else {
                    throw new PipelineException("the pipeline reported: " + msg);
                }
            }
            case END_SEQUENCE, SHUTDOWN, SAMPLING -> {
                // our own control frames, back from the end of the pipeline
            }
            default -> throw new PipelineException("unexpected " + type + " frame from the last stage");
        }
        return ours ? mb : 0;
    }

    /** Sends the next step of every micro-batch not in flight, from {@code first} on. */
    private void sendReady(Scheduler scheduler, Scheduler.Step step, int first) throws IOException {
        int m = scheduler.limits().microBatches();
        for (int i = 0; i < m; i++) {
            int mb = (first + i) % m;
            long now = System.nanoTime();
            if (scheduler.compose(mb, nextStep, now, step)) {
                nextStep++;
                sendStep(step, now);
            }
        }
    }

    /**
     * Sleeps until {@code dueNanos} or a submission wakes the thread; the pipeline is idle by schedule, not stalled,
     * so the watchdog is kept quiet.
     */
    private void awaitAdmission(long dueNanos) {
        lastProgressNanos = System.nanoTime();
        long left = dueNanos - System.nanoTime();
        if (left > 0) {
            LockSupport.parkNanos(this, left);
        }
        if (Thread.interrupted()) {
            throw PipelineException.fatal("interrupted while waiting to admit the next sequence");
        }
        lastProgressNanos = System.nanoTime();
    }

    /**
     * With nothing in flight: reads whatever the last stage sent meanwhile (heartbeats, our own END_SEQUENCE frames,
     * an ERROR about the pipeline), so that a silent or failing pipeline is noticed while idle too.
     */
    private void drainIdle(Scheduler scheduler) throws IOException {
        while (fromLast.available() > 0) {
            readOne();
            if (FrameHeader.messageTypeCode(recv, 0) != MessageType.HEARTBEAT.code()) {
                handleFrame(scheduler);
            }
        }
    }

    /** Hands every logits row of the frame in recv to the scheduler. */
    private void chooseAll(Scheduler scheduler) {
        int n = FrameHeader.sequenceCount(recv, 0);
        int width = (int) FrameHeader.dim(recv, 0, 1);
        if (FrameHeader.dim(recv, 0, 0) > 0 && width != vocab) {
            throw new PipelineException("logits rows of " + width + " values, expected the vocabulary size " + vocab);
        }
        int payloadIndex = FrameHeader.HEADER_LENGTH / 4;
        int r = 0;
        long now = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (!SequenceTable.wantsLogits(recv, 0, i)) {
                continue;
            }
            int seqId = SequenceTable.seqId(recv, 0, i);
            int rowIndex = r++;
            if (!scheduler.running(seqId)) {
                continue; // failed meanwhile
            }
            recvFloats.get(payloadIndex + rowIndex * vocab, row, 0, vocab);
            scheduler.choose(seqId, row, 0, now);
        }
    }

    /**
     * Hands every token of the SAMPLED frame in recv to the scheduler, with its log-probabilities when the frame has
     * them (rank 2: token, logprob, then top (token, logprob) pairs per row) and its sequence asked for them.
     */
    private void acceptAll(Scheduler scheduler) {
        int n = FrameHeader.sequenceCount(recv, 0);
        int width = FrameHeader.rank(recv, 0) == 2 ? (int) FrameHeader.dim(recv, 0, 1) : 1;
        int payload = FrameHeader.HEADER_LENGTH;
        int r = 0;
        long now = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (SequenceTable.wantsLogits(recv, 0, i)) {
                int at = payload + 4 * width * r++;
                int seqId = SequenceTable.seqId(recv, 0, i);
                int token = recv.getInt(at, FrameHeader.ORDER);
                if (token < 0 || token >= vocab) {
                    throw new PipelineException(fromLast.peer() + " sampled token " + token + " for sequence "
                            + seqId + ", outside the vocabulary of " + vocab);
                }
                TokenLogprobs lp = scheduler.logprobs(seqId);
                if (lp != null) {
                    if (width == 1) {
                        throw new PipelineException(fromLast.peer() + " sampled token " + token + " for sequence " + seqId
                                + " without the log-probabilities it asked for");
                    }
                    lp.set(token, recv.getFloat(at + 4, FrameHeader.ORDER));
                    for (int w = 2; w < width; w += 2) {
                        int id = recv.getInt(at + 4 * w, FrameHeader.ORDER);
                        if (id >= 0 && id < vocab) {
                            lp.setTop(id, recv.getFloat(at + 4 * w + 4, FrameHeader.ORDER));
                        }
                    }
                }
                scheduler.accept(seqId, token, now);
            }
        }
    }

    /**
     * With sampling in the last stage: a SAMPLING frame (settings and random state) for each sequence admitted or
     * rewound since the last one, sent before any step that carries them.
     */
    private void sendSampling(Scheduler scheduler) throws IOException {
        List<SequenceState> todo = scheduler.undescribed();
        if (!o.sampleInLastStage() || todo.isEmpty()) {
            scheduler.clearUndescribed();
            return;
        }
        int perFrame = (send.capacity() - FrameHeader.HEADER_LENGTH) / (4 * FrameValidator.SAMPLING_WORDS);
        for (int from = 0; from < todo.size(); from += perFrame) {
            int count = Math.min(perFrame, todo.size() - from);
            int len = FrameEncoder.encodeSamplingHeader(send, 0, nextStep++, count);
            for (int i = 0; i < count; i++) {
                SequenceState s = todo.get(from + i);
                SamplingConfig c = s.sampler().config();
                FrameEncoder.putSampling(send, 0, i, s.index(), c.temperature(), c.topK(), c.topP(), s.randomState()[0],
                        s.logprobs() == null ? -1 : s.logprobs().top());
            }
            writeToFirst(len);
        }
        scheduler.clearUndescribed();
    }

    /** END_SEQUENCE for the sequences that ended, so that every stage frees their caches. */
    private void sendEnds(Scheduler scheduler) throws IOException {
        if (scheduler.endedCount() == 0) {
            return;
        }
        int len = FrameEncoder.encodeEndSequence(send, 0, nextStep++, 0, scheduler.ended(), 0, scheduler.endedCount());
        writeToFirst(len);
        scheduler.clearEnded();
    }

    /** Sends a composed step as a TOKENS frame, trace-stamped. */
    private void sendStep(Scheduler.Step step, long sentNanos) throws IOException {
        Batch b = step.batch();
        int len = FrameEncoder.encodeTokens(send, 0, step.id(), step.microBatch(), step.tokens(), 0, b.tokens(), b.sequences(),
                FrameHeader.FLAG_TRACE);
        for (int i = 0; i < b.sequences(); i++) {
            FrameEncoder.putSequenceEntry(send, 0, i, b.seqId(i), b.position(i), b.tokenCount(i),
                    b.wantLogits(i) ? wantFlags : 0);
        }
        FrameEncoder.stampTrace(send, 0, sentNanos);
        writeToFirst(len);
    }

    /** Writes the frame in send to the first stage, under the lock that keeps heartbeats out of it. */
    private void writeToFirst(int len) throws IOException {
        writing.lock();
        try {
            writeStartedNanos = System.nanoTime();
            toFirst.write(sendBytes, len);
            lastWriteNanos = System.nanoTime();
        } finally {
            writeStartedNanos = 0;
            writing.unlock();
        }
    }

    /**
     * Writes a HEARTBEAT to the first stage when nothing went to it for {@code intervalNanos} and no frame is being
     * written (watchdog thread), so that it can tell an idle coordinator from a dead one.
     */
    public void heartbeatIfIdle(long now, long intervalNanos) {
        if (now - lastWriteNanos < intervalNanos || !writing.tryLock()) {
            return;
        }
        try {
            toFirst.write(heartbeatBytes, FrameEncoder.encodeHeartbeat(heartbeat, 0, 0, 0));
            lastWriteNanos = now;
        } catch (IOException ignored) {
            // the coordinator thread's next write fails too and reports it
        } finally {
            writing.unlock();
        }
    }

    /**
     * How long the last stage has sent nothing (no frame, no heartbeat) that the coordinator could have read: 0 while
     * it is blocked writing to the first stage (then it reads nothing; {@link #writeStartedNanos} bounds that).
     * Waiting for a frame it reads as they come; idle, it reads what arrived every {@link #IDLE_WAIT_NANOS} at most.
     */
    public long silentNanos(long now) {
        return writeStartedNanos != 0 ? 0 : now - lastHeardNanos;
    }

    /** When the write in progress to the first stage began, or 0 when none is (a write blocked long: stage 0 stopped reading). */
    public long writeStartedNanos() {
        return writeStartedNanos;
    }

    /** Reads the next frame from the last stage into recv, whatever it is. */
    private void readOne() throws IOException {
        int len;
        try {
            len = fromLast.read(recvBytes);
        } catch (FrameFormatException e) {
            throw new PipelineException("malformed frame from " + fromLast.peer() + ": " + e.getMessage(), e);
        }
        if (len == FrameChannel.END_OF_STREAM) {
            throw new IOException(fromLast.peer() + " closed the connection");
        }
        if (len > recvBytes.capacity()) {
            throw new PipelineException(fromLast.peer() + " sent a frame of " + len + " bytes; the coordinator expects at most "
                    + recvBytes.capacity());
        }
        lastHeardNanos = System.nanoTime();
    }

    /** Reads one whole frame from the last stage into recv, skipping heartbeats. */
    private void readFrame() throws IOException {
        do {
            readOne();
        } while (FrameHeader.messageTypeCode(recv, 0) == MessageType.HEARTBEAT.code());
        long now = System.nanoTime();
        lastProgressNanos = now;
        if ((FrameHeader.flags(recv, 0) & FrameHeader.FLAG_TRACE) != 0) {
            metrics.hopIn().record(now - FrameHeader.traceNanos(recv, 0));
        }
    }

    /**
     * Sends SHUTDOWN down the pipeline and waits until it comes back out of the last stage (every stage has
     * then passed it on and stops). The caller bounds the wait with its watchdog.
     */
    public void shutdown() {
        try {
            int len = FrameEncoder.encodeShutdown(send, 0, nextStep++, 0);
            writeToFirst(len);
            while (true) {
                readFrame();
                if (FrameHeader.messageTypeCode(recv, 0) == MessageType.SHUTDOWN.code()) {
                    return;
                }
            }
        } catch (IOException e) {
            throw new PipelineException("shutting the pipeline down: " + e.getMessage(), e);
        }
    }
}
