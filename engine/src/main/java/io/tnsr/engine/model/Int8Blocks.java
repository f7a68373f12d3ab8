package io.tnsr.engine.model;

import java.nio.ByteBuffer;

/**
 * The ggml block types whose every element is a small integer times a float scale of its block or sub-block,
 * repacked at load into one int8 per element and one float per unit ({@link PackedBlocks}), the layout of
 * {@link Int8PanelMatrix}. Each value and scale is the one ggml's {@code dequantize_row_*} multiplies, the scale
 * computed in the same float operations, so {@code int8 * scale} is ggml's dequantized float bit for bit:
 * <ul>
 * <li>Q5_0 (block_q5_0: 32 elements, 22 bytes {@code [d: f16][qh: u32][qs: 16 bytes]}): element j < 16 is
 * {@code (qs[j] & 0xF | bit j of qh << 4) - 16}, element j + 16 {@code (qs[j] >> 4 | bit j + 16 of qh << 4) - 16},
 * in [-16, 15]; scale d per 32 ({@link #q5_0}).</li>
 * <li>IQ4_NL (block_iq4_nl: 32 elements, 18 bytes {@code [d: f16][qs: 16 bytes]}): element j < 16 is
 * {@code KVALUES[qs[j] & 0xF]}, element j + 16 {@code KVALUES[qs[j] >> 4]}; scale d per 32 ({@link #iq4_nl}).</li>
 * <li>IQ4_XS (block_iq4_xs: 256 elements, 136 bytes {@code [d: f16][scales_h: u16][scales_l: 4 bytes][qs: 128]}):
 * sub-block ib of 32 elements is IQ4_NL's nibbles at qs[16 ib..], with the 6-bit
 * {@code ls = (scales_l[ib / 2] >> 4 (ib % 2)) & 0xF | ((scales_h >> 2 ib) & 3) << 4}; scale
 * {@code d * (ls - 32)} per 32 ({@link #iq4_xs}).</li>
 * </ul>
 *
 * <p>Why int8: the values are then Q8_0's ({@link Int8PanelMatrix}: one conversion and one FMA per weight, the scale
 * once per unit), where IQ4's table lookup in the loop would cost several operations per weight. The cost is heap:
 * per 256 elements 288 bytes (file: IQ4_NL 144, IQ4_XS 136), see {@link WeightMatrix#HEAP_PER_FILE_BYTE}. Q5_0's
 * values go on to {@link Q5_0Matrix}, which keeps them as 4 bits and a bit plane.
 */
final class Int8Blocks {
    /** ggml's kvalues_iq4nl: the 16 values an IQ4_NL / IQ4_XS nibble stands for. */
    static final byte[] KVALUES = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
    /** For each byte of IQ4 nibbles: {@code KVALUES[b & 0xF]} at [2b], {@code KVALUES[b >> 4]} at [2b + 1]. */
    private static final byte[] IQ4_PAIRS = new byte[512];
    private static final int QK_K = 256;

    static {
        for (int b = 0; b < 256; b++) {
            IQ4_PAIRS[2 * b] = KVALUES[b & 0xF];
            IQ4_PAIRS[2 * b + 1] = KVALUES[b >> 4];
        }
    }

    private Int8Blocks() {
    }

    /** Q5_0: int8 in [-16, 15] per element, d per 32. */
    static PackedBlocks q5_0(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, 32)];
        float[] scales = new float[blocks];
        byte[] b = new byte[22];
        for (int k = 0; k < blocks; k++) {
            data.get(k * 22, b, 0, 22);
            scales[k] = Blocks.half(b, 0);
            int qh = (b[2] & 0xFF) | (b[3] & 0xFF) << 8 | (b[4] & 0xFF) << 16 | (b[5] & 0xFF) << 24;
            int out = k * 32;
            for (int j = 0; j < 16; j++) {
                int q = b[6 + j];
                quants[out + j] = (byte) (((q & 0xF) | ((qh >>> j) & 1) << 4) - 16);
                quants[out + 16 + j] = (byte) ((((q >> 4) & 0xF) | ((qh >>> (j + 16)) & 1) << 4) - 16);
            }
        }
        return new PackedBlocks(quants, scales);
    }

    /** IQ4_NL: KVALUES[nibble] per element, d per 32. */
    static PackedBlocks iq4_nl(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, 32)];
        float[] scales = new float[blocks];
        byte[] b = new byte[18];
        for (int k = 0; k < blocks; k++) {
            data.get(k * 18, b, 0, 18);
            scales[k] = Blocks.half(b, 0);
            nibbles(b, 2, quants, k * 32);
        }
        return new PackedBlocks(quants, scales);
    }

    /** IQ4_XS: KVALUES[nibble] per element, d * (ls - 32) per 32. */
    static PackedBlocks iq4_xs(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, QK_K)];
        float[] scales = new float[Math.multiplyExact(blocks, 8)];
        byte[] b = new byte[136];
        for (int k = 0; k < blocks; k++) {
            data.get(k * 136, b, 0, 136);
            float d = Blocks.half(b, 0);
            int scalesH = (b[2] & 0xFF) | (b[3] & 0xFF) << 8;
            for (int ib = 0; ib < 8; ib++) {
                int ls = ((b[4 + ib / 2] & 0xFF) >> 4 * (ib % 2)) & 0xF | ((scalesH >> 2 * ib) & 3) << 4;
                scales[k * 8 + ib] = d * (ls - 32);
                nibbles(b, 8 + 16 * ib, quants, k * QK_K + 32 * ib);
            }
        }
        return new PackedBlocks(quants, scales);
    }

    /** 16 bytes of IQ4 nibbles from b[off]: their 32 values, low nibbles first, into quants[out..]. */
    private static void nibbles(byte[] b, int off, byte[] quants, int out) {
        for (int j = 0; j < 16; j++) {
            int pair = 2 * (b[off + j] & 0xFF);
            quants[out + j] = IQ4_PAIRS[pair];
            quants[out + 16 + j] = IQ4_PAIRS[pair + 1];
        }
    }
}
