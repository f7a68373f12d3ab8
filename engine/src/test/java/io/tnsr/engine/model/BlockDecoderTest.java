package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import io.tnsr.engine.memory.Region;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The block decoders and dot products of every weight type: hand-made blocks (packed here from chosen
 * integers, the way ggml's quantizers pack them) decode to the values the layout defines; random blocks give
 * the same products as a scalar reference (a plain port of ggml's dequantize_row_* followed by a double
 * precision dot product); and one token alone gives bit-identical results to the same token inside a batch.
 */
class BlockDecoderTest {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    static WeightMatrix matrix(GgmlType t, int rows, int cols, ByteBuffer b) {
        ByteBuffer data = b.duplicate().order(LE);
        return switch (t) {
            case F32 -> new F32Matrix("w", rows, cols, data);
            case F16 -> new F16Matrix("w", rows, cols, Region.copyOf(data));
            case Q8_0 -> Int8PanelMatrix.q8_0("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 32)));
            case Q4_0 -> new Q4_0Matrix("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 32)));
            case Q4_K -> new Q4KMatrix("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 256)));
            case Q6_K -> Int8PanelMatrix.q6_K("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 256)));
            case Q5_0 -> new Q5_0Matrix("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 32)));
            case IQ4_NL -> Int8PanelMatrix.iq4_nl("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 32)));
            case IQ4_XS -> Int8PanelMatrix.iq4_xs("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 256)));
            case Q3_K -> new Q3KMatrix("w", rows, cols, PackedBlocks.unpack(data, t, rows * (cols / 256)));
            case BF16 -> new BF16Matrix("w", rows, cols, data);
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    /** ggml's kvalues_iq4nl. */
    private static final int[] IQ4NL = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

    private static float[] row0(GgmlType t, int cols, ByteBuffer b) {
        float[] out = new float[cols];
        matrix(t, 1, cols, b).readRow(0, out, 0);
        return out;
    }

    private static ByteBuffer buf(int bytes) {
        return ByteBuffer.allocate(bytes).order(LE);
    }

    @Test
    void q8_0HandMadeBlock() {
        ByteBuffer b = buf(34);
        b.putShort(0, Float16.fromFloat(0.5f));
        float[] want = new float[32];
        for (int i = 0; i < 32; i++) {
            int q = i * 8 - 128; // -128 .. 120
            b.put(2 + i, (byte) q);
            want[i] = q * 0.5f;
        }
        assertArrayEquals(want, row0(GgmlType.Q8_0, 32, b), 0f);
    }

    @Test
    void q4_0HandMadeBlock() {
        ByteBuffer b = buf(18);
        b.putShort(0, Float16.fromFloat(-2f));
        float[] want = new float[32];
        for (int i = 0; i < 16; i++) {
            int lo = i;
            int hi = 15 - i;
            b.put(2 + i, (byte) (lo | hi << 4));
            want[i] = (lo - 8) * -2f;
            want[16 + i] = (hi - 8) * -2f;
        }
        assertArrayEquals(want, row0(GgmlType.Q4_0, 32, b), 0f);
    }

    @Test
    void q4_KHandMadeBlock() {
        int[] sc = {1, 63, 2, 40, 17, 33, 48, 5};   // 6-bit scales of the 8 sub-blocks
        int[] m = {0, 7, 63, 12, 50, 1, 32, 60};    // 6-bit mins
        ByteBuffer b = buf(144);
        b.putShort(0, Float16.fromFloat(0.25f));
        b.putShort(2, Float16.fromFloat(0.125f));
        for (int j = 0; j < 8; j++) { // the packing of ggml's quantize_row_q4_K
            if (j < 4) {
                b.put(4 + j, (byte) sc[j]);
                b.put(4 + j + 4, (byte) m[j]);
            } else {
                b.put(4 + j + 4, (byte) ((sc[j] & 0xF) | (m[j] & 0xF) << 4));
                b.put(4 + j - 4, (byte) (b.get(4 + j - 4) | (sc[j] >> 4) << 6));
                b.put(4 + j, (byte) (b.get(4 + j) | (m[j] >> 4) << 6));
            }
        }
        float[] want = new float[256];
        for (int e = 0; e < 256; e++) {
            int s = e / 32;
            int q = (e * 7 + 3) % 16;
            int at = 16 + (s / 2) * 32 + e % 32;
            b.put(at, (byte) (s % 2 == 0 ? (b.get(at) & 0xF0) | q : (b.get(at) & 0x0F) | q << 4));
            want[e] = 0.25f * sc[s] * q - 0.125f * m[s];
        }
        assertArrayEquals(want, row0(GgmlType.Q4_K, 256, b), 0f);
    }

    @Test
    void q6_KHandMadeBlock() {
        ByteBuffer b = buf(210);
        b.putShort(208, Float16.fromFloat(0.5f));
        for (int g = 0; g < 16; g++) {
            b.put(192 + g, (byte) (g * 9 - 70)); // signed scales
        }
        float[] want = new float[256];
        for (int e = 0; e < 256; e++) {
            int q6 = (e * 37 + 11) % 64;
            int h = e / 128;
            int q = e % 128 / 32;
            int l = e % 32;
            int lo = 64 * h + 32 * (q % 2) + l;
            b.put(lo, (byte) (q < 2 ? (b.get(lo) & 0xF0) | (q6 & 0xF) : (b.get(lo) & 0x0F) | (q6 & 0xF) << 4));
            int hi = 128 + 32 * h + l;
            b.put(hi, (byte) (b.get(hi) | (q6 >> 4) << (2 * q)));
            want[e] = 0.5f * (e / 16 * 9 - 70) * (q6 - 32);
        }
        assertArrayEquals(want, row0(GgmlType.Q6_K, 256, b), 0f);
    }

    @Test
    void q5_0HandMadeBlock() {
        ByteBuffer b = buf(22);
        b.putShort(0, Float16.fromFloat(-0.25f));
        float[] want = new float[32];
        int qh = 0;
        for (int e = 0; e < 32; e++) {
            int q5 = (e * 13 + 5) % 32; // 0..31, every high bit pattern
            int at = 6 + e % 16;
            b.put(at, (byte) (e < 16 ? (b.get(at) & 0xF0) | (q5 & 0xF) : (b.get(at) & 0x0F) | (q5 & 0xF) << 4));
            qh |= (q5 >> 4) << e;
            want[e] = (q5 - 16) * -0.25f;
        }
        b.putInt(2, qh);
        assertArrayEquals(want, row0(GgmlType.Q5_0, 32, b), 0f);
    }

    @Test
    void iq4_nlHandMadeBlock() {
        ByteBuffer b = buf(18);
        b.putShort(0, Float16.fromFloat(0.125f));
        float[] want = new float[32];
        for (int j = 0; j < 16; j++) {
            int lo = j;
            int hi = (j * 7 + 3) % 16;
            b.put(2 + j, (byte) (lo | hi << 4));
            want[j] = 0.125f * IQ4NL[lo];
            want[16 + j] = 0.125f * IQ4NL[hi];
        }
        assertArrayEquals(want, row0(GgmlType.IQ4_NL, 32, b), 0f);
    }

    @Test
    void iq4_xsHandMadeBlock() {
        int[] ls = {0, 63, 32, 31, 17, 48, 1, 40}; // 6-bit sub-block scales, ls - 32 in [-32, 31]
        ByteBuffer b = buf(136);
        b.putShort(0, Float16.fromFloat(0.5f));
        int scalesH = 0;
        for (int ib = 0; ib < 8; ib++) {
            b.put(4 + ib / 2, (byte) (b.get(4 + ib / 2) | (ls[ib] & 0xF) << 4 * (ib % 2)));
            scalesH |= (ls[ib] >> 4) << 2 * ib;
        }
        b.putShort(2, (short) scalesH);
        float[] want = new float[256];
        for (int e = 0; e < 256; e++) {
            int ib = e / 32;
            int nib = (e * 5 + 1) % 16;
            int at = 8 + 16 * ib + e % 16;
            b.put(at, (byte) (e % 32 < 16 ? (b.get(at) & 0xF0) | nib : (b.get(at) & 0x0F) | nib << 4));
            want[e] = 0.5f * (ls[ib] - 32) * IQ4NL[nib];
        }
        assertArrayEquals(want, row0(GgmlType.IQ4_XS, 256, b), 0f);
    }

    @Test
    void q3_KHandMadeBlock() {
        ByteBuffer b = buf(110);
        b.putShort(108, Float16.fromFloat(0.25f));
        int[] sc = new int[16];
        for (int g = 0; g < 16; g++) { // the packing of ggml's quantize_row_q3_K_ref
            sc[g] = (g * 23 + 7) % 64;
            if (g < 8) {
                b.put(96 + g, (byte) (sc[g] & 0xF));
            } else {
                b.put(96 + g - 8, (byte) (b.get(96 + g - 8) | (sc[g] & 0xF) << 4));
            }
            b.put(96 + 8 + g % 4, (byte) (b.get(96 + 8 + g % 4) | (sc[g] >> 4) << 2 * (g / 4)));
        }
        float[] want = new float[256];
        for (int e = 0; e < 256; e++) {
            int q3 = (e * 11 + 2) % 8; // 0..7: q3 - 4 in [-4, 3], its top bit in hmask
            int n = e / 128;
            int j = e % 128 / 32;
            int k = e % 32;
            b.put(32 + 32 * n + k, (byte) (b.get(32 + 32 * n + k) | (q3 & 3) << 2 * j));
            b.put(k, (byte) (b.get(k) | (q3 >> 2) << 4 * n + j));
            want[e] = 0.25f * (sc[e / 16] - 32) * (q3 - 4);
        }
        assertArrayEquals(want, row0(GgmlType.Q3_K, 256, b), 0f);
    }

    @Test
    void bf16IsTheTopHalfOfAFloat() {
        float[] v = {1f, -2.5f, 0x1p-130f, Float.NEGATIVE_INFINITY, 3.140625f, -0f, 65280f};
        ByteBuffer b = buf(2 * v.length);
        for (int i = 0; i < v.length; i++) {
            b.putShort(2 * i, (short) (Float.floatToIntBits(v[i]) >>> 16)); // each exact in bfloat16
        }
        assertArrayEquals(v, row0(GgmlType.BF16, v.length, b), 0f);
    }

    /**
     * Every one of the 65536 halves widens to what the scalar {@link Float16#toFloat(int)} gives: through the
     * three-operation path when the tensor has no Inf or NaN, through the general one when it has (the same bits for
     * every finite half). And a row's product is the same whichever path its matrix takes.
     */
    @Test
    void f16EveryHalfWidensExactlyWithAndWithoutInfAndNaNInTheTensor() {
        ByteBuffer all = buf(2 * 65536);
        ByteBuffer finite = buf(2 * (65536 - 2048)); // less the 2 x 1024 halves with all exponent bits set
        int f = 0;
        for (int h = 0; h < 65536; h++) {
            all.putShort(2 * h, (short) h);
            if ((h & 0x7c00) != 0x7c00) {
                finite.putShort(2 * f++, (short) h);
            }
        }
        float[] general = row0(GgmlType.F16, 65536, all);
        for (int h = 0; h < 65536; h++) {
            float want = Float16.toFloat(h);
            assertEquals(Float.isNaN(want) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(want)),
                    Float.isNaN(general[h]) ? "NaN" : Integer.toHexString(Float.floatToRawIntBits(general[h])),
                    "half 0x" + Integer.toHexString(h) + " (general path)");
        }
        float[] fast = row0(GgmlType.F16, f, finite);
        for (int i = 0; i < f; i++) {
            int h = finite.getShort(2 * i) & 0xFFFF;
            assertEquals(Float.floatToRawIntBits(Float16.toFloat(h)), Float.floatToRawIntBits(fast[i]),
                    "half 0x" + Integer.toHexString(h) + " (finite path)");
        }

        int cols = 200; // whole vectors and a scalar tail at every width
        int rows = 6;   // a block of four rows and two alone
        ByteBuffer finiteRows = randomMatrix(GgmlType.F16, rows, cols, 5);
        for (int c = 0; c < rows * cols; c++) { // random halves, none of them Inf or NaN
            if ((finiteRows.getShort(2 * c) & 0x7c00) == 0x7c00) {
                finiteRows.putShort(2 * c, (short) (finiteRows.getShort(2 * c) & 0x83ff));
            }
        }
        ByteBuffer withNaN = buf(2 * rows * cols);
        for (int c = 0; c < rows * cols; c++) {
            withNaN.putShort(2 * c, finiteRows.getShort(2 * c));
        }
        withNaN.putShort(2 * (rows - 1) * cols, (short) 0x7e00); // the last row starts with a NaN: the general path
        float[] x = new float[cols];
        SplittableRandom r = new SplittableRandom(6);
        for (int c = 0; c < cols; c++) {
            x[c] = (float) r.nextGaussian();
        }
        float[] fastOut = new float[rows];
        float[] generalOut = new float[rows];
        matrix(GgmlType.F16, rows, cols, finiteRows).matmul(x, 0, 1, fastOut, 0);
        matrix(GgmlType.F16, rows, cols, withNaN).matmul(x, 0, 1, generalOut, 0);
        for (int i = 0; i < rows - 1; i++) {
            assertEquals(Float.floatToRawIntBits(generalOut[i]), Float.floatToRawIntBits(fastOut[i]), "row " + i);
        }
        assertTrue(Float.isNaN(generalOut[rows - 1]), "a NaN weight still gives NaN");
    }

    /** Random bytes of {@code rows x cols} of type t, with sane half-precision scales in their slots. */
    static ByteBuffer randomMatrix(GgmlType t, int rows, int cols, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        int bytes = (int) t.bytesFor((long) rows * cols);
        ByteBuffer b = buf(bytes);
        for (int i = 0; i < bytes; i++) {
            b.put(i, (byte) r.nextInt(256));
        }
        int blocks = bytes / t.blockBytes();
        for (int k = 0; k < blocks; k++) {
            int bb = k * t.blockBytes();
            switch (t) {
                case F32 -> b.putFloat(bb, (float) r.nextGaussian());
                case F16 -> b.putShort(bb, Float16.fromFloat((float) r.nextGaussian()));
                case Q8_0, Q4_0 -> b.putShort(bb, Float16.fromFloat((float) (r.nextDouble() * 0.02 - 0.01)));
                case Q4_K -> {
                    b.putShort(bb, Float16.fromFloat((float) (r.nextDouble() * 0.002)));
                    b.putShort(bb + 2, Float16.fromFloat((float) (r.nextDouble() * 0.002)));
                }
                case Q6_K -> b.putShort(bb + 208, Float16.fromFloat((float) (r.nextDouble() * 0.002)));
                case Q5_0, IQ4_NL, IQ4_XS -> b.putShort(bb, Float16.fromFloat((float) (r.nextDouble() * 0.002 - 0.001)));
                case Q3_K -> b.putShort(bb + 108, Float16.fromFloat((float) (r.nextDouble() * 0.002 - 0.001)));
                case BF16 -> b.putShort(bb, (short) (Float.floatToIntBits((float) r.nextGaussian()) >>> 16));
                default -> throw new IllegalArgumentException(t.toString());
            }
        }
        return b;
    }

    /** ggml's dequantize_row_* for one row, scalar. */
    static float[] reference(GgmlType t, ByteBuffer b, int row, int cols) {
        float[] y = new float[cols];
        int bs = t.blockBytes();
        int base = (int) t.bytesFor((long) row * cols);
        for (int k = 0; k < cols / t.blockSize(); k++) {
            int bb = base + k * bs;
            int y0 = k * t.blockSize();
            switch (t) {
                case F32 -> y[y0] = b.getFloat(bb);
                case F16 -> y[y0] = Float16.toFloat(b.getShort(bb));
                case Q8_0 -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    for (int i = 0; i < 32; i++) {
                        y[y0 + i] = b.get(bb + 2 + i) * d;
                    }
                }
                case Q4_0 -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    for (int i = 0; i < 16; i++) {
                        int q = b.get(bb + 2 + i) & 0xFF;
                        y[y0 + i] = ((q & 0xF) - 8) * d;
                        y[y0 + 16 + i] = ((q >> 4) - 8) * d;
                    }
                }
                case Q4_K -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    float dmin = Float16.toFloat(b.getShort(bb + 2));
                    for (int j = 0; j < 8; j++) {
                        int s;
                        int m;
                        int u = bb + 4;
                        if (j < 4) {
                            s = b.get(u + j) & 63;
                            m = b.get(u + j + 4) & 63;
                        } else {
                            s = (b.get(u + j + 4) & 0xF) | ((b.get(u + j - 4) & 0xFF) >> 6) << 4;
                            m = ((b.get(u + j + 4) & 0xFF) >> 4) | ((b.get(u + j) & 0xFF) >> 6) << 4;
                        }
                        float d1 = d * s;
                        float m1 = dmin * m;
                        for (int l = 0; l < 32; l++) {
                            int q = b.get(bb + 16 + (j / 2) * 32 + l) & 0xFF;
                            y[y0 + 32 * j + l] = d1 * (j % 2 == 0 ? q & 0xF : q >> 4) - m1;
                        }
                    }
                }
                case Q6_K -> {
                    float d = Float16.toFloat(b.getShort(bb + 208));
                    for (int n = 0; n < 2; n++) {
                        int ql = bb + 64 * n;
                        int qh = bb + 128 + 32 * n;
                        int sc = bb + 192 + 8 * n;
                        for (int l = 0; l < 32; l++) {
                            int is = l / 16;
                            int h = b.get(qh + l) & 0xFF;
                            int a = b.get(ql + l) & 0xFF;
                            int c = b.get(ql + l + 32) & 0xFF;
                            y[y0 + 128 * n + l] = d * b.get(sc + is) * ((a & 0xF | (h & 3) << 4) - 32);
                            y[y0 + 128 * n + l + 32] = d * b.get(sc + is + 2) * ((c & 0xF | (h >> 2 & 3) << 4) - 32);
                            y[y0 + 128 * n + l + 64] = d * b.get(sc + is + 4) * ((a >> 4 | (h >> 4 & 3) << 4) - 32);
                            y[y0 + 128 * n + l + 96] = d * b.get(sc + is + 6) * ((c >> 4 | (h >> 6 & 3) << 4) - 32);
                        }
                    }
                }
                case Q5_0 -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    int qh = b.getInt(bb + 2);
                    for (int j = 0; j < 16; j++) {
                        int xh0 = ((qh >>> j) << 4) & 0x10;
                        int xh1 = (qh >>> (j + 12)) & 0x10;
                        int q = b.get(bb + 6 + j) & 0xFF;
                        y[y0 + j] = ((q & 0x0F | xh0) - 16) * d;
                        y[y0 + 16 + j] = ((q >> 4 | xh1) - 16) * d;
                    }
                }
                case IQ4_NL -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    for (int j = 0; j < 16; j++) {
                        int q = b.get(bb + 2 + j) & 0xFF;
                        y[y0 + j] = d * IQ4NL[q & 0xF];
                        y[y0 + 16 + j] = d * IQ4NL[q >> 4];
                    }
                }
                case IQ4_XS -> {
                    float d = Float16.toFloat(b.getShort(bb));
                    int scalesH = b.getShort(bb + 2) & 0xFFFF;
                    for (int ib = 0; ib < 8; ib++) {
                        int ls = ((b.get(bb + 4 + ib / 2) & 0xFF) >> 4 * (ib % 2)) & 0xF | ((scalesH >> 2 * ib) & 3) << 4;
                        float dl = d * (ls - 32);
                        for (int j = 0; j < 16; j++) {
                            int q = b.get(bb + 8 + 16 * ib + j) & 0xFF;
                            y[y0 + 32 * ib + j] = dl * IQ4NL[q & 0xF];
                            y[y0 + 32 * ib + 16 + j] = dl * IQ4NL[q >> 4];
                        }
                    }
                }
                case Q3_K -> { // ggml's word-wise unpacking of the 12 scale bytes
                    float dAll = Float16.toFloat(b.getShort(bb + 108));
                    int a0 = b.getInt(bb + 96);
                    int a1 = b.getInt(bb + 100);
                    int tmp = b.getInt(bb + 104);
                    int kmask1 = 0x03030303;
                    int kmask2 = 0x0f0f0f0f;
                    int[] aux = {
                        (a0 & kmask2) | (((tmp >>> 0) & kmask1) << 4),
                        (a1 & kmask2) | (((tmp >>> 2) & kmask1) << 4),
                        ((a0 >>> 4) & kmask2) | (((tmp >>> 4) & kmask1) << 4),
                        ((a1 >>> 4) & kmask2) | (((tmp >>> 6) & kmask1) << 4)};
                    int yi = y0;
                    int is = 0;
                    int m = 1; // hmask bit: not reset between the two halves
                    for (int n = 0; n < 256; n += 128) {
                        int q = bb + 32 + n / 4;
                        int shift = 0;
                        for (int j = 0; j < 4; j++) {
                            for (int half = 0; half < 2; half++) {
                                int scale = (byte) (aux[is / 4] >>> 8 * (is % 4));
                                is++;
                                float dl = dAll * (scale - 32);
                                for (int l = 0; l < 16; l++) {
                                    int i = 16 * half + l;
                                    int lo = ((b.get(q + i) & 0xFF) >> shift) & 3;
                                    y[yi++] = dl * (lo - ((b.get(bb + i) & m) != 0 ? 0 : 4));
                                }
                            }
                            shift += 2;
                            m <<= 1;
                        }
                    }
                }
                case BF16 -> y[y0] = Float.intBitsToFloat((b.getShort(bb) & 0xFFFF) << 16);
                default -> throw new IllegalArgumentException(t.toString());
            }
        }
        return y;
    }

    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q6_K", "Q5_0", "IQ4_NL", "IQ4_XS", "Q3_K"})
    void randomBlocksDecodeAndMultiplyLikeTheScalarReference(GgmlType t) {
        int rows = 11; // two 4-row groups and 3 rows left over
        int cols = t.blockSize() == 256 ? 512 : t.blockSize() == 32 ? 96 : 70; // 70: a tail after the vectors
        ByteBuffer b = randomMatrix(t, rows, cols, 17 + t.ordinal());
        WeightMatrix w = matrix(t, rows, cols, b);
        int n = 6;
        float[] x = new float[n * cols];
        SplittableRandom r = new SplittableRandom(3);
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) r.nextGaussian();
        }
        float[] q4kScales = t == GgmlType.Q4_K ? subBlockScales(Q4KMatrix.repack(b, rows * cols / 256)) : null;
        PackedBlocks q3k = t == GgmlType.Q3_K ? Q3KMatrix.repack(b, rows * cols / 256) : null;
        float[] batched = new float[n * rows];
        w.matmul(x, 0, n, batched, 0);
        float[] decoded = new float[cols];
        for (int row = 0; row < rows; row++) {
            float[] ref = reference(t, b, row, cols);
            w.readRow(row, decoded, 0);
            assertArrayEquals(ref, decoded, 0f, t + " row " + row + " decodes like ggml");
            for (int tok = 0; tok < n; tok++) {
                double dot = 0;
                double mag = 0;
                // Q4_0, Q5_0, Q4_K and Q3_K round x to 8 bits per block of 32, at most half a step (amax / 254) each,
                // and multiply the rounded x by (q - 8) * scale: |ref| for Q4_0 and Q5_0, at most 8 * scale for Q4_K (its mins
                // are applied to the sum of x itself), 4 * scale for Q3_K (q3 * scale, no min)
                double rounding = 0;
                for (int c = 0; c < cols; c++) {
                    dot += (double) ref[c] * x[tok * cols + c];
                    mag += Math.abs((double) ref[c] * x[tok * cols + c]);
                    if (t == GgmlType.Q4_0 || t == GgmlType.Q5_0 || t == GgmlType.Q4_K || t == GgmlType.Q3_K) {
                        double amax = 0;
                        for (int k = c / 32 * 32; k < c / 32 * 32 + 32; k++) {
                            amax = Math.max(amax, Math.abs(x[tok * cols + k]));
                        }
                        double weight = t == GgmlType.Q4_0 || t == GgmlType.Q5_0 ? Math.abs(ref[c])
                                : t == GgmlType.Q4_K ? 8 * Math.abs(q4kScales[row * (cols / 32) + c / 32])
                                : 4 * Math.abs(q3k.scales()[(row * cols + c) / 256] * q3k.quants()[(row * cols + c) / 256 * 144 + c % 256 / 16]);
                        rounding += weight * amax / 254;
                    }
                }
                float got = batched[tok * rows + row];
                assertTrue(Math.abs(got - dot) <= 1e-5 * mag + rounding,
                        t + " row " + row + " token " + tok + ": " + got + " vs " + dot + " (rounding bound " + rounding + ")");
            }
        }
        for (int tok = 0; tok < n; tok++) { // one token alone (matvec) == the same token in the batch (tiles)
            float[] one = new float[rows];
            w.matmul(x, tok * cols, 1, one, 0);
            for (int row = 0; row < rows; row++) {
                assertEquals(Float.floatToIntBits(batched[tok * rows + row]), Float.floatToIntBits(one[row]),
                        t + " token " + tok + " row " + row + ": alone " + one[row] + ", batched " + batched[tok * rows + row]);
            }
        }
    }

    /** Q4_K's scale of every 32-element sub-block, d * sc, from its repacked super-blocks (8 sc, 8 m, 128 nibbles). */
    private static float[] subBlockScales(PackedBlocks p) {
        float[] scales = new float[p.scales().length * 8];
        for (int i = 0; i < scales.length; i++) {
            scales[i] = p.scales()[i / 8] * p.quants()[i / 8 * 144 + i % 8];
        }
        return scales;
    }
}
