package io.tnsr.engine.coordinator;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.net.FrameIo;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.ErrorPayload;
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
import java.nio.channels.SocketChannel;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Drives the autoregressive ring: sends token frames to the first stage, reads logits from the last, samples,
 * and sends each new token back, keeping up to M micro-batches in flight so that while the last stage works
 * on micro-batch 0 the first works on micro-batch 1, and so on.
 *
 * <p>Each micro-batch has at most one frame in the pipeline at a time; frames come back in the order they were
 * sent (every stage is FIFO). A micro-batch carries up to B sequences; a sequence that finishes leaves its
 * micro-batch (an END_SEQUENCE frame frees its KV cache in every stage) and a waiting one joins, its prompt
 * prefilled in chunks alongside the others' decode tokens.
 *
 * <p>One thread; every wait is bounded by the caller's watchdog, which closes the channels (and so fails the
 * blocking read or write here) when a stage dies or stops answering.
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
     */
    public record Options(int microBatches, int sequencesPerBatch, int maxTokensPerFrame, int maxSequencesPerFrame,
                          int maxFrameBytes, double ratePerSecond) {
        public Options {
            if (microBatches < 1) {
                throw new IllegalArgumentException("--micro-batches must be >= 1, got " + microBatches);
            }
            if (!(ratePerSecond >= 0) || Double.isInfinite(ratePerSecond)) {
                throw new IllegalArgumentException("--rate must be a positive number of sequences per second, got " + ratePerSecond);
            }
        }

        /** Closed loop. */
        public Options(int microBatches, int sequencesPerBatch, int maxTokensPerFrame, int maxSequencesPerFrame,
                       int maxFrameBytes) {
            this(microBatches, sequencesPerBatch, maxTokensPerFrame, maxSequencesPerFrame, maxFrameBytes, 0);
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

    private static final class MicroBatch {
        final int id;
        final List<SequenceState> members = new ArrayList<>();
        long inFlightStep = -1;
        long sentNanos;

        MicroBatch(int id) {
            this.id = id;
        }
    }

    private final SocketChannel toFirst;
    private final SocketChannel fromLast;
    private final Sampler sampler;
    private final Options o;
    private final Generator.Listener listener;
    private final Metrics metrics;
    private final int vocab;
    private final ByteBuffer sendBytes;   // [one TOKENS frame or one END_SEQUENCE frame]
    private final UnsafeBuffer send;
    private final ByteBuffer recvBytes;   // [one LOGITS frame]
    private final UnsafeBuffer recv;
    private final FloatBuffer recvFloats;
    private final float[] row;            // [vocab] one row of logits
    private final int[] tokens;           // [maxTokensPerFrame]
    private final int[] entryScratch = new int[FrameHeader.MAX_SEQUENCE_COUNT * 4]; // [entries][seq, pos, n, flags]
    private final int[] endIds;           // [max sequences] ids to END
    private int endCount;
    private final Int2ObjectHashMap<SequenceState> byId = new Int2ObjectHashMap<>();
    private final Int2ObjectHashMap<MicroBatch> batchOf = new Int2ObjectHashMap<>();
    private long nextStep = 1;
    private long streamOffset;
    private long frameIndex;
    private volatile long lastProgressNanos = System.nanoTime();
    private int decodeWarmupTokens;
    private long decodeTokensSeen;   // decode tokens chosen so far, warm-up included
    private long decodeStartNanos;   // when the warm-up ended
    private long firstDecodeNanos;   // when the first decode step was sent

    public Coordinator(SocketChannel toFirst, SocketChannel fromLast, int vocab, Sampler sampler, Options o,
                       Generator.Listener listener, Metrics metrics) {
        this.toFirst = toFirst;
        this.fromLast = fromLast;
        this.sampler = sampler;
        this.o = o;
        this.listener = listener;
        this.metrics = metrics;
        this.vocab = vocab;
        int sendCap = FrameHeader.HEADER_LENGTH + 4 * Math.max(o.maxTokensPerFrame(), 4096)
                + FrameHeader.MAX_SEQUENCE_COUNT * FrameHeader.SEQUENCE_ENTRY_LENGTH + FrameHeader.TRACE_LENGTH;
        sendBytes = ByteBuffer.allocateDirect(sendCap).order(ByteOrder.LITTLE_ENDIAN);
        send = new UnsafeBuffer(sendBytes);
        int recvCap = Math.min(o.maxFrameBytes(), FrameHeader.HEADER_LENGTH + o.maxSequencesPerFrame() * vocab * 4
                + FrameHeader.MAX_SEQUENCE_COUNT * FrameHeader.SEQUENCE_ENTRY_LENGTH + FrameHeader.TRACE_LENGTH + 65536);
        recvBytes = ByteBuffer.allocateDirect(recvCap).order(ByteOrder.LITTLE_ENDIAN);
        recv = new UnsafeBuffer(recvBytes);
        recvFloats = recvBytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        row = new float[vocab];
        tokens = new int[o.maxTokensPerFrame()];
        endIds = new int[4096];
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
        ArrayDeque<SequenceState> waiting = new ArrayDeque<>();
        for (int k = 0; k < sequences.size(); k++) {
            SequenceState s = sequences.get(k);
            s.started(o.openLoop() ? start + (long) (k * 1e9 / o.ratePerSecond()) : start);
            if (s.finished()) {
                listener.onFinished(s);
            } else {
                waiting.add(s);
                byId.put(s.index(), s);
            }
        }
        int m = Math.max(1, Math.min(o.microBatches(), waiting.size()));
        int perBatch = o.sequencesPerBatch() > 0 ? o.sequencesPerBatch() : (waiting.size() + m - 1) / m;
        perBatch = Math.max(1, Math.min(perBatch, Math.min(o.maxSequencesPerFrame(), FrameHeader.MAX_SEQUENCE_COUNT)));
        MicroBatch[] batches = new MicroBatch[m];
        for (int i = 0; i < m; i++) {
            batches[i] = new MicroBatch(i);
        }
        // Round-robin, so the first M sequences start at once in M different micro-batches.
        for (int k = 0; due(waiting) && k < m * perBatch; k++) {
            join(batches[k % m], waiting.pollFirst());
        }
        long generated = 0;
        long steps = 0;
        try {
            for (MicroBatch b : batches) {
                sendStep(b);
            }
            while (inFlight(batches) || !waiting.isEmpty()) {
                if (!inFlight(batches)) {
                    // Open loop, pipeline idle: no frame will come back to end a read, so sleep until the next is due.
                    awaitAdmission(waiting.peekFirst().intendedStartNanos());
                    admit(batches, 0, waiting, perBatch);
                    continue;
                }
                readFrame();
                MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(recv, 0));
                long step = FrameHeader.stepId(recv, 0);
                int mbId = FrameHeader.microBatchId(recv, 0);
                MicroBatch b = mbId >= 0 && mbId < m && batches[mbId].inFlightStep == step ? batches[mbId] : null;
                switch (type) {
                    case LOGITS -> {
                        if (b == null) {
                            throw new PipelineException("logits for step " + step + " of micro-batch " + mbId
                                    + ", which is not in flight");
                        }
                        generated += sampleAll(b);
                        steps++;
                        completeStep(b);
                    }
                    case ERROR -> {
                        int seqId = ErrorPayload.seqId(recv, 0);
                        String msg = ErrorPayload.message(recv, 0);
                        if (seqId != ErrorCode.SEQ_ID_NONE) {
                            SequenceState s = byId.get(seqId);
                            if (s != null && !s.finished()) {
                                fail(s, msg);
                            }
                        } else if (b != null) {
                            for (SequenceState s : new ArrayList<>(b.members)) {
                                fail(s, msg);
                            }
                            completeStep(b);
                        } else {
                            throw new PipelineException("the pipeline reported: " + msg);
                        }
                    }
                    case END_SEQUENCE, SHUTDOWN -> {
                        // our own control frames, back from the end of the pipeline
                    }
                    default -> throw new PipelineException("unexpected " + type + " frame from the last stage");
                }
                admit(batches, b == null ? 0 : b.id, waiting, perBatch);
            }
        } catch (IOException e) {
            throw new PipelineException("pipeline connection failed: " + e.getMessage(), e);
        }
        long end = System.nanoTime();
        if (decodeWarmupTokens == 0) {
            decodeStartNanos = firstDecodeNanos;
        }
        long decodeStart = decodeStartNanos == 0 ? end : decodeStartNanos;
        return new Result(generated, end - start, steps, Math.max(0, decodeTokensSeen - decodeWarmupTokens), end - decodeStart);
    }

    private static boolean inFlight(MicroBatch[] batches) {
        for (MicroBatch b : batches) {
            if (b.inFlightStep >= 0) {
                return true;
            }
        }
        return false;
    }

    /** Whether the first waiting sequence is due (always, in a closed loop). */
    private static boolean due(ArrayDeque<SequenceState> waiting) {
        return !waiting.isEmpty() && waiting.peekFirst().intendedStartNanos() - System.nanoTime() <= 0;
    }

    /** Sleeps until {@code dueNanos}; the pipeline is idle by schedule, not stalled, so the watchdog is kept quiet. */
    private void awaitAdmission(long dueNanos) {
        long left;
        while ((left = dueNanos - System.nanoTime()) > 0) {
            lastProgressNanos = System.nanoTime();
            LockSupport.parkNanos(Math.min(left, 50_000_000L));
            if (Thread.interrupted()) {
                throw new PipelineException("interrupted while waiting to admit the next sequence");
            }
        }
        lastProgressNanos = System.nanoTime();
    }

    /**
     * Joins the due waiting sequences (all of them in a closed loop) to the micro-batches not in flight, each to the
     * one with the fewest members (scanning from {@code first}) up to perBatch, then sends the next frame of every
     * micro-batch not in flight. In a closed loop only the micro-batch that just came back can take sequences.
     */
    private void admit(MicroBatch[] batches, int first, ArrayDeque<SequenceState> waiting, int perBatch) throws IOException {
        int m = batches.length;
        while (due(waiting)) {
            MicroBatch best = null;
            for (int i = 0; i < m; i++) {
                MicroBatch c = batches[(first + i) % m];
                if (c.inFlightStep < 0 && c.members.size() < perBatch && (best == null || c.members.size() < best.members.size())) {
                    best = c;
                }
            }
            if (best == null) {
                break;
            }
            join(best, waiting.pollFirst());
        }
        for (int i = 0; i < m; i++) {
            MicroBatch c = batches[(first + i) % m];
            if (c.inFlightStep < 0) {
                sendStep(c);
            }
        }
    }

    private void join(MicroBatch b, SequenceState s) {
        s.admitted(System.nanoTime());
        b.members.add(s);
        batchOf.put(s.index(), b);
    }

    private void leave(SequenceState s) {
        MicroBatch b = batchOf.remove(s.index());
        if (b != null) {
            b.members.remove(s);
        }
        endIds[endCount++] = s.index();
    }

    private void fail(SequenceState s, String message) {
        s.fail(message);
        leave(s);
        listener.onFinished(s);
        metrics.request().record(s.elapsedNanos());
    }

    /** Samples every logits row of the frame in recv; returns the tokens kept. */
    private int sampleAll(MicroBatch b) {
        int n = FrameHeader.sequenceCount(recv, 0);
        int width = (int) FrameHeader.dim(recv, 0, 1);
        if (FrameHeader.dim(recv, 0, 0) > 0 && width != vocab) {
            throw new PipelineException("logits rows of " + width + " values, expected the vocabulary size " + vocab);
        }
        int payloadIndex = FrameHeader.HEADER_LENGTH / 4;
        int r = 0;
        int kept = 0;
        long now = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (!SequenceTable.wantsLogits(recv, 0, i)) {
                continue;
            }
            SequenceState s = byId.get(SequenceTable.seqId(recv, 0, i));
            int rowIndex = r++;
            if (s == null || s.finished()) {
                continue; // failed meanwhile
            }
            recvFloats.get(payloadIndex + rowIndex * vocab, row, 0, vocab);
            int token = sampler.sample(row, 0, s.randomState());
            int before = s.generatedCount();
            boolean done = s.accept(token, now);
            if (s.generatedCount() > before) {
                kept++;
                listener.onToken(s, token);
                if (before > 0) {
                    if (decodeTokensSeen++ == 0) {
                        firstDecodeNanos = b.sentNanos; // the frame that carried the first decode step
                    }
                    if (decodeTokensSeen == decodeWarmupTokens) {
                        decodeStartNanos = now;
                    }
                }
            }
            if (before == 0) { // the first token chosen for this sequence, kept or not
                metrics.ttft().record(s.timeToFirstTokenNanos());
            }
            if (done) {
                leave(s);
                listener.onFinished(s);
                metrics.request().record(s.elapsedNanos());
                if (s.generatedCount() > 1) {
                    metrics.tpot().record((s.elapsedNanos() - s.timeToFirstTokenNanos()) / (s.generatedCount() - 1));
                }
            }
        }
        return kept;
    }

    /** The step of b is done: END finished sequences ({@link #admit} then refills b and sends its next step). */
    private void completeStep(MicroBatch b) throws IOException {
        metrics.stepRoundTrip().record(System.nanoTime() - b.sentNanos);
        b.inFlightStep = -1;
        sendEnds();
    }

    private void sendEnds() throws IOException {
        if (endCount == 0) {
            return;
        }
        int len = FrameEncoder.encodeEndSequence(send, 0, nextStep++, 0, endIds, 0, endCount);
        FrameIo.writeFully(toFirst, sendBytes, 0, len);
        endCount = 0;
    }

    /** Sends b's next frame: decode tokens of its running members, then prompt chunks, within the frame budget. */
    private void sendStep(MicroBatch b) throws IOException {
        if (b.members.isEmpty()) {
            return;
        }
        int rows = 0;
        int entries = 0;
        int budget = o.maxTokensPerFrame();
        // The table follows the payload in the frame, so the entries are collected first: (seq, pos, n, flags).
        int[] seqIds = entryScratch;
        for (int pass = 0; pass < 2; pass++) {
            for (SequenceState s : b.members) {
                boolean prefilling = s.prefillRemaining() > 0;
                if (prefilling != (pass == 1) || rows >= budget || entries == FrameHeader.MAX_SEQUENCE_COUNT) {
                    continue;
                }
                int pos;
                int n;
                boolean wantLogits;
                if (prefilling) {
                    n = Math.min(s.prefillRemaining(), budget - rows);
                    pos = s.takePrefill(n, tokens, rows);
                    wantLogits = s.prefillRemaining() == 0;
                } else {
                    n = 1;
                    tokens[rows] = s.lastToken();
                    pos = s.nextPosition();
                    wantLogits = true;
                }
                seqIds[entries * 4] = s.index();
                seqIds[entries * 4 + 1] = pos;
                seqIds[entries * 4 + 2] = n;
                seqIds[entries * 4 + 3] = wantLogits ? SequenceTable.WANT_LOGITS : 0;
                entries++;
                rows += n;
            }
        }
        long step = nextStep++;
        int len = FrameEncoder.encodeTokens(send, 0, step, b.id, tokens, 0, rows, entries, FrameHeader.FLAG_TRACE);
        for (int i = 0; i < entries; i++) {
            FrameEncoder.putSequenceEntry(send, 0, i, seqIds[i * 4], seqIds[i * 4 + 1], seqIds[i * 4 + 2], seqIds[i * 4 + 3]);
        }
        b.inFlightStep = step;
        b.sentNanos = System.nanoTime();
        FrameEncoder.stampTrace(send, 0, b.sentNanos);
        FrameIo.writeFully(toFirst, sendBytes, 0, len);
    }

    /** Reads one whole frame from the last stage into recv. */
    private void readFrame() throws IOException {
        if (!FrameIo.readFully(fromLast, recvBytes, 0, FrameHeader.HEADER_LENGTH)) {
            throw new IOException("the last stage closed the connection");
        }
        try {
            int len = FrameValidator.validateHeader(recv, 0, streamOffset, frameIndex, recvBytes.capacity());
            FrameIo.readFully(fromLast, recvBytes, FrameHeader.HEADER_LENGTH, len - FrameHeader.HEADER_LENGTH);
            FrameValidator.validateTrailer(recv, 0, streamOffset, frameIndex);
            long now = System.nanoTime();
            lastProgressNanos = now;
            if ((FrameHeader.flags(recv, 0) & FrameHeader.FLAG_TRACE) != 0) {
                metrics.hopIn().record(now - FrameHeader.traceNanos(recv, 0));
            }
            streamOffset += len;
            frameIndex++;
        } catch (FrameFormatException e) {
            throw new PipelineException("malformed frame from the last stage: " + e.getMessage(), e);
        }
    }

    /**
     * Sends SHUTDOWN down the pipeline and waits until it comes back out of the last stage (every stage has
     * then passed it on and stops). The caller bounds the wait with its watchdog.
     */
    public void shutdown() {
        try {
            int len = FrameEncoder.encodeShutdown(send, 0, nextStep++, 0);
            FrameIo.writeFully(toFirst, sendBytes, 0, len);
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
