package io.tnsr.engine.generate;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.kvcache.SequenceException;
import io.tnsr.engine.sampling.Sampler;
import java.util.ArrayList;
import java.util.List;

/**
 * Generates text for several sequences in one process with a whole-model {@link LayerRange}: prompts are
 * prefilled as blocks (several prompts per call when they fit), then every live sequence advances one
 * token per call, all of them in the same batch.
 *
 * <pre>{@code
 * Generator g = new Generator(range, sampler, listener);
 * GenerationStats stats = g.run(sequences);   // sequences: SequenceState, one per prompt
 * }</pre>
 * A sequence that fails (its KV cache ran out) stops with {@link StopReason#ERROR}; the others go on.
 */
public final class Generator {

    /** Told of each token as it is chosen (for streaming) and of each sequence as it ends. */
    public interface Listener {
        void onToken(SequenceState seq, int token);

        default void onFinished(SequenceState seq) {
        }
    }

    /** Timings of one run. */
    public record Stats(long prefillTokens, long prefillNanos, long decodeTokens, long decodeNanos, long wallNanos) {
        public double prefillTokensPerSecond() {
            return prefillNanos == 0 ? 0 : prefillTokens * 1e9 / prefillNanos;
        }

        public double decodeTokensPerSecond() {
            return decodeNanos == 0 ? 0 : decodeTokens * 1e9 / decodeNanos;
        }
    }

    private final LayerRange model;
    private final Sampler sampler;
    private final Listener listener;
    private final Batch batch;
    private final int[] tokens;        // [maxTokens] token ids of the batch's rows
    private final float[] x;           // [maxTokens][dim]
    private final float[] logits;      // [maxSequences][vocab]
    private final SequenceState[] rowSeq; // [maxSequences] which sequence each batch entry is

    public Generator(LayerRange model, Sampler sampler, Listener listener) {
        if (!model.isFirst() || !model.isLast()) {
            throw new IllegalArgumentException("the generator runs a whole model, not layers [" + model.from()
                    + ", " + model.to() + ")");
        }
        this.model = model;
        this.sampler = sampler;
        this.listener = listener;
        this.batch = new Batch(model.maxSequences(), model.maxTokens());
        this.tokens = new int[model.maxTokens()];
        this.x = new float[model.maxTokens() * model.config().dim()];
        this.logits = new float[model.maxSequences() * model.config().vocabSize()];
        this.rowSeq = new SequenceState[model.maxSequences()];
    }

    /** Runs every sequence to its end. */
    public Stats run(List<SequenceState> sequences) {
        long start = System.nanoTime();
        for (SequenceState s : sequences) {
            s.started(start);
        }
        long prefillTokens = 0;
        List<SequenceState> pending = new ArrayList<>();
        for (SequenceState s : sequences) {
            if (!s.finished()) {
                pending.add(s);
            } else {
                listener.onFinished(s);
            }
        }
        // Prefill: pack prompt chunks into calls of at most maxTokens rows.
        int next = 0;
        while (next < pending.size()) {
            batch.clear();
            int rows = 0;
            int n = 0;
            while (next < pending.size() && n < batch.maxSequences() && rows < batch.maxTokens()) {
                SequenceState s = pending.get(next);
                int take = Math.min(s.prefillRemaining(), batch.maxTokens() - rows);
                int pos = s.takePrefill(take, tokens, rows);
                boolean last = s.prefillRemaining() == 0;
                batch.add(s.index(), pos, take, last);
                rowSeq[n++] = s;
                rows += take;
                if (last) {
                    next++;
                }
            }
            prefillTokens += batch.tokens();
            step();
        }
        long prefillEnd = System.nanoTime();
        // Decode: every live sequence feeds back its last token, maxSequences per call.
        long decodeTokens = 0;
        List<SequenceState> live = new ArrayList<>();
        for (SequenceState s : pending) {
            if (!s.finished()) {
                live.add(s);
            }
        }
        while (!live.isEmpty()) {
            for (int from = 0; from < live.size(); from += batch.maxSequences()) {
                batch.clear();
                int n = 0;
                for (int i = from; i < Math.min(live.size(), from + batch.maxSequences()); i++) {
                    SequenceState s = live.get(i);
                    tokens[n] = s.lastToken();
                    batch.add(s.index(), s.nextPosition(), 1, true);
                    rowSeq[n++] = s;
                }
                decodeTokens += batch.tokens();
                step();
            }
            live.removeIf(SequenceState::finished);
        }
        long end = System.nanoTime();
        return new Stats(prefillTokens, prefillEnd - start, decodeTokens, end - prefillEnd, end - start);
    }

    /** Runs the batch (dropping sequences that fail), samples each row that has logits, frees finished caches. */
    private void step() {
        while (batch.sequences() > 0) {
            try {
                model.prepare(batch, tokens, 0);
                break;
            } catch (SequenceException e) {
                int i = batch.indexOf(e.seqId());
                if (i < 0) {
                    throw e;
                }
                SequenceState s = rowSeq[i];
                s.fail(e.getMessage());
                int row = batch.firstRow(i);
                int count = batch.tokenCount(i);
                System.arraycopy(tokens, row + count, tokens, row, batch.tokens() - row - count);
                batch.remove(i);
                System.arraycopy(rowSeq, i + 1, rowSeq, i, batch.sequences() - i);
                model.endSequence(s.index());
                listener.onFinished(s);
            }
        }
        if (batch.sequences() == 0) {
            return;
        }
        model.embed(batch, tokens, 0, x);
        model.forward(batch, x);
        model.logits(batch, x, logits);
        int vocab = model.config().vocabSize();
        int row = 0;
        long now = System.nanoTime();
        for (int i = 0; i < batch.sequences(); i++) {
            if (!batch.wantLogits(i)) {
                continue;
            }
            SequenceState s = rowSeq[i];
            int token = sampler.sample(logits, row * vocab, s.randomState());
            row++;
            int before = s.generatedCount();
            boolean done = s.accept(token, now);
            if (s.generatedCount() > before) { // a stopping EOS/BOS is not part of the text
                listener.onToken(s, token);
            }
            if (done) {
                model.endSequence(s.index());
                listener.onFinished(s);
            }
        }
    }
}
