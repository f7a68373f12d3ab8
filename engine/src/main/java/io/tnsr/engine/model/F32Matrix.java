package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;

import io.tnsr.engine.gguf.GgmlType;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

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
final class F32Matrix extends WeightMatrix {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final int panels;
    /** Panels of whole rows (the last one is partial when rows % P != 0). */
    private final int fullPanels;
    /** [panels][cols][P]: row r, column c at (r / P) * cols * P + c * P + r % P. */
    private final float[] w;
    /** [TOKENS][P] outputs of a last partial panel before its valid rows are copied out. */
    private final float[] spill = new float[PanelKernels.TOKENS * P];

    /** Repacks {@code data}: rows x cols little-endian floats, row-major (the GGUF tensor). */
    F32Matrix(String name, int rows, int cols, ByteBuffer data) {
        super(name, rows, cols);
        this.panels = (rows + P - 1) / P;
        this.fullPanels = rows / P;
        long size = (long) panels * cols * P;
        if (size > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(name + ": " + rows + " x " + cols
                    + " F32 is more than one Java array holds (2^31 floats)");
        }
        this.w = new float[(int) size];
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

    /** Heap bytes a rows x cols F32 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return (rows + P - 1) / P * P * cols * Float.BYTES;
    }

    @Override
    public GgmlType type() {
        return GgmlType.F32;
    }

    @Override
    protected void matvec(float[] x, int xo, float[] out, int oo) {
        PanelKernels.matvec(w, 0, fullPanels, cols, x, xo, out, oo);
        if (fullPanels < panels) {
            PanelKernels.m1(w, fullPanels * cols * P, cols, x, xo, spill, 0);
            System.arraycopy(spill, 0, out, oo + fullPanels * P, rows - fullPanels * P);
        }
    }

    @Override
    protected void matmulTokens(float[] x, int xo, int n, float[] out, int oo) {
        for (int p = 0; p < panels; p++) {
            int wo = p * cols * P;
            int r0 = p * P;
            for (int t0 = 0; t0 < n; t0 += PanelKernels.TOKENS) {
                int valid = Math.min(PanelKernels.TOKENS, n - t0);
                if (p < fullPanels) {
                    PanelKernels.k2x8(w, wo, cols, x, xo + t0 * cols, valid, out, oo + t0 * rows + r0, rows);
                } else {
                    PanelKernels.k2x8(w, wo, cols, x, xo + t0 * cols, valid, spill, 0, P);
                    for (int j = 0; j < valid; j++) {
                        System.arraycopy(spill, j * P, out, oo + (t0 + j) * rows + r0, rows - r0);
                    }
                }
            }
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        for (int c = 0, i = (row / P) * cols * P + row % P; c < cols; c++, i += P) {
            dst[off + c] = w[i];
        }
    }
}
