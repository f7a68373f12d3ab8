package io.tnsr.engine.model;


import java.nio.ByteBuffer;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q6_K weights (ggml block_q6_K): super-blocks of 256 elements, 210 bytes each,
 * {@code [ql: 128 bytes][qh: 64 bytes][scales: 16 x int8][d: f16]}. Element e = 128 h + 32 q + l
 * (h in [0, 2), q in [0, 4), l in [0, 32)) is {@code d * scales[e / 16] * (q6 - 32)}, where the 6-bit q6 has
 * its low 4 bits in nibble q / 2 of ql[64 h + 32 (q % 2) + l] and its top 2 bits at bit 2q of qh[32 h + l].
 *
 * <p>Repacked at load ({@link #repack}) into one int8 per element, {@code q6 - 32} in element order, and one
 * float per 16-element group, {@code d * scales[g]}: the matrix is then Q8_0's with units of 16
 * ({@link Int8PanelMatrix}), where the 6-bit fields would cost two loads, four shifts and masks per 16 weights
 * in place.
 */
final class Q6KBlocks {
    private static final int QK = 256;
    private static final int BYTES = 210;
    private static final int GROUP = 16; // elements per scale
    /** Byte lanes of one repack step: 32 (or fewer, where vectors are narrower), dividing a 32-byte run of quants. */
    private static final VectorSpecies<Byte> REPACK = VectorSpecies.of(byte.class,
            VectorShape.forBitSize(Math.min(256, ByteVector.SPECIES_PREFERRED.vectorBitSize())));
    private Q6KBlocks() {
    }

    /** Splits {@code blocks} super-blocks from {@code data} into int8 values and float group scales. */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, QK)];
        float[] scales = new float[Math.multiplyExact(blocks, QK / GROUP)];
        byte[] sb = new byte[BYTES];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, BYTES);
            float d = Blocks.half(sb, 208);
            for (int g = 0; g < QK / GROUP; g++) {
                scales[k * (QK / GROUP) + g] = d * sb[192 + g];
            }
            // Element e = 128 h + 32 q + l: low nibble from byte 64 h + 32 (q & 1) + l (its high half when q >= 2),
            // two high bits from byte 128 + 32 h + l (bits 2q, 2q + 1). One pass per (h, l) writes all four q,
            // REPACK.length() elements of l at a time (element by element, this loop ran at 0.36 G elements/s: 20 s
            // for a 7B Q6_K file).
            for (int h = 0; h < 2; h++) {
                int out = k * QK + h * 128;
                for (int l = 0; l < 32; l += REPACK.length()) {
                    ByteVector ql0 = ByteVector.fromArray(REPACK, sb, h * 64 + l);
                    ByteVector ql1 = ByteVector.fromArray(REPACK, sb, h * 64 + 32 + l);
                    ByteVector qh = ByteVector.fromArray(REPACK, sb, 128 + h * 32 + l);
                    six(ql0.and((byte) 0xF), qh.lanewise(VectorOperators.LSHL, 4)).intoArray(quants, out + l);
                    six(ql1.and((byte) 0xF), qh.lanewise(VectorOperators.LSHL, 2)).intoArray(quants, out + 32 + l);
                    six(ql0.lanewise(VectorOperators.LSHR, 4), qh).intoArray(quants, out + 64 + l);
                    six(ql1.lanewise(VectorOperators.LSHR, 4), qh.lanewise(VectorOperators.LSHR, 2))
                            .intoArray(quants, out + 96 + l);
                }
            }
        }
        return new PackedBlocks(quants, scales);
    }

    /** q6 - 32 from a low nibble (0..15) and the two high bits at bits 4 and 5 of {@code high}. */
    private static ByteVector six(ByteVector low, ByteVector high) {
        return low.or(high.and((byte) 0x30)).sub((byte) 32);
    }
}
