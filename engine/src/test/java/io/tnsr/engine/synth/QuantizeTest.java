package io.tnsr.engine.synth;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The K-quant quantizers of the synthetic writer: each super-block of 256 floats becomes exactly one block of
 * 144 (Q4_K) or 210 (Q6_K) bytes, which decoded by the scalar decoders below (written from the layouts, in
 * the engine's float order) stays within the error bound derived from the quantizer, per element.
 */
class QuantizeTest {
    private static final int QK_K = Quantize.QK_K;

    /** Half an ulp of a half-precision number near |v|: the most f16 rounding moves v (subnormals included). */
    private static double halfUlpF16(double v) {
        return Math.max(Math.abs(v) * 0x1p-11, 0x1p-25);
    }

    /** Decodes the block_q4_K at {@code at}: element = (float) (d * ls) * q - (float) (dmin * lm). */
    static float[] decodeQ4K(ByteBuffer b, int at) {
        float d = Float16.toFloat(b.getShort(at));
        float dmin = Float16.toFloat(b.getShort(at + 2));
        int[] sc = new int[12];
        for (int i = 0; i < 12; i++) {
            sc[i] = b.get(at + 4 + i) & 0xFF;
        }
        float[] y = new float[QK_K];
        for (int e = 0; e < QK_K; e++) {
            int j = e / 32;
            int ls = j < 4 ? sc[j] & 63 : (sc[j + 4] & 0xF) | (sc[j - 4] >> 6) << 4;
            int lm = j < 4 ? sc[j + 4] & 63 : (sc[j + 4] >> 4) | (sc[j] >> 6) << 4;
            int qs = b.get(at + 16 + 32 * (e / 64) + e % 32) & 0xFF;
            int q = e % 64 < 32 ? qs & 0xF : qs >> 4;
            y[e] = d * ls * q - dmin * lm;
        }
        return y;
    }

    /** Decodes the block_q6_K at {@code at}: element = d * scales[e / 16] * (q6 - 32). */
    static float[] decodeQ6K(ByteBuffer b, int at) {
        float d = Float16.toFloat(b.getShort(at + 208));
        float[] y = new float[QK_K];
        for (int e = 0; e < QK_K; e++) {
            int h = e / 128;
            int q = e % 128 / 32;
            int l = e % 32;
            int ql = b.get(at + 64 * h + 32 * (q % 2) + l) & 0xFF;
            int qh = b.get(at + 128 + 32 * h + l) & 0xFF;
            int q6 = (q < 2 ? ql & 0xF : ql >> 4) | ((qh >> 2 * q) & 3) << 4;
            y[e] = d * b.get(at + 192 + e / 16) * (q6 - 32);
        }
        return y;
    }

    /**
     * Largest error Q4_K may make on each element of {@code x}. Per sub-block (scale s = range / 15, m = -min,
     * with the block's largest S and M; D = S / 63, Dm = M / 63 before f16 rounding, each off by at most eD,
     * eDm after it): the decoded step dl = D' ls is within D / 2 + 63 eD of s, the decoded offset ml within
     * Dm / 2 + 63 eDm of m. An element inside the grid is off by at most dl / 2; one clamped to q = 0 by at
     * most |ml - m|; one clamped to 15 by at most |ml - m| + 15 |dl - s| (also covering ls = 0, where every
     * element decodes to -ml). Plus float rounding of the decode.
     */
    static double[] q4KBound(float[] x, int off) {
        double[] s = new double[8];
        double sMax = 0;
        double mMax = 0;
        for (int j = 0; j < 8; j++) {
            double lo = 0;
            double hi = x[off + 32 * j];
            for (int i = 0; i < 32; i++) {
                lo = Math.min(lo, x[off + 32 * j + i]);
                hi = Math.max(hi, x[off + 32 * j + i]);
            }
            s[j] = (hi - lo) / 15;
            sMax = Math.max(sMax, s[j]);
            mMax = Math.max(mMax, -lo);
        }
        double d = sMax / 63;
        double dmin = mMax / 63;
        double stepErr = d / 2 + 63 * halfUlpF16(d);
        double minErr = dmin / 2 + 63 * halfUlpF16(dmin);
        double[] bound = new double[QK_K];
        for (int e = 0; e < QK_K; e++) {
            double j = s[e / 32];
            bound[e] = Math.max(j / 2 + stepErr / 2, minErr + 15 * stepErr) + 1e-6 * (16 * sMax + mMax);
        }
        return bound;
    }

    /**
     * Largest error Q6_K may make on each element of {@code x}. With A the block's largest |x|, d = A / 4096
     * (the f16 scale before rounding, off by at most ed after it) and, per group of 16, a = its largest |x| and
     * ideal step s = a / 32: the int8 scale is rounded (or clamped from 128 to 127) by at most 1, so the decoded
     * step is within delta = d + 128 ed of s. An element inside the grid is off by at most step / 2; one clamped
     * to the grid's end (31 steps on one side) by at most a - 31 (s - delta) = s + 31 delta; a group whose scale
     * rounds to 0 has a < A / 256, below that.
     */
    static double[] q6KBound(float[] x, int off) {
        double amax = 0;
        for (int i = 0; i < QK_K; i++) {
            amax = Math.max(amax, Math.abs(x[off + i]));
        }
        double d = amax / 4096;
        double delta = d + 128 * halfUlpF16(d);
        double[] bound = new double[QK_K];
        for (int g = 0; g < 16; g++) {
            double a = 0;
            for (int i = 0; i < 16; i++) {
                a = Math.max(a, Math.abs(x[off + 16 * g + i]));
            }
            for (int i = 0; i < 16; i++) {
                bound[16 * g + i] = a / 32 + 31 * delta + 1e-6 * amax;
            }
        }
        return bound;
    }

    static ByteBuffer quantize(GgmlType t, float[] x) {
        ByteBuffer b = ByteBuffer.allocate(x.length / QK_K * t.blockBytes() + 7).order(ByteOrder.LITTLE_ENDIAN);
        for (int k = 0; k < x.length; k += QK_K) {
            int before = b.position();
            if (t == GgmlType.Q4_K) {
                Quantize.q4_K(x, k, b);
            } else {
                Quantize.q6_K(x, k, b);
            }
            assertEquals(t.blockBytes(), b.position() - before, t + ": bytes written per super-block");
        }
        return b;
    }

    static float[] decode(GgmlType t, ByteBuffer b, int block) {
        return t == GgmlType.Q4_K ? decodeQ4K(b, block * t.blockBytes()) : decodeQ6K(b, block * t.blockBytes());
    }

    private static float[] uniform(SplittableRandom r, int n, double bound) {
        float[] x = new float[n];
        for (int i = 0; i < n; i++) {
            x[i] = (float) ((r.nextDouble() * 2 - 1) * bound);
        }
        return x;
    }

    static Stream<Arguments> blocks() {
        SplittableRandom r = new SplittableRandom(2024);
        float[] outlierUp = uniform(r, QK_K, 0.05);
        outlierUp[77] = 50f;
        float[] outlierDown = uniform(r, QK_K, 0.05);
        outlierDown[200] = -50f;
        float[] positive = uniform(r, QK_K, 1);
        float[] negative = uniform(r, QK_K, 1);
        for (int i = 0; i < QK_K; i++) {
            positive[i] = Math.abs(positive[i]) + 0.5f;
            negative[i] = -Math.abs(negative[i]) - 0.5f;
        }
        float[] constant = new float[QK_K];
        Arrays.fill(constant, 0.3f);
        float[] ramps = new float[QK_K]; // sub-blocks of very different ranges: small scales next to large ones
        for (int i = 0; i < QK_K; i++) {
            ramps[i] = (float) ((i % 32 - 15.5) * Math.pow(2, i / 32 - 6));
        }
        return Stream.of(
                Arguments.of("uniform +-0.0625 (a 768-wide layer's weights)", uniform(r, 8 * QK_K, Math.sqrt(3.0 / 768))),
                Arguments.of("uniform +-1", uniform(r, 8 * QK_K, 1)),
                Arguments.of("uniform +-300", uniform(r, 8 * QK_K, 300)),
                Arguments.of("all zero", new float[QK_K]),
                Arguments.of("one large positive outlier", outlierUp),
                Arguments.of("one large negative outlier", outlierDown),
                Arguments.of("all positive", positive),
                Arguments.of("all negative", negative),
                Arguments.of("constant", constant),
                Arguments.of("ramps of growing range", ramps));
    }

    private static void assertWithinBound(GgmlType t, String label, float[] x) {
        ByteBuffer b = quantize(t, x);
        double worst = 0;
        for (int k = 0; k < x.length / QK_K; k++) {
            float[] y = decode(t, b, k);
            double[] bound = t == GgmlType.Q4_K ? q4KBound(x, k * QK_K) : q6KBound(x, k * QK_K);
            for (int i = 0; i < QK_K; i++) {
                double err = Math.abs(y[i] - x[k * QK_K + i]);
                assertTrue(err <= bound[i], String.format(Locale.ROOT, "%s, %s: super-block %d element %d: %g decoded as %g, error %g > bound %g",
                        t, label, k, i, x[k * QK_K + i], y[i], err, bound[i]));
                worst = Math.max(worst, err / bound[i]);
            }
        }
        System.out.printf(Locale.ROOT, "%-5s %-48s worst error / bound %.3f%n", t, label, worst);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("blocks")
    void q4_KStaysWithinItsBound(String label, float[] x) {
        assertWithinBound(GgmlType.Q4_K, label, x);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("blocks")
    void q6_KStaysWithinItsBound(String label, float[] x) {
        assertWithinBound(GgmlType.Q6_K, label, x);
    }

    @Test
    void zeroBlocksDecodeToZero() {
        float[] zero = new float[QK_K];
        assertArrayEquals(zero, decodeQ4K(quantize(GgmlType.Q4_K, zero), 0), 0f);
        ByteBuffer q6 = quantize(GgmlType.Q6_K, zero);
        assertArrayEquals(new byte[210], Arrays.copyOf(q6.array(), 210), "ggml writes an all-zero Q6_K block as zero bytes");
        assertArrayEquals(zero, decodeQ6K(q6, 0), 0f);
    }

    @Test
    void valuesOnTheGridComeBack() {
        // Q6_K: every group's largest magnitude is -4 = -32 steps of 1/8, so the scales are -128 and d = -1/1024,
        // both exact: every value (a multiple of 1/8 in -4 .. 3.875) comes back exactly
        float[] x = new float[QK_K];
        for (int i = 0; i < QK_K; i++) {
            x[i] = (i * 7 % 64 - 32) / 8f;
        }
        for (int g = 0; g < 16; g++) {
            x[16 * g] = -4f;
        }
        assertArrayEquals(x, decodeQ6K(quantize(GgmlType.Q6_K, x), 0), 0f);
        // Q4_K: every sub-block spans -1 .. 14 steps of 1/4, so ls = lm = 63, but d = dmin = 1/252 is not a
        // half-precision number: each value comes back within its f16 rounding (63 x 15 x 2^-19 + 63 x 2^-19,
        // under 0.002), far closer than the step of 1/4 to any other grid point
        float[] y = new float[QK_K];
        for (int i = 0; i < QK_K; i++) {
            y[i] = (i * 5 % 16 - 1) / 4f;
        }
        assertArrayEquals(y, decodeQ4K(quantize(GgmlType.Q4_K, y), 0), 0.002f);
    }

    /**
     * On real trained-shape weights (the q256 model's F32 tensors), the simple quantizers' relative rms error
     * stays within the bounds QuantizedWeightsTest allows llama-quantize's own Q4_K / Q6_K (1.5x its worst
     * tensor): the refinement ggml adds is worth little, so the synthetic files stand for real ones.
     */
    @Test
    void realWeightsQuantizeAsWellAsLlamaQuantizeWithinItsBounds() {
        try (GgufFile f = GgufFile.open(SharedData.path("models/quantized/q256.gguf"))) {
            int checked = 0;
            double[] worst = new double[2];
            for (GgufTensorInfo t : f.tensors().values()) {
                if (t.dims().length != 2 || t.type() != GgmlType.F32 || t.dim(0) % QK_K != 0) {
                    continue;
                }
                ByteBuffer src = f.map(t.name()).order(ByteOrder.LITTLE_ENDIAN);
                float[] x = new float[(int) t.elementCount()];
                for (int i = 0; i < x.length; i++) {
                    x[i] = src.getFloat(4 * i);
                }
                GgmlType[] types = {GgmlType.Q4_K, GgmlType.Q6_K};
                double[] limit = {0.11, 0.027};
                for (int ti = 0; ti < 2; ti++) {
                    ByteBuffer b = quantize(types[ti], x);
                    double err = 0;
                    double norm = 0;
                    for (int k = 0; k < x.length / QK_K; k++) {
                        float[] y = decode(types[ti], b, k);
                        for (int i = 0; i < QK_K; i++) {
                            double v = x[k * QK_K + i];
                            err += (y[i] - v) * (y[i] - v);
                            norm += v * v;
                        }
                    }
                    double rel = Math.sqrt(err / norm);
                    worst[ti] = Math.max(worst[ti], rel);
                    assertTrue(rel <= limit[ti], types[ti] + " " + t.name() + ": relative rms error " + rel + " > " + limit[ti]);
                }
                checked++;
            }
            assertTrue(checked > 0, "no F32 matrix with rows of a multiple of 256 in q256.gguf");
            System.out.printf(Locale.ROOT, "q256.gguf, %d matrices: worst relative rms error Q4_K %.4f, Q6_K %.4f "
                    + "(llama-quantize's: 0.072, 0.018)%n", checked, worst[0], worst[1]);
        }
    }
}
