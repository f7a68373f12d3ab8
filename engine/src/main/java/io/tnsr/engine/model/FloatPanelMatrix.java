package io.tnsr.engine.model;

/**
 * A panel type whose token groups run F32's kernels over float panels ({@link F32Matrix}'s own, {@link BF16Matrix}'s
 * widened one): x regrouped once per call ({@link TokenGroups}), then each group of twelve tokens through
 * {@link PanelKernels#k2x12}, or of up to eight through {@link PanelKernels#k2x8}, or, where the vector registers are
 * 16, of six through {@link PanelKernels#k2x6} and of the last four or fewer through {@link PanelKernels#k2x4}, as
 * {@link TokenGroups#width} says.
 */
abstract class FloatPanelMatrix extends PanelMatrix {
    /** This call's x, regrouped into {@link TokenGroups}' layout at the first group that needs it (else null). */
    private float[] x;
    private int xo;
    private int n;
    private float[] xt;

    FloatPanelMatrix(String name, int rows, int cols) {
        super(name, rows, cols, PanelKernels.WIDE);
    }

    /**
     * Notes this call's x; the regrouping waits for the first group kernel, since F32's batched decode (k8x2, up to
     * eight tokens) reads x as it is and often leaves no panel to the group kernels.
     */
    @Override
    protected void prepare(float[] x, int xo, int n) {
        this.x = x;
        this.xo = xo;
        this.n = n;
        this.xt = null;
    }

    @Override
    protected final int groupWidth(int n, int t0) {
        return TokenGroups.width(n, t0);
    }

    /** The float panel at {@code wo} of {@code w} (F32's layout) . the group of this call's tokens from t0. */
    protected final void floatGroup(float[] w, int wo, int t0, int valid, float[] out, int oo, int os) {
        if (xt == null) {
            xt = TokenGroups.of(x, xo, n, cols);
        }
        int width = TokenGroups.width(n, t0);
        if (width == PanelKernels.NARROW) {
            PanelKernels.k2x6(w, wo, cols, xt, TokenGroups.offset(t0, cols), valid, out, oo, os);
        } else if (width == PanelKernels.FEW) {
            PanelKernels.k2x4(w, wo, cols, xt, TokenGroups.offset(t0, cols), valid, out, oo, os);
        } else if (width == PanelKernels.WIDE) {
            PanelKernels.k2x12(w, wo, cols, xt, TokenGroups.offset(t0, cols), valid, out, oo, os);
        } else {
            PanelKernels.k2x8(w, wo, cols, xt, TokenGroups.offset(t0, cols), valid, out, oo, os);
        }
    }
}
