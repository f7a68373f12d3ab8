package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import io.tnsr.engine.kernels.Float16;
import io.tnsr.engine.testing.SharedData;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Locale;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The "scale and min" types Q4_1, Q5_K, Q2_K and Q3_K (taken as {@code d (sc - 32) q3}, offset and min zero): blocks
 * decode bit for bit as a plain port of ggml's dequantize_row_q4_1 / _q5_K / _q2_K / _q3_K ({@link #dequantize},
 * written here from the block layouts, not from the engine's repack; Q3_K's from {@link BlockDecoderTest}); every (row, token) of a matmul is the scalar reference of the documented order (8-bit
 * activations per block of 32, an exact integer sum per sub-block, then the scale and min terms), bit for bit, for
 * one token and any number; the result is within a derived bound of the double-precision product of the dequantized
 * weights; and the tensors of llama-quantize's files decode close to the F32 original's.
 *
 * <p>The bound, per (row, token): the kernels compute {@code sum (q - o) * scale * s * xq + (o * scale - min) * sx}
 * where {@code s * xq} is x rounded to the activations' grid, |x - s * xq| &lt;= s / 2 with s = amax / 127 over x's
 * block of 32. So the product differs from the exact one by at most {@code sum_c |scale (q_c - o)| * amax / 254}
 * (the activations' rounding), plus float rounding, bounded by {@code 64 eps * sum_c (|w_c| + |scale (q_c - o)| +
 * |o scale - min|) |x_c|} (each sum is a chain of at most 32 terms, then at most cols / 16 sub-block terms; 64
 * eps is loose for that).
 */
class ScaleMinTypesTest {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    /** The matrix of {@code rows x cols} type-t blocks in {@code b}, as WeightMatrix.load builds it. */
    static WeightMatrix matrix(GgmlType t, int rows, int cols, ByteBuffer b) {
        ByteBuffer data = b.duplicate().order(LE);
        PackedBlocks p = PackedBlocks.unpack(data, t, rows * (cols / t.blockSize()));
        return switch (t) {
            case Q4_1 -> Q4KMatrix.q4_1("w", rows, cols, p);
            case Q5_K -> new Q5KMatrix("w", rows, cols, p);
            case Q2_K -> new Q2KMatrix("w", rows, cols, p);
            case Q3_K -> new Q3KMatrix("w", rows, cols, p);
            default -> throw new IllegalArgumentException(t.toString());
        };
    }

    /** Random blocks with sane scales: d, dmin (Q4_1: d, m) small finite halves, every other byte random. */
    static ByteBuffer randomBlocks(GgmlType t, int rows, int cols, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        int bytes = (int) t.bytesFor((long) rows * cols);
        ByteBuffer b = ByteBuffer.allocate(bytes).order(LE);
        for (int i = 0; i < bytes; i++) {
            b.put(i, (byte) r.nextInt(256));
        }
        for (int bb = 0; bb < bytes; bb += t.blockBytes()) {
            if (t == GgmlType.Q3_K) { // d only, at the end; the scales are the random bytes
                b.putShort(bb + 108, Float16.fromFloat((float) (r.nextDouble() * 0.002)));
                continue;
            }
            int at = t == GgmlType.Q2_K ? bb + 80 : bb;
            b.putShort(at, Float16.fromFloat((float) (r.nextDouble() * 0.002)));
            b.putShort(at + 2, Float16.fromFloat((float) (t == GgmlType.Q4_1 ? r.nextDouble() * 0.02 - 0.01
                    : r.nextDouble() * 0.002)));
        }
        return b;
    }

    /** ggml's dequantize_row_q4_1 / _q5_K / _q2_K of row {@code row}, scalar, from the bytes. */
    static float[] dequantize(GgmlType t, ByteBuffer b, int row, int cols) {
        if (t == GgmlType.Q3_K) {
            return BlockDecoderTest.reference(t, b, row, cols);
        }
        float[] y = new float[cols];
        int bs = t.blockBytes();
        int base = (int) t.bytesFor((long) row * cols);
        int yi = 0;
        for (int k = 0; k < cols / t.blockSize(); k++) {
            int x = base + k * bs;
            switch (t) {
                case Q4_1 -> {
                    float d = Float16.toFloat(b.getShort(x));
                    float m = Float16.toFloat(b.getShort(x + 2));
                    for (int j = 0; j < 16; j++) {
                        int x0 = b.get(x + 4 + j) & 0x0F;
                        int x1 = (b.get(x + 4 + j) & 0xFF) >> 4;
                        y[yi + j] = x0 * d + m;
                        y[yi + j + 16] = x1 * d + m;
                    }
                    yi += 32;
                }
                case Q5_K -> {
                    float d = Float16.toFloat(b.getShort(x));
                    float min = Float16.toFloat(b.getShort(x + 2));
                    int scales = x + 4;
                    int qh = x + 16;
                    int ql = x + 48;
                    int is = 0;
                    int u1 = 1;
                    int u2 = 2;
                    for (int j = 0; j < 256; j += 64) {
                        int[] sm = scaleMinK4(is, b, scales);
                        float d1 = d * sm[0];
                        float m1 = min * sm[1];
                        sm = scaleMinK4(is + 1, b, scales);
                        float d2 = d * sm[0];
                        float m2 = min * sm[1];
                        for (int l = 0; l < 32; l++) {
                            y[yi++] = d1 * ((b.get(ql + l) & 0xF) + ((b.get(qh + l) & u1) != 0 ? 16 : 0)) - m1;
                        }
                        for (int l = 0; l < 32; l++) {
                            y[yi++] = d2 * (((b.get(ql + l) & 0xFF) >> 4) + ((b.get(qh + l) & u2) != 0 ? 16 : 0)) - m2;
                        }
                        ql += 32;
                        is += 2;
                        u1 <<= 2;
                        u2 <<= 2;
                    }
                }
                case Q2_K -> {
                    float d = Float16.toFloat(b.getShort(x + 80));
                    float min = Float16.toFloat(b.getShort(x + 82));
                    int q = x + 16;
                    int is = 0;
                    for (int n = 0; n < 256; n += 128) {
                        int shift = 0;
                        for (int j = 0; j < 4; j++) {
                            int sc = b.get(x + is++) & 0xFF;
                            float dl = d * (sc & 0xF);
                            float ml = min * (sc >> 4);
                            for (int l = 0; l < 16; l++) {
                                y[yi++] = dl * (((b.get(q + l) & 0xFF) >> shift) & 3) - ml;
                            }
                            sc = b.get(x + is++) & 0xFF;
                            dl = d * (sc & 0xF);
                            ml = min * (sc >> 4);
                            for (int l = 0; l < 16; l++) {
                                y[yi++] = dl * (((b.get(q + l + 16) & 0xFF) >> shift) & 3) - ml;
                            }
                            shift += 2;
                        }
                        q += 32;
                    }
                }
                default -> throw new IllegalArgumentException(t.toString());
            }
        }
        return y;
    }

    /** ggml's get_scale_min_k4: {sc, m} of sub-block j from the 12 bytes at {@code q}. */
    private static int[] scaleMinK4(int j, ByteBuffer b, int q) {
        if (j < 4) {
            return new int[] {b.get(q + j) & 63, b.get(q + j + 4) & 63};
        }
        int sc = (b.get(q + j + 4) & 0xF) | (((b.get(q + j - 4) & 0xFF) >> 6) << 4);
        int m = ((b.get(q + j + 4) & 0xFF) >> 4) | (((b.get(q + j) & 0xFF) >> 6) << 4);
        return new int[] {sc, m};
    }

    /** Sub-block size, offset o, and the type's per-element (q, scale, min) from the bytes, for the references. */
    private record Element(int q, float scale, float min) {
    }

    private static int sub(GgmlType t) {
        return t == GgmlType.Q2_K || t == GgmlType.Q3_K ? 16 : 32;
    }

    private static int offset(GgmlType t) {
        return switch (t) {
            case Q4_1 -> 8;
            case Q5_K -> 16;
            case Q3_K -> 0;
            default -> 2;
        };
    }

    /** Element c of row {@code row}: its integer q and its sub-block's float scale and min (value q * scale - min). */
    private static Element element(GgmlType t, ByteBuffer b, int row, int cols, int c) {
        int x = (int) t.bytesFor((long) row * cols) + (c / t.blockSize()) * t.blockBytes();
        int e = c % t.blockSize();
        return switch (t) {
            case Q4_1 -> {
                int v = b.get(x + 4 + e % 16) & 0xFF;
                yield new Element(e < 16 ? v & 0xF : v >> 4, Float16.toFloat(b.getShort(x)), -Float16.toFloat(b.getShort(x + 2)));
            }
            case Q5_K -> {
                int[] sm = scaleMinK4(e / 32, b, x + 4);
                int low = ((b.get(x + 48 + (e / 64) * 32 + e % 32) & 0xFF) >> ((e / 32) % 2 * 4)) & 0xF;
                int high = ((b.get(x + 16 + e % 32) & 0xFF) >> (e / 32)) & 1;
                yield new Element(low + 16 * high, Float16.toFloat(b.getShort(x)) * sm[0],
                        Float16.toFloat(b.getShort(x + 2)) * sm[1]);
            }
            case Q3_K -> {
                int g = e / 16;
                int low = g < 8 ? b.get(x + 96 + g) & 0xF : (b.get(x + 96 + g - 8) & 0xFF) >> 4;
                int sc = (low | ((b.get(x + 104 + g % 4) >> 2 * (g / 4)) & 3) << 4) - 32;
                int q = ((b.get(x + 32 + (e / 128) * 32 + e % 32) >> (e / 32 % 4 * 2)) & 3)
                        + 4 * ((b.get(x + e % 32) >> (e / 128 * 4 + e / 32 % 4)) & 1) - 4;
                yield new Element(q, Float16.toFloat(b.getShort(x + 108)) * sc, 0f);
            }
            default -> {
                int sc = b.get(x + e / 16) & 0xFF;
                int q = ((b.get(x + 16 + (e / 128) * 32 + e % 32) & 0xFF) >> ((e / 32) % 4 * 2)) & 3;
                yield new Element(q, Float16.toFloat(b.getShort(x + 80)) * (sc & 0xF),
                        Float16.toFloat(b.getShort(x + 82)) * (sc >> 4));
            }
        };
    }

    /** The documented order, scalar: 8-bit activations per 32, integer sums per sub-block, then the two terms. */
    private static float reference(GgmlType t, ByteBuffer b, int row, int cols, float[] x, int xo) {
        int sub = sub(t);
        int o = offset(t);
        float acc = 0f;
        for (int u = 0; u < cols / sub; u++) {
            int blk = u * sub / 32 * 32;
            float amax = 0f;
            for (int c = blk; c < blk + 32; c++) {
                amax = Math.max(amax, Math.abs(x[xo + c]));
            }
            float id = amax > 0f ? 127f / amax : 0f;
            float sx = 0f;
            int isum = 0;
            Element first = element(t, b, row, cols, u * sub);
            for (int c = u * sub; c < u * sub + sub; c++) {
                sx += x[xo + c];
                isum += (element(t, b, row, cols, c).q() - o) * (int) Math.rint(x[xo + c] * id);
            }
            acc = Math.fma((float) isum, first.scale() * (amax / 127f), acc);
            acc = Math.fma(Math.fma(first.scale(), (float) o, -first.min()), sx, acc);
        }
        return acc;
    }

    @ParameterizedTest(name = "{0}: {1} rows x {2} cols")
    @CsvSource({
        "Q4_1, 1, 32",
        "Q4_1, 37, 96",    // a partial panel at every width
        "Q4_1, 64, 160",
        "Q5_K, 1, 256",
        "Q5_K, 37, 512",
        "Q5_K, 64, 256",
        "Q2_K, 1, 256",
        "Q2_K, 37, 512",
        "Q2_K, 64, 256",
        "Q3_K, 1, 256",
        "Q3_K, 37, 512",
        "Q3_K, 64, 256",
    })
    void decodesAsGgmlAndMultipliesInTheDocumentedOrder(GgmlType t, int rows, int cols) {
        ByteBuffer b = randomBlocks(t, rows, cols, rows * 131L + cols + t.ordinal());
        WeightMatrix w = matrix(t, rows, cols, b);
        assertEquals(t, w.type());
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            w.readRow(r, row, 0);
            float[] want = dequantize(t, b, r, cols);
            for (int c = 0; c < cols; c++) {
                assertEquals(Float.floatToIntBits(want[c]), Float.floatToIntBits(row[c]),
                        t + " row " + r + " col " + c + ": " + row[c] + " vs ggml's " + want[c]);
                Element e = element(t, b, r, cols, c);
                assertEquals(want[c], e.q() * e.scale() - e.min(), 0f, // Q3_K: a zero may differ in sign
                        t + " row " + r + " col " + c + ": the test's element reader");
            }
        }
        SplittableRandom rnd = new SplittableRandom(7);
        int maxTokens = 37;
        float[] x = new float[maxTokens * cols + 3];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        Arrays.fill(x, 3 + 2 * cols, 3 + 2 * cols + 32, 0f); // an all-zero activation block
        float[] single = new float[rows];
        for (int call = 0; call < 12; call++) { // 37: a prefill's path; each panel read first or not (the second six)
            int n = new int[] {1, 2, 3, 5, 7, 37}[call % 6];
            ((PanelMatrix) w).fixTouch(call >= 6);
            float[] out = new float[n * rows + 2];
            Arrays.fill(out, Float.NaN);
            w.matmul(x, 3, n, out, 1);
            assertTrue(Float.isNaN(out[0]) && Float.isNaN(out[n * rows + 1]), "nothing written outside the output");
            for (int tok = 0; tok < n; tok++) {
                w.matmul(x, 3 + tok * cols, 1, single, 0);
                for (int r = 0; r < rows; r++) {
                    float got = out[1 + tok * rows + r];
                    assertEquals(Float.floatToIntBits(single[r]), Float.floatToIntBits(got),
                            t + ", " + n + " tokens: token " + tok + " row " + r + " vs the same token alone");
                    float ref = reference(t, b, r, cols, x, 3 + tok * cols);
                    assertEquals(Float.floatToIntBits(ref), Float.floatToIntBits(got),
                            t + ", " + n + " tokens: token " + tok + " row " + r + ": " + got + " vs " + ref);
                }
            }
            RowParts split = RowParts.of(w, 2); // a row split: its two parts give the whole call's bits
            float[] parts = new float[n * rows + 2];
            Arrays.fill(parts, Float.NaN);
            split.run(1, x, 3, n, parts, 1);
            split.run(0, x, 3, n, parts, 1);
            for (int i = 1; i <= n * rows; i++) {
                assertEquals(Float.floatToIntBits(out[i]), Float.floatToIntBits(parts[i]), t + ", " + n
                        + " tokens in two parts: out[" + i + "]");
            }
            assertTrue(Float.isNaN(parts[0]) && Float.isNaN(parts[n * rows + 1]), "nothing written outside the output");
        }
        double worst = 0;
        for (int tok = 0; tok < maxTokens; tok++) {
            w.matmul(x, 3 + tok * cols, 1, single, 0);
            for (int r = 0; r < rows; r++) {
                float[] wr = dequantize(t, b, r, cols);
                double exact = 0;
                double act = 0;
                double flt = 0;
                for (int c = 0; c < cols; c++) {
                    int xo = 3 + tok * cols;
                    exact += (double) wr[c] * x[xo + c];
                    int blk = c / 32 * 32;
                    double amax = 0;
                    for (int i = blk; i < blk + 32; i++) {
                        amax = Math.max(amax, Math.abs(x[xo + i]));
                    }
                    Element e = element(t, b, r, cols, c);
                    double qs = Math.abs((double) e.scale() * (e.q() - offset(t)));
                    act += qs * amax / 254;
                    flt += (Math.abs(wr[c]) + qs + Math.abs((double) e.scale() * offset(t) - e.min())) * Math.abs(x[xo + c]);
                }
                double bound = act + 64 * Math.ulp(1f) * flt;
                double err = Math.abs(single[r] - exact);
                worst = Math.max(worst, bound > 0 ? err / bound : 0);
                assertTrue(err <= bound, t + " token " + tok + " row " + r + ": |" + single[r] + " - " + exact + "| > " + bound);
            }
        }
        System.out.printf(Locale.ROOT, "%s %dx%d: worst error / bound %.3f%n", t, rows, cols, worst);
    }

    /**
     * The largest integer sums the kernels meet: every q - o at its most negative (Q5_K: -16) against activations
     * all at +127 gives a 16-bit lane -32512 and a row's sub-block sum -65024, past 16 bits (exact only if added as
     * ints); and the most positive (q at its top) against -127.
     */
    @ParameterizedTest
    @CsvSource({"Q4_1", "Q5_K", "Q2_K", "Q3_K"})
    void extremeIntegerSumsAreExact(GgmlType t) {
        int rows = PanelKernels.P + 3;
        int cols = 512;
        for (int top = 0; top < 2; top++) {
            ByteBuffer b = ByteBuffer.allocate((int) t.bytesFor((long) rows * cols)).order(LE);
            for (int bb = 0; bb < b.capacity(); bb += t.blockBytes()) {
                switch (t) {
                    case Q4_1 -> {
                        b.putShort(bb, Float16.fromFloat(0.5f));
                        b.putShort(bb + 2, Float16.fromFloat(-0.25f));
                        for (int i = 0; i < 16; i++) {
                            b.put(bb + 4 + i, (byte) (top == 1 ? 0xFF : 0));
                        }
                    }
                    case Q5_K -> {
                        b.putShort(bb, Float16.fromFloat(0.5f));
                        b.putShort(bb + 2, Float16.fromFloat(0.25f));
                        for (int i = 4; i < 176; i++) {
                            b.put(bb + i, (byte) (i < 16 ? 0x21 : top == 1 ? 0xFF : 0)); // sc 33, m 33 or so
                        }
                    }
                    case Q3_K -> {
                        for (int i = 0; i < 108; i++) { // q3 all 3 or all -4; the scales 0x35 (sc 21, 53 or so)
                            b.put(bb + i, (byte) (i >= 96 ? 0x35 : top == 1 ? 0xFF : 0));
                        }
                        b.putShort(bb + 108, Float16.fromFloat(0.5f));
                    }
                    default -> {
                        for (int i = 0; i < 80; i++) {
                            b.put(bb + i, (byte) (i < 16 ? 0x35 : top == 1 ? 0xFF : 0));
                        }
                        b.putShort(bb + 80, Float16.fromFloat(0.5f));
                        b.putShort(bb + 82, Float16.fromFloat(0.25f));
                    }
                }
            }
            WeightMatrix w = matrix(t, rows, cols, b);
            float[] x = new float[3 * cols];
            Arrays.fill(x, top == 1 ? -1f : 1f);
            float[] out = new float[3 * rows];
            w.matmul(x, 0, 3, out, 0);
            float[] single = new float[rows];
            w.matmul(x, 0, 1, single, 0);
            for (int r = 0; r < rows; r++) {
                float ref = reference(t, b, r, cols, x, 0);
                assertEquals(ref, out[r], 0f, t + " row " + r + " (" + (top == 1 ? "top" : "bottom") + ")");
                assertEquals(ref, single[r], 0f, t + " row " + r + " alone");
                double exact = 0;
                float[] wr = dequantize(t, b, r, cols);
                for (int c = 0; c < cols; c++) {
                    exact += wr[c] * (double) x[c];
                }
                assertEquals(exact, out[r], 1e-4 * Math.abs(exact) + 1e-3, t + " row " + r + " vs exact");
            }
        }
    }

    /**
     * llama-quantize's files: every Q4_1, Q5_K and Q2_K tensor decodes close to the same tensor of the F32
     * original (relative rms error, bound 1.5x the worst tensor measured: Q4_1 0.0790, Q5_K 0.0364, Q2_K 0.297;
     * printed). The Q2_K file also holds Q3_K tensors, which are left out here.
     */
    @ParameterizedTest
    @CsvSource({
        "q256-q4_1.gguf, Q4_1, 0.12",
        "q256-q5_k_m.gguf, Q5_K, 0.055",
        "q256-q5_k_s.gguf, Q5_K, 0.055",
        "q256-q2_k.gguf, Q2_K, 0.45",
    })
    void llamaQuantizeFilesDecodeCloseToTheF32Original(String file, GgmlType type, double bound) {
        try (GgufFile q = GgufFile.open(SharedData.path("models/quantized/" + file));
             GgufFile f = GgufFile.open(SharedData.path("models/quantized/q256.gguf"))) {
            double worst = 0;
            int checked = 0;
            for (GgufTensorInfo t : q.tensors().values()) {
                if (t.dims().length != 2 || t.type() != type) {
                    continue;
                }
                int cols = (int) t.dim(0);
                int rows = (int) t.dim(1);
                WeightMatrix wq = WeightMatrix.load(q, t.name(), rows, cols);
                WeightMatrix wf = WeightMatrix.load(f, t.name(), rows, cols);
                ByteBuffer raw = q.map(t.name()).order(LE);
                float[] a = new float[cols];
                float[] o = new float[cols];
                double err = 0;
                double norm = 0;
                for (int r = 0; r < rows; r++) {
                    wq.readRow(r, a, 0);
                    wf.readRow(r, o, 0);
                    float[] want = dequantize(type, raw, r, cols);
                    for (int c = 0; c < cols; c++) {
                        assertEquals(Float.floatToIntBits(want[c]), Float.floatToIntBits(a[c]), t.name() + " row " + r + " col " + c);
                        err += (a[c] - o[c]) * (double) (a[c] - o[c]);
                        norm += o[c] * (double) o[c];
                    }
                }
                double rel = Math.sqrt(err / norm);
                worst = Math.max(worst, rel);
                checked++;
                assertTrue(rel <= bound, file + ": " + t.name() + " (" + type + ") relative rms error " + rel);
            }
            System.out.printf(Locale.ROOT, "%-17s %-5s %d tensors, worst: relative rms error %.5f%n", file, type, checked, worst);
            assertTrue(checked > 0, "no " + type + " tensor in " + file);
        }
    }

    /**
     * Q4_1 keeps its d and m as halves and widens them in the kernels: zero of either sign, the smallest subnormal,
     * the largest subnormal, the smallest normal and the largest finite half give ggml's values, one token or many.
     */
    @Test
    void q4_1ScalesAndMinsAtTheEdgesOfHalfPrecision() {
        GgmlType t = GgmlType.Q4_1;
        short[] edges = {0, (short) 0x8000, 1, (short) 0x8001, 0x03FF, (short) 0x83FF, 0x0400, (short) 0x8400, 0x3C00,
            0x7BFF, (short) 0xFBFF};
        int rows = PanelKernels.P + 5;
        int cols = 128;
        ByteBuffer b = randomBlocks(t, rows, cols, 5);
        int k = 0;
        for (int bb = 0; bb < b.capacity(); bb += t.blockBytes(), k++) {
            b.putShort(bb, edges[k % edges.length]);
            b.putShort(bb + 2, edges[(k / edges.length + 3 * k) % edges.length]);
        }
        WeightMatrix w = matrix(t, rows, cols, b);
        float[] row = new float[cols];
        for (int r = 0; r < rows; r++) {
            w.readRow(r, row, 0);
            float[] want = dequantize(t, b, r, cols);
            for (int c = 0; c < cols; c++) {
                assertEquals(Float.floatToIntBits(want[c]), Float.floatToIntBits(row[c]), "row " + r + " col " + c);
            }
        }
        SplittableRandom rnd = new SplittableRandom(3);
        float[] x = new float[5 * cols];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) rnd.nextGaussian();
        }
        for (int n : new int[] {1, 2, 5}) {
            float[] out = new float[n * rows];
            w.matmul(x, 0, n, out, 0);
            for (int tok = 0; tok < n; tok++) {
                for (int r = 0; r < rows; r++) {
                    float ref = reference(t, b, r, cols, x, tok * cols);
                    assertEquals(Float.floatToIntBits(ref), Float.floatToIntBits(out[tok * rows + r]),
                            n + " tokens: token " + tok + " row " + r + ": " + out[tok * rows + r] + " vs " + ref);
                }
            }
        }
    }

    /** A Q4_1 block whose d or m is inf or NaN is refused, naming the matrix, the row and the block. */
    @ParameterizedTest
    @CsvSource({"0, 7C00", "2, FE00", "0, FC00"})
    void q4_1RefusesScalesThatAreNotFinite(int field, String bits) {
        GgmlType t = GgmlType.Q4_1;
        int cols = 96;
        ByteBuffer b = randomBlocks(t, 3, cols, 11);
        b.putShort(4 * t.blockBytes() + field, (short) Integer.parseInt(bits, 16)); // row 1, block 1
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> matrix(t, 3, cols, b));
        assertTrue(e.getMessage().startsWith("w: Q4_1 block 1 of row 1 has " + (field == 0 ? "d" : "m") + " = "),
                e.getMessage());
    }

    /** Each type's repacked blocks take what PackedBlocks.heapBytes says, within the launchers' bound per file byte. */
    @ParameterizedTest
    @CsvSource({"Q4_1", "Q5_K", "Q2_K", "Q3_K"})
    void repackedBlocksTakeTheHeapTheirFormulaSays(GgmlType t) {
        int blocks = 6;
        PackedBlocks p = PackedBlocks.unpack(randomBlocks(t, 3, 2 * t.blockSize(), 9), t, blocks);
        long heap = p.quants().length + (long) Float.BYTES * (p.scales().length + p.mins().length);
        assertEquals(PackedBlocks.heapBytes(t, blocks), heap, t.toString());
        assertEquals(t == GgmlType.Q3_K ? 0 : p.scales().length, p.mins().length, t + " mins (Q3_K has none)");
        assertTrue(heap <= WeightMatrix.HEAP_PER_FILE_BYTE * blocks * t.blockBytes(), t + ": " + heap + " heap bytes");
        int cols = 2 * t.blockSize();
        long panels = switch (t) {
            case Q4_1 -> Q4KMatrix.heapBytesQ4_1(3, cols);
            case Q5_K -> Q5KMatrix.heapBytes(3, cols);
            case Q2_K -> Q2KMatrix.heapBytes(3, cols);
            default -> Q3KMatrix.heapBytes(3, cols);
        };
        long paddedRows = (3 + PanelKernels.P - 1) / PanelKernels.P * PanelKernels.P;
        assertTrue(panels <= WeightMatrix.HEAP_PER_FILE_BYTE * paddedRows * t.bytesFor(cols), t + ": panels " + panels);
    }

    @Test
    void theNewTypesAreListedAsSupported() {
        for (String t : new String[] {"Q4_1", "Q5_K", "Q2_K", "Q3_K"}) {
            assertTrue(WeightMatrix.SUPPORTED.contains(t), WeightMatrix.SUPPORTED);
        }
    }
}
