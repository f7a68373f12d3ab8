package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;

/**
 * A matrix stored in row panels ({@link PanelKernels}): the loops over panels and token groups, the same for every
 * panel type (F32, BF16, the int8 types of {@link Int8PanelMatrix}, Q4_0, Q4_1, Q4_K, Q5_K, Q2_K, Q3_K); each type supplies its loop over panels for one token
 * ({@link #wholePanels}, also the last partial panel's, into a scratch) and its kernel for one panel and a group of
 * tokens ({@link #group}).
 *
 * <pre>{@code
 * matvec:        prepare(x, 1); wholePanels(x, out), or wholePanelsReadingAhead where that measured faster
 *                (PanelTouch); wholePanels(last partial one) into the spill
 * matmulTokens:  prepare(x, n); for each panel p (read from memory once; first by a touch pass where that measured
 *                faster, PanelTouch): for each group of tokens (from L2): group(p, tokens t0 .. t0 + valid)
 * matmulPanels:  either of the two over panels [from, to) only: one thread's share of a row split (RowParts)
 * panelsPrepared: the same after prepare, for one of several ranges a thread claims in turn (RowParts' chunks)
 * }</pre>
 *
 * A panel is {@link #panelRows} rows, P (= 2L, {@link PanelKernels}) unless a type stacks more (Int8PanelMatrix: 4P,
 * more independent sums per column). The kernels always store whole panels, panelRows outputs per token: a last
 * partial panel (rows % panelRows != 0) is computed into a scratch and only its valid rows are copied out. The calls into the kernels are virtual and pass no vector:
 * each type's kernels compile as units of their own, which keeps C2 (JDK 17) within its inlining budget (see
 * {@link WeightMatrix}). One compute thread uses a matrix (the scratch is the matrix's); the other threads of a row split
 * use {@link #view}s of it.
 */
abstract class PanelMatrix extends WeightMatrix {
    /** Rows per panel: a multiple of P. */
    protected final int panelRows;
    /** Panels, the last one partial when rows % panelRows != 0. */
    protected final int panels;
    /** Panels of panelRows whole rows. */
    protected final int fullPanels;
    /** Tokens per {@link #group} call (the most, where a type varies them: {@link #groupWidth}). */
    private final int tokens;
    /** [tokens][panelRows] outputs of the last partial panel before its valid rows are copied out. */
    private final float[] spill;
    /**
     * Whether {@link #groups} touches each panel first, for calls of up to {@link #FEW_TOKENS} tokens (batched decode)
     * and for more (prefill), chosen apart since what it saves differs: this object's own choices (a view makes its own).
     */
    private final PanelTouch fewTouch = new PanelTouch();
    private final PanelTouch manyTouch = new PanelTouch();
    /**
     * Whether one-token calls read ahead ({@link #wholePanelsReadingAhead}), for the types that can
     * ({@link #readsAhead}): at first they do, since a model too large for the cache is what they are for.
     */
    private final PanelTouch oneTouch = new PanelTouch(true);
    /** What the touch passes read, kept so that they are not optimized away. */
    private int touchSink;

    PanelMatrix(String name, int rows, int cols, int tokens) {
        this(name, rows, cols, tokens, P);
    }

    PanelMatrix(String name, int rows, int cols, int tokens, int panelRows) {
        super(name, rows, cols);
        if (panelRows <= 0 || panelRows % P != 0) {
            throw new IllegalArgumentException("panel of " + panelRows + " rows: not a multiple of " + P);
        }
        this.panelRows = panelRows;
        this.panels = (rows + panelRows - 1) / panelRows;
        this.fullPanels = rows / panelRows;
        this.tokens = tokens;
        this.spill = new float[tokens * panelRows];
    }

    /** Rows rounded up to whole panels of P rows: what a panel type's arrays hold (its heapBytes). */
    static long paddedRows(long rows) {
        return paddedRows(rows, P);
    }

    /** Rows rounded up to whole panels of {@code panelRows}. */
    static long paddedRows(long rows, int panelRows) {
        return (rows + panelRows - 1) / panelRows * panelRows;
    }

    /** {@code length} as an array length, or a clear error for a matrix larger than one Java array holds. */
    static int arrayLength(String name, int rows, int cols, long length) {
        if (length > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(name + ": " + rows + " x " + cols
                    + " is more than one Java array holds once repacked (" + length + " elements)");
        }
        return (int) length;
    }

    @Override
    protected final void matvec(float[] x, int xo, float[] out, int oo) {
        prepare(x, xo, 1);
        panelsOne(x, xo, out, oo, 0, panels);
    }

    @Override
    protected final void matmulTokens(float[] x, int xo, int n, float[] out, int oo) {
        prepare(x, xo, n);
        panelsTokens(x, xo, n, out, oo, 0, panels);
    }

    /**
     * Panels [from, to) of {@link #matmul}: out rows [from * panelRows, min(rows, to * panelRows)) of every token, each
     * (row, token) with the bits the whole call gives it. What one thread of a row split runs ({@link RowParts}); the
     * matrix's scratch serves one thread, so each thread calls its own {@link #view}.
     */
    final void matmulPanels(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        prepare(x, xo, n);
        panelsPrepared(x, xo, n, out, oo, from, to);
    }

    /** {@link #matmulPanels} after {@link #prepare} of the same call: one of several ranges of panels in turn. */
    final void panelsPrepared(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (n == 1) {
            panelsOne(x, xo, out, oo, from, to);
        } else {
            panelsTokens(x, xo, n, out, oo, from, to);
        }
    }

    /** This matrix's weights (shared, read-only) with scratch of its own, for another thread of a row split. */
    abstract PanelMatrix view();

    /** Panels [from, to) . one token, x already prepared: the whole ones, then a last partial one through the spill. */
    private void panelsOne(float[] x, int xo, float[] out, int oo, int from, int to) {
        int whole = Math.min(to, fullPanels);
        if (from < whole && readsAhead()) {
            boolean ahead = oneTouch.touchNext();
            long start = System.nanoTime();
            if (ahead) {
                touchSink ^= wholePanelsReadingAhead(x, xo, out, oo, from, whole);
            } else {
                wholePanels(x, xo, out, oo, from, whole);
            }
            oneTouch.took(whole - from, System.nanoTime() - start);
        } else if (from < whole) {
            wholePanels(x, xo, out, oo, from, whole);
        }
        if (to > fullPanels) { // the last, partial panel is in the range (from <= fullPanels always)
            wholePanels(x, xo, spill, -fullPanels * panelRows, fullPanels, fullPanels + 1); // its rows at spill[0..)
            System.arraycopy(spill, 0, out, oo + fullPanels * panelRows, rows - fullPanels * panelRows);
        }
    }

    /** Panels [from, to) . tokens [0, n), x already prepared: {@link #groups} unless a type knows better. */
    protected void panelsTokens(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        groups(x, xo, n, out, oo, from, to);
    }

    /**
     * Panels [from, to) . tokens [0, n) through {@link #group}, x already prepared; each whole panel read once first
     * ({@link #touch}) when this matrix's calls have shown that to be faster ({@link PanelTouch}).
     */
    protected final void groups(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (from >= to) { // no panel (the callers pass what their own paths left): nothing to run, nothing to time
            return;
        }
        PanelTouch choice = n <= FEW_TOKENS ? fewTouch : manyTouch;
        boolean touch = choice.touchNext();
        long start = System.nanoTime();
        for (int p = from; p < to; p++) {
            int r0 = p * panelRows;
            if (touch && p < fullPanels) {
                touchSink ^= touch(p);
            }
            for (int t0 = 0, width; t0 < n; t0 += width) {
                width = groupWidth(n, t0);
                int valid = Math.min(width, n - t0);
                if (p < fullPanels) {
                    group(p, x, xo + t0 * cols, t0, valid, out, oo + t0 * rows + r0, rows);
                } else {
                    group(p, x, xo + t0 * cols, t0, valid, spill, 0, panelRows);
                    for (int j = 0; j < valid; j++) {
                        System.arraycopy(spill, j * panelRows, out, oo + (t0 + j) * rows + r0, rows - r0);
                    }
                }
            }
        }
        choice.took((long) n << 32 | (to - from), System.nanoTime() - start);
    }

    /**
     * Reads one value per cache line of whole panel p's weights (their bulk; a few scales may stay unread), so that
     * its token groups find it in cache; returns the values combined, which the caller keeps so that the reads stay.
     */
    protected abstract int touch(int p);

    /**
     * Every call from now on touches its panels first (one token: reads ahead, where the type can), or none does
     * (tests compare the two).
     */
    final void fixTouch(boolean touch) {
        fewTouch.fix(touch);
        manyTouch.fix(touch);
        oneTouch.fix(touch);
    }

    /** Each choice of whether to touch (read ahead) set to the mode given, its probes and votes going on ({@link PanelTouch#use}). */
    final void useTouch(boolean touch) {
        fewTouch.use(touch);
        manyTouch.use(touch);
        oneTouch.use(touch);
    }

    /** Each choice of whether to touch (read ahead) timed again from the start, in the mode it starts in. */
    final void restartTouch() {
        fewTouch.restart();
        manyTouch.restart();
        oneTouch.restart();
    }

    /** The most tokens of a call whose touch passes {@link #fewTouch} chooses: a batched decode's. */
    static final int FEW_TOKENS = 32;

    /** Tokens in the group from token t0 of an n-token call: the same for every group unless a type varies them. */
    protected int groupWidth(int n, int t0) {
        return tokens;
    }

    /** Before the kernels of a call over tokens [0, n) of x run (Q4_0 and Q4_K quantize x here, Q4_K also sums it). */
    protected void prepare(float[] x, int xo, int n) {
    }

    /**
     * One token: out[oo + p * panelRows ..] for the whole panels p in [from, to). Each type loops over its panels in its
     * own class, calling its static kernel: a loop shared by every type, calling a virtual one-panel method, left it to
     * a race between compiler threads whether C2 inlined the kernel there (Q4_0's, at 298 bytecodes, may be inlined;
     * a kernel compiled on its own first is too big to be), and a model of several types would make the call
     * polymorphic. A kernel called once per panel from code that is not its own loop read some 20% slower (Q4_0
     * 768 x 768, one token) in about half the JVMs. The launchers' compile commands inline Q4_0's, Q5_0's, Q4_K's, Q4_1's
     * and Q5_K's kernels into their loops ({@code tools/lib/vector-helpers.compile}); the int8 panels', Q2_K's and Q3_K's stay calls.
     * The loop itself is never inlined into its callers ({@code -XX:CompileCommand=dontinline,...::wholePanels}, see
     * {@link WeightMatrix}), so that a kernel inlined here never shares a compilation's node budget with theirs.
     */
    protected abstract void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to);

    /**
     * Whether this type's one-token kernel has a variant that reads its weights ahead of their use
     * ({@link #wholePanelsReadingAhead}); where it does, each matrix times its one-token calls both ways and keeps the
     * faster ({@link PanelTouch}).
     */
    protected boolean readsAhead() {
        return false;
    }

    /**
     * {@link #wholePanels} with the weights read ahead of their use, the same bits; returns what the extra reads
     * read, combined, for the caller to keep. Called only where {@link #readsAhead}.
     */
    protected int wholePanelsReadingAhead(float[] x, int xo, float[] out, int oo, int from, int to) {
        throw new UnsupportedOperationException(name + ": " + type() + " does not read ahead");
    }

    /**
     * Panel p . tokens j in [0, valid) (token j's x at {@code xo + j * cols}; the first is token t0 of the call):
     * out[oo + j * os + i] for the panel's panelRows rows i. Missing tokens repeat the last valid one and are not stored.
     */
    protected abstract void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os);
}
