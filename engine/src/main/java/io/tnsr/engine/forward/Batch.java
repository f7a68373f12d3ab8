package io.tnsr.engine.forward;

import io.tnsr.engine.kvcache.SequenceException;

/**
 * What one forward call carries: B sequences, each with one or more consecutive new tokens starting at its
 * own position. Rows of the activation buffer follow the sequences in order: the first
 * {@code tokenCount(0)} rows belong to sequence 0, and so on.
 *
 * <p>Decode of a micro-batch is B sequences x 1 token; a prompt prefill is 1 sequence x T tokens; both can
 * mix. Reused from call to call ({@link #clear()}, then {@link #add}): building one allocates nothing.
 */
public final class Batch {
    private final int maxSequences;
    private final int maxTokens;
    private final int[] seqIds;
    private final int[] positions;
    private final int[] tokenCounts;
    private final boolean[] wantLogits;
    private final boolean[] sample;
    private int sequences;
    private int tokens;
    private int logitRows;

    public Batch(int maxSequences, int maxTokens) {
        if (maxSequences <= 0 || maxTokens <= 0) {
            throw new IllegalArgumentException("batch limits must be positive");
        }
        this.maxSequences = maxSequences;
        this.maxTokens = maxTokens;
        this.seqIds = new int[maxSequences];
        this.positions = new int[maxSequences];
        this.tokenCounts = new int[maxSequences];
        this.wantLogits = new boolean[maxSequences];
        this.sample = new boolean[maxSequences];
    }

    public Batch clear() {
        sequences = 0;
        tokens = 0;
        logitRows = 0;
        return this;
    }

    /**
     * Appends a sequence's {@code count} tokens at positions [position, position + count).
     *
     * @param wantLogits whether the last of these tokens needs logits (false for all but the last chunk of
     *                   a prompt)
     */
    public Batch add(int seqId, int position, int count, boolean wantLogits) {
        return add(seqId, position, count, wantLogits, false);
    }

    /**
     * As {@link #add(int, int, int, boolean)}; {@code sample}: the last stage chooses the next token from those logits
     * and returns it instead of them (only with {@code wantLogits}).
     */
    public Batch add(int seqId, int position, int count, boolean wantLogits, boolean sample) {
        if (count <= 0 || position < 0 || sample && !wantLogits) {
            throw new IllegalArgumentException("sequence " + seqId + ": count " + count + ", position " + position
                    + (sample && !wantLogits ? ", sampled without logits" : ""));
        }
        if (sequences == maxSequences || tokens + count > maxTokens) {
            throw new SequenceException(SequenceException.Kind.BATCH_TOO_LARGE, seqId, "batch is full: "
                    + sequences + " of " + maxSequences + " sequences, " + tokens + " + " + count + " of "
                    + maxTokens + " tokens");
        }
        seqIds[sequences] = seqId;
        positions[sequences] = position;
        tokenCounts[sequences] = count;
        this.wantLogits[sequences] = wantLogits;
        this.sample[sequences] = sample;
        sequences++;
        tokens += count;
        if (wantLogits) {
            logitRows++;
        }
        return this;
    }

    /** Removes sequence {@code i}; the caller moves the activation rows to match (see {@link #firstRow}). */
    public void remove(int i) {
        tokens -= tokenCounts[i];
        if (wantLogits[i]) {
            logitRows--;
        }
        int tail = sequences - i - 1;
        System.arraycopy(seqIds, i + 1, seqIds, i, tail);
        System.arraycopy(positions, i + 1, positions, i, tail);
        System.arraycopy(tokenCounts, i + 1, tokenCounts, i, tail);
        System.arraycopy(wantLogits, i + 1, wantLogits, i, tail);
        System.arraycopy(sample, i + 1, sample, i, tail);
        sequences--;
    }

    public int sequences() {
        return sequences;
    }

    public int tokens() {
        return tokens;
    }

    /** Rows of logits a last stage produces: one per sequence that wants logits. */
    public int logitRows() {
        return logitRows;
    }

    public int maxSequences() {
        return maxSequences;
    }

    public int maxTokens() {
        return maxTokens;
    }

    public int seqId(int i) {
        return seqIds[i];
    }

    public int position(int i) {
        return positions[i];
    }

    public int tokenCount(int i) {
        return tokenCounts[i];
    }

    public boolean wantLogits(int i) {
        return wantLogits[i];
    }

    /** Whether the last stage samples sequence i's next token from its logits (and returns the token). */
    public boolean sample(int i) {
        return sample[i];
    }

    /** Row of the activation buffer holding sequence i's first token. */
    public int firstRow(int i) {
        int row = 0;
        for (int s = 0; s < i; s++) {
            row += tokenCounts[s];
        }
        return row;
    }

    /** Index of the sequence with id {@code seqId}, or -1. */
    public int indexOf(int seqId) {
        for (int i = 0; i < sequences; i++) {
            if (seqIds[i] == seqId) {
                return i;
            }
        }
        return -1;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("Batch[");
        for (int i = 0; i < sequences; i++) {
            sb.append(i == 0 ? "" : ", ").append("seq ").append(seqIds[i]).append(" @").append(positions[i])
                    .append(" x").append(tokenCounts[i]).append(wantLogits[i] ? sample[i] ? " +sample" : " +logits" : "");
        }
        return sb.append(']').toString();
    }
}
