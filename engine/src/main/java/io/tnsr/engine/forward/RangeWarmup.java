package io.tnsr.engine.forward;

import io.tnsr.engine.kvcache.SequenceException;
import java.lang.management.ManagementFactory;
import java.util.Arrays;

/**
 * Runs a layer range over scratch sequences until the JIT has compiled its kernels, so that the first requests a
 * stage serves run at its steady-state speed. A fresh JVM interprets the Vector API kernels, then runs C1's code
 * of them (a box per vector operation), and only then C2's: without a warm-up, the first token through a
 * stories110M Q4_0 stage took over a second and the next fifty ran about a third slower than later ones.
 *
 * <p>One round, each part only as far as the range's frame limits allow:
 * <pre>{@code
 * prompt:   one sequence, up to 37 tokens at positions 0..          (matrix-matrix kernels, attention over a block)
 * decode:   4 one-token steps of that sequence                      (matrix-vector kernels)
 * batched:  2, 7, 9, 11, then 21 sequences, one token each          (batched decode)
 * logits:   after each part, where the range ends the model         (final norm and classifier)
 * end:      every scratch sequence's KV cache freed
 * }</pre>
 * The prompt is longer than 32 tokens because the matrix-matrix kernels change with the token count: F32 and BF16
 * take groups of twelve tokens above 16, the int8 panels (Q8_0, Q6_K, ...) their widened path above 32. A kernel the
 * warm-up never ran is still JIT-cold at the first prompt that needs it: with a 16-token warm-up prompt, the first
 * frame of sixteen prompts through a stories110M-shape F32 stage took 0.53-0.55 s, with this one 0.26-0.33 s.
 * The token counts also give every kernel's last token group each tail it branches on: 37 is three twelves and one
 * (the widened paths' groups of twelve, the int8 panels' groups of four); 21 is twelve and nine (F32's twelve-token
 * groups, whose tails are 9 to 12); 2 and 7 are pairs and a single (F32 up to eight tokens), and four and three or a
 * pair alone (the nibble and int8 types' groups of four); 9 is eight and one, or four, four and one; 11 is six and
 * five (float panels where the vector registers are 16: groups of six, the last four or fewer, or last seven or eight,
 * in groups of four, whose tails of two to four come from 2, 7 and 9). A group kernel
 * stores each token's sums behind an {@code if (valid > k)}, and C2 compiles a branch the warm-up never took as a
 * trap: after a warm-up of a 40-token prompt and a batch of 8 (tails of 4 and 8 only), a stage serving 16 sequences
 * trapped in F32's eight-token kernel at its first tail of two, ran it boxed while C2 compiled it again, and lost
 * about a second ({@code RangeWarmupTest} checks sizes in between in a fresh JVM).
 * Each matrix also chooses by timing whether its calls first read their panels once (one token: read ahead), probing
 * the other way every few calls and more rarely as the choice settles ({@code PanelTouch}). A way only probes take is
 * compiled late, while the rounds between probes allocate nothing: after such a warm-up, a Q8_0 range's first probe
 * ran Int8PanelMatrix's one-token kernel as C1 had compiled it, boxed (4 MB in one call of the 64-dim test model at 128
 * bits). So every matrix's choice is set one way for even rounds and the other for odd ones (its probes still take
 * the other way every few calls, as in a stage), and starts afresh after.
 * Vector API code allocates until C2 has compiled it with its helpers inlined, and the steady state allocates
 * nothing; so the warm-up ends after {@link #QUIET_ROUNDS} rounds in a row that allocated nothing on this thread
 * (one each way), or at its time bound. It runs before the stage serves anything; its scratch sequences (ids 0 to
 * 20) leave no KV cache behind, and the range's results for real sequences do not depend on what ran before them.
 */
public final class RangeWarmup {
    /** Rounds in a row without allocation that end the warm-up: one each way of touching the panels. */
    static final int QUIET_ROUNDS = 2;
    private static final int PROMPT = 37;
    private static final int DECODE_STEPS = 4;
    /** Sequences of the batched steps, in turn; the last is also the number of scratch sequences. */
    static final int[] BATCHES = {2, 7, 9, 11, 21};
    private static final int SCRATCH = BATCHES[BATCHES.length - 1];

    /**
     * How a warm-up went.
     *
     * @param rounds  rounds run
     * @param nanos   time taken
     * @param settled whether it ended on allocation-free rounds (false: at the bound, or stopped by the KV cache)
     * @param note    why it stopped early, or null
     */
    public record Outcome(int rounds, long nanos, boolean settled, String note) {
    }

    private final LayerRange range;
    private final Batch batch;
    private final int[] tokens;
    private final float[] x;
    private final float[] logits;
    /** The next position of each scratch sequence in the batched steps. */
    private final int[] next = new int[SCRATCH];

    public RangeWarmup(LayerRange range) {
        this.range = range;
        this.batch = new Batch(range.maxSequences(), range.maxTokens());
        this.tokens = new int[range.maxTokens()];
        this.x = new float[range.maxTokens() * range.config().dim()];
        this.logits = range.isLast() ? new float[range.maxSequences() * range.config().vocabSize()] : new float[0];
    }

    /**
     * Runs rounds, each way of touching in turn, until {@link #QUIET_ROUNDS} in a row allocate nothing, or for
     * at most {@code boundNanos}; then every matrix's choice starts afresh.
     */
    public Outcome run(long boundNanos) {
        com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long start = System.nanoTime();
        int rounds = 0;
        int quiet = 0;
        try {
            while (System.nanoTime() - start < boundNanos) {
                range.useTouch(rounds % 2 == 0);
                long before = mx.getCurrentThreadAllocatedBytes();
                round();
                rounds++;
                quiet = mx.getCurrentThreadAllocatedBytes() == before ? quiet + 1 : 0;
                if (quiet == QUIET_ROUNDS) {
                    return new Outcome(rounds, System.nanoTime() - start, true, null);
                }
            }
            return new Outcome(rounds, System.nanoTime() - start, false, null);
        } catch (SequenceException e) {
            // a KV cache or context too small for even the scratch sequences: serving decides what that means
            return new Outcome(rounds, System.nanoTime() - start, false, e.getMessage());
        } finally {
            range.restartTouch();
            endScratch();
        }
    }

    /** One round: prompt, decode steps, the batched steps, then the scratch sequences' KV cache freed. */
    private void round() {
        int context = range.config().contextLength();
        int pos = Math.max(1, Math.min(PROMPT, Math.min(range.maxTokens(), context - DECODE_STEPS - BATCHES.length - 1)));
        step(batch.clear().add(0, 0, pos, true));
        for (int i = 0; i < DECODE_STEPS && pos < context - BATCHES.length - 1; i++, pos++) {
            step(batch.clear().add(0, pos, 1, true));
        }
        int widest = Math.min(range.maxSequences(), range.maxTokens());
        Arrays.fill(next, 0);
        next[0] = pos;
        for (int size : BATCHES) {
            int n = Math.min(size, widest);
            if (n < 2) {
                break;
            }
            batch.clear();
            for (int s = 0; s < n; s++) {
                batch.add(s, next[s]++, 1, true);
            }
            step(batch);
            if (n == widest) {
                break;   // capped: a narrower range runs its widest batch once
            }
        }
        endScratch();
    }

    private void endScratch() {
        for (int s = 0; s < SCRATCH; s++) {
            range.endSequence(s);
        }
    }

    private void step(Batch b) {
        int dim = range.config().dim();
        if (range.isFirst()) {
            for (int t = 0; t < b.tokens(); t++) {
                tokens[t] = (7 * t + 1) % range.config().vocabSize();
            }
            range.prepare(b, tokens, 0);
            range.embed(b, tokens, 0, x);
        } else {
            for (int i = 0; i < b.tokens() * dim; i++) {
                x[i] = (float) Math.sin(i * 0.37) * 0.5f;   // activations of a plausible size
            }
            range.prepare(b);
        }
        range.forward(b, x);
        if (range.isLast()) {
            range.logits(b, x, logits);
        }
    }
}
