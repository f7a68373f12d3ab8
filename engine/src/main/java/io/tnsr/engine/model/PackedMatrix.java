package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgmlType;

/**
 * A quantized matrix repacked at load ({@link PackedBlocks}) and kept row-major: Q4_K (Q8_0, Q6_K and Q4_0 go on into
 * row panels, {@link Int8PanelMatrix}, {@link Q4_0Matrix}). Each row is {@link #units}
 * scale units (a block, a sub-block or a group: whatever one scale covers) of {@code payload} quant bytes each;
 * the subclasses' kernels read {@link #quants}, {@link #scales} and (Q4_K) {@link #mins} straight from these
 * arrays. They sum in the quantized types' order (two chains, see {@link TileKernels}), and hold no reference to
 * the mapped file, whose mapping is released once collected.
 */
abstract class PackedMatrix extends WeightMatrix {
    private final GgmlType type;
    /** Scale units per row. */
    protected final int units;
    /** [rows * units * payload]: row r's from r * units * payload. */
    protected final byte[] quants;
    /** [rows * units]: row r's from r * units. */
    protected final float[] scales;
    /** [rows * units] for the types with a min per unit (Q4_K), else empty. */
    protected final float[] mins;

    /**
     * @param unitElements elements one scale covers
     * @param payload      quant bytes per unit
     * @param withMins     whether the type has a min per unit
     */
    PackedMatrix(String name, int rows, int cols, GgmlType type, PackedBlocks packed, int unitElements, int payload,
                 boolean withMins) {
        super(name, rows, cols, true);
        this.type = type;
        this.units = cols / unitElements;
        packed.requireShape(name, rows, units, payload);
        if (withMins != (packed.mins().length != 0)) {
            throw new IllegalArgumentException(name + ": " + type + (withMins ? " needs a min per sub-block"
                    : " has no mins, but the packed blocks do"));
        }
        this.quants = packed.quants();
        this.scales = packed.scales();
        this.mins = packed.mins();
    }

    @Override
    public final GgmlType type() {
        return type;
    }
}
