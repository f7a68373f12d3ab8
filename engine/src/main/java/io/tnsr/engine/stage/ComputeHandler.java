package io.tnsr.engine.stage;

import com.lmax.disruptor.EventHandler;
import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.kvcache.SequenceException;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.sampling.NonFiniteLogitsException;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FramePayload;
import io.tnsr.wire.FrameValidator;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import org.agrona.collections.Int2ObjectHashMap;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * Runs the stage's layers on each frame the inbound thread published, and queues the result in the
 * {@link OutboundBuffer}: TOKENS (first stage) or ACTIVATIONS in, ACTIVATIONS or (last stage) LOGITS out (or SAMPLED:
 * the tokens it chose from them, when the step's entries say SAMPLE and SAMPLING frames said how), with
 * the same step id, micro-batch id and sequence table. Control frames are acted on (END_SEQUENCE frees KV
 * caches) and passed on, so they reach the coordinator in order with the data.
 *
 * <p>A sequence that cannot run here (cache full, context exceeded, unknown) gets an ERROR frame and is
 * dropped from the frame; the others go on. A frame that makes no sense here (wrong type, no sequence table,
 * wrong width) fails its whole micro-batch with an ERROR whose seq id is {@code SEQ_ID_NONE}.
 *
 * <p>Steady state allocates nothing: the batch, the activation and token arrays and the logits are sized once.
 */
final class ComputeHandler implements EventHandler<FrameSlot> {
    private final LayerRange range;
    private final String stageName;
    private final OutboundBuffer out;
    private final OutboundSender sender;
    private final Batch batch;
    private final int[] tokens;      // [maxTokens]
    private final float[] x;         // [maxTokens][dim]
    private final float[] logits;    // [maxSequences][vocab]
    private final int[] sampled;     // [maxSequences] tokens a last stage chose
    private final TokenLogprobs[] sampledLogprobs;   // [maxSequences] their log-probabilities, null where not asked
    /** {@link #sampleRows}: the step wants logits, not tokens. */
    private static final int NOT_SAMPLED = -1;
    /** {@link #sampleRows}: the step was refused (an ERROR frame says why). */
    private static final int REFUSED = -2;
    private int logprobsWidth;       // words per SAMPLED row: 1, or 2 + 2k when a row asked for log-probabilities
    private final Sampler sampler;   // a last stage's scratch for choosing tokens
    /** A last stage: how each sequence of the session is sampled (SAMPLING frames), until it ends. */
    private final Int2ObjectHashMap<SequenceSampling> sampling = new Int2ObjectHashMap<>();
    private final LatencyMetric queueWait;
    private final LatencyMetric compute;
    private final LatencyMetric computePerToken;
    private final AtomicCounter stalls;
    private final AtomicCounter frames;
    private final AtomicCounter computeNanos;
    private final AtomicCounter kvPagesUsed;
    private final long stallThresholdNanos;
    private final java.util.concurrent.atomic.AtomicLong busySinceNanos = new java.util.concurrent.atomic.AtomicLong(); // release writes
    private long idleSince;          // when the previous event was done: the thread was waiting from then on
    private long refusedStep;        // the step and micro-batch of the frame being prepared, for refusals' ERROR frames
    private int refusedMicroBatch;
    private final LayerRange.Refusal refusal;   // an ERROR frame for each sequence prepare refuses
    private volatile int pagesAtShutdown = -1;

    ComputeHandler(LayerRange range, String stageName, OutboundBuffer out, OutboundSender sender, LatencyMetric queueWait,
                   LatencyMetric compute, LatencyMetric computePerToken, Counters counters, long stallThresholdNanos) {
        this.range = range;
        this.stageName = stageName;
        this.out = out;
        this.sender = sender;
        this.batch = new Batch(range.maxSequences(), range.maxTokens());
        this.tokens = new int[range.maxTokens()];
        this.x = new float[range.maxTokens() * range.config().dim()];
        this.logits = range.isLast() ? new float[range.maxSequences() * range.config().vocabSize()] : new float[0];
        this.sampled = new int[range.maxSequences()];
        this.sampledLogprobs = new TokenLogprobs[range.maxSequences()];
        this.sampler = range.isLast() ? new Sampler(SamplingConfig.GREEDY, range.config().vocabSize()) : null;
        this.queueWait = queueWait;
        this.compute = compute;
        this.computePerToken = computePerToken;
        this.refusal = (index, e) -> out.error(refusedStep, refusedMicroBatch, errorCode(e.kind()), e.seqId(),
                stageName + ": " + e.getMessage());
        this.stalls = counters.stalls();
        this.frames = counters.frames();
        this.computeNanos = counters.computeNanos();
        this.kvPagesUsed = counters.kvPagesUsed();
        this.stallThresholdNanos = stallThresholdNanos;
    }

    /**
     * The stage's event counters, which this handler (the compute thread) alone writes; {@code kvPagesUsed} is the KV
     * cache pages held after the last frame (a gauge that a server's {@code /metrics} reads from another process).
     */
    record Counters(AtomicCounter frames, AtomicCounter computeNanos, AtomicCounter stalls, AtomicCounter kvPagesUsed) {
    }

    @Override
    public void onEvent(FrameSlot slot, long sequence, boolean endOfBatch) {
        long pickedUp = System.nanoTime();
        out.reset();
        if (slot.status == FrameSlot.Status.EMPTY) {
            return;
        }
        if (slot.status == FrameSlot.Status.SESSION) {
            // a session begins or ends: the sequences of the previous one are gone with it
            range.cache().releaseAll();
            sampling.clear();
            kvPagesUsed.setRelease(0);
            return;
        }
        busySinceNanos.lazySet(pickedUp);
        frames.incrementRelease();
        queueWait.record(pickedUp - slot.receivedNanos);
        // A stall: the frame arrived while this thread was idle, yet it took longer than the threshold to pick it
        // up (descheduled, GC pause, page fault), as Aeron counts duty cycles that exceed their threshold.
        if (slot.receivedNanos >= idleSince && pickedUp - slot.receivedNanos > stallThresholdNanos) {
            stalls.incrementRelease();
        }
        try {
            handle(slot);
        } catch (RuntimeException e) {
            // A bug, not bad input: report it downstream for this micro-batch and keep serving.
            out.reset();
            out.error(FrameHeader.stepId(slot.buffer, 0), FrameHeader.microBatchId(slot.buffer, 0), ErrorCode.INTERNAL,
                    ErrorCode.SEQ_ID_NONE, stageName + ": internal error: " + e);
            e.printStackTrace();
        }
        kvPagesUsed.setRelease(range.cache().usedPages());
        idleSince = System.nanoTime();
        busySinceNanos.lazySet(0);
        if (endOfBatch) {
            range.rest();   // the ring is empty: the matmul workers leave the cores to other stages and the links
        }
    }

    /** KV cache pages still held when SHUTDOWN reached this stage (every sequence ended: 0), or -1 before it has. */
    int pagesAtShutdown() {
        return pagesAtShutdown;
    }

    /** When the frame being computed was picked up, or 0 when idle (read by the liveness thread for heartbeats). */
    long busySinceNanos() {
        return busySinceNanos.get();
    }

    private void handle(FrameSlot slot) {
        UnsafeBuffer b = slot.buffer;
        long step = FrameHeader.stepId(b, 0);
        int mb = FrameHeader.microBatchId(b, 0);
        if (slot.status == FrameSlot.Status.TOO_LARGE) {
            out.error(step, mb, ErrorCode.BATCH_TOO_LARGE, ErrorCode.SEQ_ID_NONE, stageName + ": a frame of "
                    + slot.frameLength + " bytes does not fit this stage's ring slots of " + slot.capacity()
                    + " bytes (max_tokens_per_frame too small for this micro-batch?)");
            return;
        }
        MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(b, 0));
        switch (type) {
            case TOKENS, ACTIVATIONS -> runLayers(slot, type, step, mb);
            case END_SEQUENCE -> {
                int n = (int) FrameHeader.dim(b, 0, 0);
                for (int i = 0; i < n; i++) {
                    int seqId = FramePayload.u32(b, 0, i);
                    range.endSequence(seqId);
                    sampling.remove(seqId);
                }
                out.forward(b, 0, slot.length);
            }
            case SAMPLING -> {
                if (range.isLast()) {
                    keepSampling(b, step, mb);
                }
                out.forward(b, 0, slot.length);
            }
            case SHUTDOWN -> {
                pagesAtShutdown = range.cache().usedPages();   // 0 unless a sequence was never ended
                out.forward(b, 0, slot.length);
                sender.shutdownQueued = true;
            }
            case ERROR -> out.forward(b, 0, slot.length);
            default -> out.error(step, mb, ErrorCode.UNEXPECTED_MESSAGE, ErrorCode.SEQ_ID_NONE,
                    stageName + ": unexpected " + type + " frame in the data stream");
        }
    }

    private void runLayers(FrameSlot slot, MessageType type, long step, int mb) {
        UnsafeBuffer b = slot.buffer;
        int dim = range.config().dim();
        int n = FrameHeader.sequenceCount(b, 0);
        if (type == MessageType.TOKENS != range.isFirst()) {
            out.error(step, mb, ErrorCode.UNEXPECTED_MESSAGE, ErrorCode.SEQ_ID_NONE, stageName + " holds layers ["
                    + range.from() + ", " + range.to() + ") and takes " + (range.isFirst() ? "TOKENS" : "ACTIVATIONS")
                    + ", not " + type);
            return;
        }
        if (n == 0) {
            out.error(step, mb, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE,
                    stageName + ": a " + type + " frame needs a sequence table (which rows belong to which sequence)");
            return;
        }
        int rows = (int) FrameHeader.dim(b, 0, 0);
        if (type == MessageType.ACTIVATIONS && (FrameHeader.rank(b, 0) != 2 || FrameHeader.dim(b, 0, 1) != dim)) {
            out.error(step, mb, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE, stageName + ": activations of shape "
                    + shape(b) + " do not match this model's hidden size " + dim);
            return;
        }
        if (rows > range.maxTokens() || n > range.maxSequences()) {
            out.error(step, mb, ErrorCode.BATCH_TOO_LARGE, ErrorCode.SEQ_ID_NONE, stageName + ": " + rows + " rows of "
                    + n + " sequences exceed this stage's limit of " + range.maxTokens() + " / " + range.maxSequences());
            return;
        }
        batch.clear();
        for (int i = 0; i < n; i++) {
            batch.add(SequenceTable.seqId(b, 0, i), SequenceTable.position(b, 0, i), SequenceTable.nTokens(b, 0, i),
                    SequenceTable.wantsLogits(b, 0, i), SequenceTable.wantsSample(b, 0, i));
        }
        int payloadIndex = FramePayload.offset(0) / 4;
        if (type == MessageType.TOKENS) {
            slot.ints.get(payloadIndex, tokens, 0, rows);
        } else {
            slot.floats.get(payloadIndex, x, 0, rows * dim);
        }
        refusedStep = step;
        refusedMicroBatch = mb;
        range.prepareDropping(batch, type == MessageType.TOKENS ? tokens : null, type == MessageType.TOKENS ? null : x, refusal);

        long t0 = System.nanoTime();
        if (batch.sequences() > 0) {
            if (range.isFirst()) {
                range.embed(batch, tokens, 0, x);
            }
            range.forward(batch, x);
        }
        int outRows;
        int width;
        MessageType outType;
        if (range.isLast()) {
            outRows = batch.sequences() > 0 ? range.logits(batch, x, logits) : 0;
            width = range.config().vocabSize();
            outType = MessageType.LOGITS;
            int sampledRows = sampleRows(step, mb);
            if (sampledRows == REFUSED) {
                return;   // the ERROR frame says why
            }
            if (sampledRows != NOT_SAMPLED) {
                outType = MessageType.SAMPLED;
                width = logprobsWidth;
                outRows = sampledRows;   // rows whose logits could not be sampled left with their sequences
            }
        } else {
            outRows = batch.tokens();
            width = dim;
            outType = MessageType.ACTIVATIONS;
        }
        long t1 = System.nanoTime();
        long took = t1 - t0;
        computeNanos.getAndAddRelease(took);
        compute.record(took);
        if (batch.tokens() > 0) {
            computePerToken.record(took / batch.tokens());
        }
        encodeResult(outType, step, mb, outRows, width);
    }

    private void encodeResult(MessageType outType, long step, int mb, int rows, int width) {
        int payloadBytes = rows * width * 4;
        if (outType == MessageType.SAMPLED && width == 1) {
            FrameEncoder.encodeHeader(out.data, 0, outType, step, mb, FrameHeader.FLAG_TRACE, batch.sequences(), 1,
                    rows, 0, 0, 0, payloadBytes);
            for (int r = 0; r < rows; r++) {
                out.data.putInt(FrameHeader.HEADER_LENGTH + 4 * r, sampled[r], FrameHeader.ORDER);
            }
        } else if (outType == MessageType.SAMPLED) {
            FrameEncoder.encodeHeader(out.data, 0, outType, step, mb, FrameHeader.FLAG_TRACE, batch.sequences(), 2,
                    rows, width, 0, 0, payloadBytes);
            for (int r = 0; r < rows; r++) {
                putSampledRow(FrameHeader.HEADER_LENGTH + 4 * width * r, width, sampled[r], sampledLogprobs[r]);
            }
        } else {
            FrameEncoder.encodeHeader(out.data, 0, outType, step, mb, FrameHeader.FLAG_TRACE, batch.sequences(), 2,
                    rows, width, 0, 0, payloadBytes);
            out.dataFloats.put(FrameHeader.HEADER_LENGTH / 4, range.isLast() ? logits : x, 0, rows * width);
        }
        for (int i = 0; i < batch.sequences(); i++) {
            FrameEncoder.putSequenceEntry(out.data, 0, i, batch.seqId(i), batch.position(i), batch.tokenCount(i),
                    batch.wantLogits(i) ? batch.sample(i) ? SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE
                            : SequenceTable.WANT_LOGITS : 0);
        }
        out.dataTraced = true;
        out.dataLength = (int) FrameHeader.frameLength(payloadBytes, batch.sequences(), FrameHeader.FLAG_TRACE);
    }

    /** A SAMPLED row with log-probabilities: token, its logprob, then (token, logprob) pairs; 0xFFFFFFFF, 0 pad it. */
    private void putSampledRow(int at, int width, int token, TokenLogprobs lp) {
        out.data.putInt(at, token, FrameHeader.ORDER);
        out.data.putFloat(at + 4, lp == null ? 0f : lp.logprob(), FrameHeader.ORDER);
        int count = lp == null ? 0 : lp.count();
        for (int k = 0, w = 2; w < width; k++, w += 2) {
            out.data.putInt(at + 4 * w, k < count ? lp.topId(k) : -1, FrameHeader.ORDER);
            out.data.putFloat(at + 4 * w + 4, k < count ? lp.topLogprob(k) : 0f, FrameHeader.ORDER);
        }
    }

    /**
     * How a last stage samples one sequence: its settings, its random state (advanced by each token chosen) and, when
     * asked for, the log-probabilities of the token last chosen.
     */
    private static final class SequenceSampling {
        final SamplingConfig config;
        final long[] state = new long[1];
        final TokenLogprobs logprobs;

        SequenceSampling(SamplingConfig config, long state, int logprobs) {
            this.config = config;
            this.state[0] = state;
            this.logprobs = logprobs < 0 ? null : new TokenLogprobs(logprobs);
        }
    }

    /** Keeps the rows of a SAMPLING frame; a row that makes no sense fails its sequence with an ERROR frame. */
    private void keepSampling(UnsafeBuffer b, long step, int mb) {
        int n = (int) FrameHeader.dim(b, 0, 0);
        for (int i = 0; i < n; i++) {
            int at = FrameHeader.HEADER_LENGTH + 4 * FrameValidator.SAMPLING_WORDS * i;
            int seqId = b.getInt(at, FrameHeader.ORDER);
            float temperature = b.getFloat(at + 4, FrameHeader.ORDER);
            int topK = b.getInt(at + 8, FrameHeader.ORDER);
            float topP = b.getFloat(at + 12, FrameHeader.ORDER);
            long state = b.getLong(at + 16, FrameHeader.ORDER);
            int logprobs = b.getInt(at + 24, FrameHeader.ORDER);
            try {
                if (logprobs < -1 || logprobs > TokenLogprobs.MAX_TOP) {
                    throw new IllegalArgumentException("logprobs must be -1 (none) or 0 to " + TokenLogprobs.MAX_TOP
                            + " top tokens, got " + logprobs);
                }
                sampling.put(seqId, new SequenceSampling(new SamplingConfig(temperature, topK, topP, 0), state, logprobs));
            } catch (IllegalArgumentException e) {
                out.error(step, mb, ErrorCode.MALFORMED_FRAME, seqId, stageName + ": SAMPLING for sequence " + seqId + ": "
                        + e.getMessage());
            }
        }
    }

    /**
     * When the step's entries ask for it (SAMPLE), chooses each next token from its logits row into {@link #sampled}.
     * A step that mixes sampled and plain logits rows, or samples a sequence no SAMPLING frame described, is refused
     * with an ERROR for the whole micro-batch (no token is drawn from a made-up state). A row no token can be chosen
     * from (NaN or infinite logits) fails its sequence alone: an ERROR {@code NON_FINITE_LOGITS} for it, its row and
     * entry leave the step, its cache here is freed.
     *
     * @return rows sampled (0 when every one failed), {@link #NOT_SAMPLED} when the step wants plain logits,
     *         {@link #REFUSED} when refused
     */
    private int sampleRows(long step, int mb) {
        int sample = 0;
        int rows = 0;
        for (int i = 0; i < batch.sequences(); i++) {
            if (batch.wantLogits(i)) {
                rows++;
                sample += batch.sample(i) ? 1 : 0;
            }
        }
        if (sample == 0) {
            return NOT_SAMPLED;
        }
        if (sample != rows) {
            out.error(step, mb, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE, stageName + ": a step mixes " + sample
                    + " sampled rows with " + (rows - sample) + " logits rows");
            return REFUSED;
        }
        for (int i = 0; i < batch.sequences(); i++) {
            if (batch.wantLogits(i) && !sampling.containsKey(batch.seqId(i))) {
                out.error(step, mb, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE, stageName + ": sequence "
                        + batch.seqId(i) + " is to be sampled here but no SAMPLING frame said how");
                return REFUSED;
            }
        }
        int r = 0;
        int vocab = range.config().vocabSize();
        logprobsWidth = 1;
        for (int i = 0; i < batch.sequences(); ) {
            if (!batch.wantLogits(i)) {
                i++;
                continue;
            }
            int seqId = batch.seqId(i);
            SequenceSampling s = sampling.get(seqId);
            try {
                sampled[r] = sampler.sample(s.config, logits, r * vocab, s.state);
            } catch (NonFiniteLogitsException e) {
                // This sequence fails alone: an ERROR for it, then the frame goes on without its row and entry.
                out.error(step, mb, ErrorCode.NON_FINITE_LOGITS, seqId, stageName + ": sequence " + seqId
                        + " at position " + (batch.position(i) + batch.tokenCount(i) - 1) + ": " + e.getMessage());
                System.arraycopy(logits, (r + 1) * vocab, logits, r * vocab, (batch.logitRows() - r - 1) * vocab);
                batch.remove(i);
                range.endSequence(seqId);
                sampling.remove(seqId);
                continue;
            }
            sampledLogprobs[r] = s.logprobs;
            if (s.logprobs != null) {
                s.logprobs.compute(logits, r * vocab, vocab, sampled[r]);
                logprobsWidth = Math.max(logprobsWidth, 2 + 2 * s.logprobs.count());
            }
            r++;
            i++;
        }
        return r;
    }

    private static String shape(UnsafeBuffer b) {
        StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < FrameHeader.rank(b, 0); i++) {
            sb.append(i == 0 ? "" : ", ").append(FrameHeader.dim(b, 0, i));
        }
        return sb.append(']').toString();
    }

    static ErrorCode errorCode(SequenceException.Kind kind) {
        return switch (kind) {
            case OUT_OF_KV_CACHE -> ErrorCode.OUT_OF_KV_CACHE;
            case CONTEXT_OVERFLOW -> ErrorCode.CONTEXT_OVERFLOW;
            case UNKNOWN_SEQUENCE -> ErrorCode.UNKNOWN_SEQUENCE;
            case BATCH_TOO_LARGE -> ErrorCode.BATCH_TOO_LARGE;
            case BAD_TOKEN -> ErrorCode.MALFORMED_FRAME;
        };
    }
}
