package io.tnsr.engine.model;

import java.util.Arrays;

/**
 * Whether a matrix's token groups ({@link PanelMatrix#groups}) first read each panel once, one value per cache line
 * (a touch pass), chosen per matrix by timing its own calls, and kept under review. The same choice, started the
 * other way, decides whether a one-token call reads its weights ahead of their use where the type can
 * ({@link PanelMatrix#readsAhead}: the int8 panels, whose one-token kernel otherwise reads memory at half its rate on
 * some hosts).
 *
 * <p>Why: a panel's first token group streams it at the pace of one sequential read, and from memory that pace is
 * poor: on a 2-vCPU Intel Xeon guest an F32 8192 x 4096 matrix times 9 to 24 tokens took 24-26 ms a call whatever
 * the tokens (5.4 GB/s), where one token, read by four streams, took 6.5 ms. A loop of independent loads keeps many
 * lines in flight, so a touch pass brings the panel into L2 at the memory's rate and the groups then run from L2: 16
 * tokens in 16.1-16.4 ms instead of 19.4-22.9. But where the matrix already sits in the last-level cache (a small
 * model, a matrix called over and over) the pass is pure cost: 2048 x 768 at 16 tokens, 564-585 us instead of
 * 425-442. Which case holds depends on the model's size, the cache and the neighbours, so it is measured: every
 * {@code interval}-th call runs the other way, and its time against the mean of the calls on either side of it
 * (the same tokens and panels, in the mode in use) is a vote. When the median of the last {@link #VOTES} votes says
 * the other way is at least {@code 1 - SWITCH_BELOW} faster, the matrix switches; while the votes keep saying it is
 * slower, the probes grow rarer ({@link #MAX_INTERVAL}), so that a settled choice costs little.
 *
 * <p>Either way a call's results are the same bits: the pass only reads. Not thread-safe: one per matrix view, as
 * the scratch is ({@link PanelMatrix#view}).
 *
 * <pre>{@code
 * boolean touch = choice.touchNext();
 * long t = System.nanoTime();
 * ... the call, with or without the pass ...
 * choice.took(shape, System.nanoTime() - t);
 * }</pre>
 */
final class PanelTouch {
    /** Calls between probes at first and after a switch. */
    static final int MIN_INTERVAL = 4;
    /** Calls between probes once the votes keep confirming the mode in use. */
    static final int MAX_INTERVAL = 256;
    /** Votes whose median decides. */
    static final int VOTES = 5;
    /** The other mode's time over the mode in use below which the matrix switches. */
    static final double SWITCH_BELOW = 0.92;
    /** Above this the other mode is clearly slower: probe less often. */
    static final double CONFIRM_ABOVE = 1.05;

    /** The mode a fresh choice starts in, and starts in again on {@link #restart()}. */
    private final boolean initial;
    private boolean touching;
    /** Whether the mode stays as set by {@link #fix}: no probes, no votes. */
    private boolean fixed;
    private int interval = MIN_INTERVAL;
    /** Calls since the last probe's neighbour closed its vote. */
    private int sinceVote;
    /** Shape and time of the call before the probe, and of the probe. */
    private long beforeShape = -1, probeShape = -1;
    private long beforeNanos, probeNanos;
    private final double[] votes = new double[VOTES];
    private final double[] sorted = new double[VOTES];
    private int voteCount;
    private int nextVote;

    /** A choice that starts without the pass. */
    PanelTouch() {
        this(false);
    }

    /** A choice that starts with the pass or without it, until its votes say otherwise. */
    PanelTouch(boolean touching) {
        this.initial = touching;
        this.touching = touching;
    }

    /** Every call from now on touches its panels or none does (tests compare the two). */
    void fix(boolean touch) {
        fixed = true;
        touching = touch;
    }

    /**
     * The mode in use from now on, until the votes say otherwise; the probes and votes go on as they were (the votes
     * cast before then speak of the other mode: for a warm-up, which {@link #restart}s the choice after). A stage's
     * warm-up sets each mode in turn, so that the JIT compiles both ways through the same code, and the same
     * branches, that a stage then runs: a choice held by {@link #fix}, or restarted every round so that its probes
     * never came, would leave branches untaken, and C2 traps on those at the first real call that takes them.
     */
    void use(boolean touch) {
        touching = touch;
    }

    /** Chosen by timing again from the start: the mode a new choice starts in, a probe every {@link #MIN_INTERVAL} calls, no votes. */
    void restart() {
        touching = initial;
        interval = MIN_INTERVAL;
        sinceVote = 0;
        beforeShape = -1;
        probeShape = -1;
        voteCount = 0;
        nextVote = 0;
    }

    /** Calls between probes at present. */
    int interval() {
        return interval;
    }

    /** Whether the matrix touches its panels at present (what the calls between probes do). */
    boolean touching() {
        return touching;
    }

    /** Whether the next call runs the touch pass: the mode in use, or on a probe the other one. */
    boolean touchNext() {
        if (fixed) {
            return touching;
        }
        return sinceVote == interval ? !touching : touching;
    }

    /**
     * The call just made took {@code nanos}; {@code shape} identifies its work (tokens and panels), and a vote only
     * compares calls of one shape.
     */
    void took(long shape, long nanos) {
        if (fixed) {
            return;
        }
        if (sinceVote == interval - 1) {
            beforeShape = shape;
            beforeNanos = nanos;
            sinceVote++;
        } else if (sinceVote == interval) {
            probeShape = shape;
            probeNanos = nanos;
            sinceVote++;
        } else if (sinceVote == interval + 1) {
            if (beforeShape == shape && probeShape == shape) {
                vote(2.0 * probeNanos / (beforeNanos + (double) nanos));
            }
            sinceVote = 0;
        } else {
            sinceVote++;
        }
    }

    private void vote(double ratio) {
        votes[nextVote] = ratio;
        nextVote = (nextVote + 1) % VOTES;
        voteCount = Math.min(VOTES, voteCount + 1);
        if (voteCount < VOTES) {
            return;
        }
        double median = median();
        if (median < SWITCH_BELOW) {
            touching = !touching;
            interval = MIN_INTERVAL;
            voteCount = 0;
        } else if (median > CONFIRM_ABOVE) {
            interval = Math.min(MAX_INTERVAL, interval * 2);
        }
    }

    private double median() {
        System.arraycopy(votes, 0, sorted, 0, VOTES);
        Arrays.sort(sorted); // five values: sorted in place, nothing allocated
        return sorted[VOTES / 2];
    }

    /** Reads a[from..from+len) one value per 64-byte line; returns them xor'ed, for the caller to keep. */
    static int lines(byte[] a, int from, int len) {
        int acc = 0;
        for (int i = from, end = from + len; i < end; i += 64) {
            acc ^= a[i];
        }
        return acc;
    }

    /** {@link #lines(byte[], int, int)} for floats. */
    static int lines(float[] a, int from, int len) {
        int acc = 0;
        for (int i = from, end = from + len; i < end; i += 16) {
            acc ^= Float.floatToRawIntBits(a[i]);
        }
        return acc;
    }

    /** {@link #lines(byte[], int, int)} for ints. */
    static int lines(int[] a, int from, int len) {
        int acc = 0;
        for (int i = from, end = from + len; i < end; i += 16) {
            acc ^= a[i];
        }
        return acc;
    }
}
