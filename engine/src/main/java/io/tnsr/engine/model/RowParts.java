package io.tnsr.engine.model;

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
 * Shares are whole groups of four panels where the matrix has enough of them (F32's four-panel kernels then keep every
 * group). A type that is not stored in panels (F16) does not split: part 0 computes every row, the others nothing.
 */
public final class RowParts {
    private final WeightMatrix whole;
    /** Part k's matrix (part 0's is {@code whole} itself), or null when the type does not split. */
    private final PanelMatrix[] views;
    /** Part k owns panels [bounds[k], bounds[k + 1]). */
    private final int[] bounds;

    private RowParts(WeightMatrix whole, PanelMatrix[] views, int[] bounds) {
        this.whole = whole;
        this.views = views;
        this.bounds = bounds;
    }

    /** {@code m}'s rows cut into {@code parts} shares (parts >= 1). */
    public static RowParts of(WeightMatrix m, int parts) {
        if (parts < 1) {
            throw new IllegalArgumentException("a row split needs at least one part, not " + parts);
        }
        if (!(m instanceof PanelMatrix p) || parts == 1) {
            return new RowParts(m, null, null);
        }
        PanelMatrix[] views = new PanelMatrix[parts];
        views[0] = p;
        for (int k = 1; k < parts; k++) {
            views[k] = p.view();
        }
        int[] bounds = new int[parts + 1];
        int quads = (p.panels + 3) / 4;
        for (int k = 1; k < parts; k++) {
            bounds[k] = p.panels >= 4 * parts
                    ? (int) Math.min(p.panels, (long) quads * k / parts * 4)
                    : (int) ((long) p.panels * k / parts);
        }
        bounds[parts] = p.panels;
        return new RowParts(m, views, bounds);
    }

    public WeightMatrix matrix() {
        return whole;
    }

    public int parts() {
        return views == null ? 1 : views.length;
    }

    /** First output row of part k (its rows end where part k + 1's begin; the last part's at the matrix's rows). */
    public int firstRow(int k) {
        return views == null ? (k == 0 ? 0 : whole.rows()) : Math.min(whole.rows(), bounds[k] * views[0].panelRows);
    }

    /** Part k of {@code whole.matmul(x, xo, n, out, oo)}: out rows [firstRow(k), firstRow(k + 1)) of every token. */
    public void run(int k, float[] x, int xo, int n, float[] out, int oo) {
        if (views == null) {
            if (k == 0) {
                whole.matmul(x, xo, n, out, oo);
            }
            return;
        }
        if (bounds[k] < bounds[k + 1]) {
            views[k].matmulPanels(x, xo, n, out, oo, bounds[k], bounds[k + 1]);
        }
    }
}
