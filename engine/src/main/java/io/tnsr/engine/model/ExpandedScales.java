package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;

/**
 * One panel's scales and negated mins as floats, {@code [units][P]} each, for the batched kernels of a matrix that
 * keeps them as bytes (Q4_K, Q5_K, Q2_K; {@link ScaleMinTotals#expand}) or halves (Q4_1), or its scales alone (Q3_K,
 * {@link #ofScales}): made when a group of tokens reaches a panel, kept while the next group is of the same panel.
 * Scratch of one matrix view, made on first use.
 */
final class ExpandedScales {
    private final int units;
    private final int subs;
    /** [units][P]: the scales of panel {@link #panel}. */
    float[] scales;
    /** [units][P]: the negated mins of panel {@link #panel}; none for a matrix without mins. */
    float[] mins;
    private int panel = -1;

    /**
     * @param units sub-blocks per row
     * @param subs  sub-blocks per super-block
     */
    ExpandedScales(int units, int subs) {
        this.units = units;
        this.subs = subs;
    }

    /** Panel p's, from Q4_1's halves {@code dm} ({@code [panels][units][P]}, {@link Q4KMatrix#scales}). */
    void ofHalves(int[] dm, int p) {
        if (panel == p) {
            return;
        }
        allocate();
        for (int i = 0, at = p * units * P; i < units * P; i += L) {
            IntVector v = IntVector.fromArray(Blocks.I, dm, at + i);
            Q4KMatrix.scales(v).intoArray(scales, i);
            Q4KMatrix.mins(v).intoArray(mins, i);
        }
        panel = p;
    }

    private void allocate() {
        if (scales == null) {
            scales = new float[units * P];
            mins = new float[units * P];
        }
    }

    /**
     * Panel p's scales, from the integer scales {@code sc} ({@code [panels][units][P]} bytes) times each super-block's
     * d ({@code [panels][units / subs][P]} floats): {@code d * sc}, the product a one-token kernel makes in registers.
     */
    void ofScales(byte[] sc, float[] d, int p) {
        if (panel == p) {
            return;
        }
        if (scales == null) {
            scales = new float[units * P];
        }
        for (int b = 0, so = p * units * P, dn = p * (units / subs) * P; b < units; b++) {
            for (int h = 0; h < P; h += L) {
                Blocks.signedBytes(sc, so + b * P + h).mul(FloatVector.fromArray(F, d, dn + b / subs * P + h))
                        .intoArray(scales, b * P + h);
            }
        }
        panel = p;
    }

    /** Panel p's, from the matrix's scale bytes sm and its d and -dmin dd ({@link ScaleMinTotals#putSuperBlock}). */
    void of(byte[] sm, float[] dd, int p) {
        if (panel == p) {
            return;
        }
        allocate();
        ScaleMinTotals.expand(sm, dd, p * units * 2 * P, p * (units / subs) * 2 * P, units, subs, scales, mins);
        panel = p;
    }
}
