package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.FEW;
import static io.tnsr.engine.model.PanelKernels.NARROW;
import static io.tnsr.engine.model.PanelKernels.SIXTEEN_REGISTERS;
import static io.tnsr.engine.model.PanelKernels.TOKENS;
import static io.tnsr.engine.model.PanelKernels.WIDE;

/**
 * The x of one matmul call regrouped for {@link PanelKernels#k2x12}, {@link PanelKernels#k2x8}, {@link PanelKernels#k2x6}
 * and {@link PanelKernels#k2x4}: tokens in groups of {@link #width} (12 or 8, or 6 and 4), each group column after
 * column with the group's values of a column side by side (the group of width W from token t0 holds token t0 + j,
 * column c at {@code t0 * cols + c * W + j}); a last partial group repeats its last token in the lanes it lacks.
 *
 * <pre>{@code
 * prepare(x, xo, n):  xt = TokenGroups.of(x, xo, n, cols)      // once per call, before any kernel
 * group from t0:      W = width(n, t0); valid = min(W, n - t0)
 *                     W == WIDE ? k2x12(w, ..., xt, t0 * cols, valid, out, ...) : k2x8(...)  // or k2x6, k2x4
 * }</pre>
 *
 * One scratch per thread, shared by every matrix the thread runs: a call's layout lives until that thread's next
 * call, and a matrix (or view) serves one thread. Per thread it grows to the largest call once (n x cols floats);
 * a scratch per matrix would hold that for every matrix of the model. Steady state allocates nothing.
 */
final class TokenGroups {
    private static final ThreadLocal<TokenGroups> OF_THREAD = ThreadLocal.withInitial(TokenGroups::new);

    private float[] xt = new float[0];

    private TokenGroups() {
    }

    /** Offset in {@link #of}'s array of the group that starts at token {@code t0}. */
    static int offset(int t0, int cols) {
        return t0 * cols;
    }

    /**
     * Width of the group from token {@code t0} of an n-token call: 12, but 8 for a last group of at most 8 tokens,
     * and 8 throughout up to 16 tokens (two groups of 8 waste no lane at 16, where 12 + 4 would run 24). Where twelve
     * or eight tokens' sums do not fit in the vector registers ({@link PanelKernels#SIXTEEN_REGISTERS}): 6, but 4 for
     * the last 4 tokens or fewer, and for the last 7 or 8 (4 + 4 where 6 + 6 would run 12 lanes for 8 tokens).
     */
    static int width(int n, int t0) {
        if (SIXTEEN_REGISTERS) {
            int left = n - t0;
            return left <= FEW || left == 2 * FEW || left == 2 * FEW - 1 ? FEW : NARROW;
        }
        return n <= 2 * TOKENS || n - t0 <= TOKENS ? TOKENS : WIDE;
    }

    /** Tokens [0, n) of x (token t at {@code xo + t * cols}) in the group layout, in this thread's scratch. */
    static float[] of(float[] x, int xo, int n, int cols) {
        return of(x, xo, n, cols, 0);
    }

    /** {@link #of(float[], int, int, int)} with every group {@code fixed} tokens wide (0: {@link #width}'s choice). */
    static float[] of(float[] x, int xo, int n, int cols, int fixed) {
        float[] xt = scratch(n, cols, fixed);
        for (int t0 = 0, width; t0 < n; t0 += width) {
            width = width(n, t0, fixed);
            int base = offset(t0, cols);
            int last = Math.min(width, n - t0) - 1;
            for (int j = 0; j < width; j++) {
                int src = xo + (t0 + Math.min(j, last)) * cols;
                for (int c = 0, d = base + j; c < cols; c++, d += width) {
                    xt[d] = x[src + c];
                }
            }
        }
        return xt;
    }

    /**
     * The same layout, every group {@code fixed} tokens wide, of 8-bit activations as {@link Int8Activations} pairs
     * them ({@link Int8Activations.Pairing#HALVES}: token t's pair {@code 16 b + k} at {@code t * cols / 2 + 16 b + k}
     * holds column {@code 32 b + k} in its low 16 bits and column {@code 32 b + 16 + k} in its high 16 bits), as floats.
     */
    static float[] ofHalves(int[] pairs, int n, int cols, int fixed) {
        float[] xt = scratch(n, cols, fixed);
        int half = cols / 2;
        for (int t0 = 0, width; t0 < n; t0 += width) {
            width = width(n, t0, fixed);
            int last = Math.min(width, n - t0) - 1;
            // column after column, the group's tokens side by side: xt written in order, a pair's halves 16 columns apart
            for (int c = 0, d = offset(t0, cols); c < cols; c += 32, d += 16 * width) {
                for (int k = 0; k < 16; k++) {
                    for (int j = 0; j < width; j++, d++) {
                        int v = pairs[(t0 + Math.min(j, last)) * half + c / 2 + k];
                        xt[d] = (short) v;
                        xt[d + 16 * width] = v >> 16;
                    }
                }
            }
        }
        return xt;
    }

    /** This thread's scratch, grown to hold n tokens of cols columns in groups (the last one's missing lanes included). */
    private static float[] scratch(int n, int cols, int fixed) {
        TokenGroups g = OF_THREAD.get();
        int end = 0;
        for (int t0 = 0; t0 < n; t0 = end) {
            end = t0 + width(n, t0, fixed);
        }
        if (g.xt.length < end * cols) {
            g.xt = new float[end * cols];
        }
        return g.xt;
    }

    private static int width(int n, int t0, int fixed) {
        return fixed > 0 ? fixed : width(n, t0);
    }
}
