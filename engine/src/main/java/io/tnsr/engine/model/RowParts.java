package io.tnsr.engine.model;

import java.util.function.Consumer;

/**
 * A matrix's output rows cut into {@code parts} contiguous shares on panel boundaries, one per thread of a row split:
 * part k computes only its rows, with scratch of its own (a {@link PanelMatrix#view}), so the parts of one matmul run
 * at once on several threads. Each (row, token) is the same chain of operations as in the whole {@link
 * WeightMatrix#matmul}, so a split call gives the same bits as one thread.
 *
 * <pre>{@code
 * parts = RowParts.of(w, 2);           // once, at load
 * thread k: parts.run(k, x, 0, n, out, 0);   // every k in [0, parts) once per matmul, all before out is read
 * }</pre>
 *
 * A part is a run of whole {@link #chunks} (up to {@link #CHUNKS_PER_PART} per part), which threads can also claim
 * one at a time, so that a thread held up (preempted, on a core shared with another process) costs the others at
 * most the chunk it holds rather than its whole share:
 * <pre>{@code
 * thread k: parts.begin(k, x, 0, n); while ((c = claim()) < parts.chunks()) parts.runChunk(k, c, x, 0, n, out, 0);
 * }</pre>
 *
 * Shares and chunks are whole groups of four panels where the matrix has enough of them (F32's four-panel kernels
 * then keep every group). A type that is not stored in panels (F16) does not split: part 0 computes every row, the
 * others nothing, and it has no chunks.
 */
public final class RowParts {
    private final WeightMatrix whole;
    /** Part k's matrix (part 0's is {@code whole} itself), or null when the type does not split. */
    private final PanelMatrix[] views;
    /** Chunk c is panels [chunkBounds[c], chunkBounds[c + 1]); empty when the type does not split. */
    private final int[] chunkBounds;

    /** Chunks per part, at most: enough to even out a late thread, few enough that each stays a long run of rows. */
    public static final int CHUNKS_PER_PART = 4;

    private RowParts(WeightMatrix whole, PanelMatrix[] views, int[] chunkBounds) {
        this.whole = whole;
        this.views = views;
        this.chunkBounds = chunkBounds;
    }

    /** {@code m}'s rows cut into {@code parts} shares (parts >= 1). */
    public static RowParts of(WeightMatrix m, int parts) {
        if (parts < 1) {
            throw new IllegalArgumentException("a row split needs at least one part, not " + parts);
        }
        if (!(m instanceof PanelMatrix p) || parts == 1) {
            return new RowParts(m, null, new int[] {0});
        }
        PanelMatrix[] views = new PanelMatrix[parts];
        views[0] = p;
        for (int k = 1; k < parts; k++) {
            views[k] = p.view();
        }
        return new RowParts(m, views, cut(p.panels, parts * CHUNKS_PER_PART, p.panels >= 4 * parts));
    }

    /** Bounds of min(wanted, units) chunks of {@code panels}, the units whole quads of panels or single panels. */
    private static int[] cut(int panels, int wanted, boolean quads) {
        int units = quads ? (panels + 3) / 4 : panels;
        int size = quads ? 4 : 1;
        int chunks = Math.min(wanted, units);
        int[] b = new int[chunks + 1];
        for (int c = 1; c < chunks; c++) {
            b[c] = (int) Math.min(panels, (long) units * c / chunks * size);
        }
        b[chunks] = panels;
        return b;
    }

    public WeightMatrix matrix() {
        return whole;
    }

    public int parts() {
        return views == null ? 1 : views.length;
    }

    /** Chunks of a claimed split ({@link #runChunk}); 0 when the type does not split. */
    public int chunks() {
        return chunkBounds.length - 1;
    }

    /** First output row of chunk c (its rows end where chunk c + 1's begin). */
    public int chunkRow(int c) {
        return Math.min(whole.rows(), chunkBounds[c] * views[0].panelRows);
    }

    /** Before thread k runs chunks of a call over x: its view prepares x (notes it, or quantizes it, once per call). */
    public void begin(int k, float[] x, int xo, int n) {
        views[k].prepare(x, xo, n);
    }

    /**
     * Chunk c of {@code whole.matmul(x, xo, n, out, oo)} on thread k's view, after {@link #begin} of the same call on
     * that view: out rows [chunkRow(c), chunkRow(c + 1)) of every token.
     */
    public void runChunk(int k, int c, float[] x, int xo, int n, float[] out, int oo) {
        views[k].panelsPrepared(x, xo, n, out, oo, chunkBounds[c], chunkBounds[c + 1]);
    }

    /** First chunk of part k: part k is chunks [firstChunk(k), firstChunk(k + 1)). */
    private int firstChunk(int k) {
        return k * chunks() / views.length;
    }

    /** First output row of part k (its rows end where part k + 1's begin; the last part's at the matrix's rows). */
    public int firstRow(int k) {
        return views == null ? (k == 0 ? 0 : whole.rows()) : chunkRow(firstChunk(k));
    }

    /** Part k of {@code whole.matmul(x, xo, n, out, oo)}: out rows [firstRow(k), firstRow(k + 1)) of every token. */
    public void run(int k, float[] x, int xo, int n, float[] out, int oo) {
        if (views == null) {
            if (k == 0) {
                whole.matmul(x, xo, n, out, oo);
            }
            return;
        }
        int from = chunkBounds[firstChunk(k)];
        int to = chunkBounds[firstChunk(k + 1)];
        if (from < to) {
            views[k].matmulPanels(x, xo, n, out, oo, from, to);
        }
    }

    /**
     * Every part's choices of whether to touch its panels first (one token: read ahead) set to the mode given, their
     * probes and votes going on ({@link PanelMatrix#useTouch}): a warm-up sets each mode in turn, so that the JIT has
     * compiled both before a real call takes either. Nothing for a type not stored in panels.
     */
    public void useTouch(boolean touch) {
        forEachPanelMatrix(p -> p.useTouch(touch));
    }

    /** Every part's choices timed again from the start, each in the mode it starts in ({@link PanelMatrix#restartTouch}). */
    public void restartTouch() {
        forEachPanelMatrix(PanelMatrix::restartTouch);
    }

    /** {@code action} on each part's view, or on the whole matrix when it is not split; none if it is not in panels. */
    private void forEachPanelMatrix(Consumer<PanelMatrix> action) {
        if (views != null) {
            for (PanelMatrix v : views) {
                action.accept(v);
            }
        } else if (whole instanceof PanelMatrix p) {
            action.accept(p);
        }
    }
}
