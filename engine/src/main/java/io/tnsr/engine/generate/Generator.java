package io.tnsr.engine.generate;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.kvcache.SequenceException;
import java.util.ArrayList;
import java.util.List;

/**
 * Generates text for several sequences in one process with a whole-model {@link LayerRange}: prompts are
 * prefilled as blocks (several prompts per call when they fit), then every live sequence advances one
 * token per call, all of them in the same batch. Tokens are chosen by the {@link TokenChooser}, as in a pipeline.
 *
 * <pre>{@code
 * Generator g = new Generator(range, listener);
 * Generator.Stats stats = g.run(sequences);   // sequences: SequenceState, one per prompt
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
    private final TokenChooser chooser;
    private final Batch batch;
    private final int[] tokens;        // [maxTokens] token ids of the batch's rows
    private final float[] x;           // [maxTokens][dim]
    private final float[] logits;      // [maxSequences][vocab]
    private final SequenceState[] rowSeq; // [maxSequences] which sequence each batch entry is
    private final LayerRange.Refusal refusal = this::refused;

    public Generator(LayerRange model, Listener listener) {
        if (!model.isFirst() || !model.isLast()) {
            throw new IllegalArgumentException("the generator runs a whole model, not layers [" + model.from()
                    + ", " + model.to() + ")");
        }
        this.model = model;
        this.chooser = new TokenChooser(listener);
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
                chooser.finished(s);
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

    /** Runs the batch (dropping sequences that fail), chooses a token for each row that has logits, frees finished caches. */
    private void step() {
        model.prepareDropping(batch, tokens, null, refusal);
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
            if ((chooser.choose(s, logits, row++ * vocab, now) & TokenChooser.DONE) != 0) {
                model.endSequence(s.index());
                chooser.finished(s);
            }
        }
    }

    /** A sequence the model cannot run: it fails, and leaves the batch's sequence list. */
    private void refused(int index, SequenceException e) {
        SequenceState s = rowSeq[index];
        s.fail(e.getMessage());
        System.arraycopy(rowSeq, index + 1, rowSeq, index, batch.sequences() - index - 1);
        chooser.finished(s);
    }
}
