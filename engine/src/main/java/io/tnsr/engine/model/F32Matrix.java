package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.util.Arrays;

/**
 * F32 weights, repacked at load into row panels on the heap ({@link PanelKernels}: panel p is rows
 * [p * P, p * P + P) column after column, the rows past the last one zero). Lanes are rows, so a (row, token)
 * product is one FMA chain over the columns in order, the same for one token and for a batch.
 *
 * <p>Why a copy, not the mapped file: decode is bound by memory bandwidth (every byte read once per token), and
 * four panels streamed from the heap read at 30 GB/s (33 with transparent huge pages) against 26-27 for row-major
 * rows from the mapping; batched work reuses each loaded weight for 8 tokens without a tile copy. Cost: the
 * tensor's bytes live on the heap (plus the padding of a last partial panel), and load reads the file once.
 */
final class F32Matrix extends FloatPanelMatrix {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /**
     * Most tokens per {@link #matmulTokens} call that go through {@link PanelKernels#k8x2}, on hosts with 32 vector
     * registers; with 16 ({@link PanelKernels#SIXTEEN_REGISTERS}) every call of several tokens takes the token groups.
     */
    static final int STREAMED_TOKENS = 8;

    /** [panels][cols][P]: row r, column c at (r / P) * cols * P + c * P + r % P. */
    private final float[] w;

    /** Repacks {@code data}: rows x cols little-endian floats, row-major (the GGUF tensor). */
    F32Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols);
        this.w = new float[arrayLength(name, rows, cols, (long) panels * cols * P)];
        FloatBuffer f = data.duplicate().order(LE).asFloatBuffer();
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            f.get(r * cols, row, 0, cols);
            int base = (r / P) * cols * P + r % P;
            for (int c = 0; c < cols; c++) {
                w[base + c * P] = row[c];
            }
        }
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private F32Matrix(F32Matrix shared) {
        super(shared.name, shared.rows, shared.cols);
        this.w = shared.w;
    }

    @Override
    PanelMatrix view() {
        return new F32Matrix(this);
    }

    /** Heap bytes a rows x cols F32 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * cols * Float.BYTES;
    }

    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    /** Four panels at a time (eight chains, four streams): the fastest one-token read measured. */
    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        PanelKernels.matvec(w, from * cols * P, to - from, cols, x, xo, out, oo + from * P);
    }

    /**
     * Up to {@link #STREAMED_TOKENS} tokens (batched decode): groups of four whole panels through {@link PanelKernels#k8x2},
     * chunk of columns after chunk, pair of tokens after pair; the panels left over through {@link PanelKernels#k2x8}.
     * More tokens take k2x12 and k2x8 alone ({@link TokenGroups#width}): they load two weight vectors per 24 or 16
     * FMAs where k8x2 loads eight, and with a panel reused from L2 for 16 tokens or more that wins (k8x2 at 16
     * tokens: a 2048 x 768 matrix in cache 1.6x slower; docs/engine-speed.md). From memory, at up to 8 tokens,
     * k8x2's four streams win (1.3-1.5x). Not where the vector registers are 16 ({@link PanelKernels#SIXTEEN_REGISTERS}):
     * there k8x2's 16 sums, two weights and two broadcasts do not fit, and C2 keeps five sums on the stack (a load and
     * a store around each of their FMAs) and checks the bounds of each of the eight weight loads per column; every
     * call takes the token groups instead (k2x6, k2x4), 1.4-1.8x faster at 4 and 8 tokens in cache and from memory
     * on an AMD EPYC Zen 3 (docs/engine-speed.md).
     */
    @Override
    protected void panelsTokens(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (n > STREAMED_TOKENS || PanelKernels.SIXTEEN_REGISTERS) {
            groups(x, xo, n, out, oo, from, to);
            return;
        }
        int quads = Math.min(to, fullPanels) - from >> 2;
        int ps = cols * P;
        for (int g = 0; g < quads; g++) {
            int r0 = (from + g * 4) * P; // the quad's first row
            for (int t = 0; t < n; t++) { // the chains start from zero
                Arrays.fill(out, oo + t * rows + r0, oo + t * rows + r0 + 4 * P, 0f);
            }
            for (int c0 = 0; c0 < cols; c0 += PanelKernels.CHUNK) {
                int c1 = Math.min(cols, c0 + PanelKernels.CHUNK);
                for (int t0 = 0; t0 < n; t0 += 2) {
                    PanelKernels.k8x2(w, r0 * cols, cols, c0, c1, x, xo + t0 * cols, Math.min(2, n - t0), out,
                            oo + t0 * rows + r0, rows);
                }
            }
        }
        groups(x, xo, n, out, oo, from + quads * 4, to);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        floatGroup(w, p * cols * P, t0, valid, out, oo, os);
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(w, p * cols * P, cols * P);
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        for (int c = 0, i = (row / P) * cols * P + row % P; c < cols; c++, i += P) {
            dst[off + c] = w[i];
        }
    }
}
