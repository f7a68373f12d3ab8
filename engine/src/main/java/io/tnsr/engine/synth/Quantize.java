package io.tnsr.engine.synth;

import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;

/**
 * Round-to-nearest quantizers for the synthetic writer. Q8_0 and Q4_0 follow ggml's reference ones
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref), so a synthetic Q8_0 / Q4_0 model is what llama-quantize
 * would write from the same F32 weights: one block of {@link #QK} floats in, one block of bytes out.
 *
 * <p>Q4_1, Q5_K and Q2_K follow ggml's reference quantizers too (quantize_row_q4_1_ref, quantize_row_q5_K_ref,
 * quantize_row_q2_K_ref, the K-quants with make_qkx2_quants' search for each sub-block's scale and min), which is
 * what llama-quantize runs without an importance matrix; floats are rounded as in C without contracted
 * multiply-adds, so a build of ggml that fuses them may differ in the odd byte.
 *
 * <p>Q4_K and Q6_K write ggml's block layouts (block_q4_K, block_q6_K: one super-block of {@link #QK_K} floats
 * in) but pick their scales with a plain round-to-nearest search, without the iterative refinement of ggml's
 * make_qkx2_quants / make_qx_quants, so their bytes differ from llama-quantize's (their error is of the same
 * order): they are valid input for any correct decoder of the type, which is all benchmarks and tests need.
 */
public final class Quantize {
    /** Elements per block of Q8_0 and Q4_0. */
    public static final int QK = 32;
    /** Elements per super-block of the K-quants. */
    public static final int QK_K = 256;

    private Quantize() {
    }

    /** block_q8_0: d = max|x| / 127, q = round(x / d) (halves away from zero); 34 bytes. */
    public static void q8_0(float[] x, int off, ByteBuffer dst) {
        float amax = 0f;
        for (int i = 0; i < QK; i++) {
            amax = Math.max(amax, Math.abs(x[off + i]));
        }
        float d = amax / 127f;
        float id = d != 0f ? 1f / d : 0f;
        dst.putShort(Float16.fromFloat(d));
        for (int i = 0; i < QK; i++) {
            float v = x[off + i] * id;
            dst.put((byte) (Math.signum(v) * Math.floor(Math.abs((double) v) + 0.5)));
        }
    }

    /**
     * block_q4_0: d = (the element of largest magnitude, signed) / -8, q = min(15, trunc(x / d + 8.5)); element
     * i and i + 16 share byte i (low and high nibble); 18 bytes.
     */
    public static void q4_0(float[] x, int off, ByteBuffer dst) {
        float amax = 0f;
        float max = 0f;
        for (int i = 0; i < QK; i++) {
            if (amax < Math.abs(x[off + i])) {
                amax = Math.abs(x[off + i]);
                max = x[off + i];
            }
        }
        float d = max / -8f;
        float id = d != 0f ? 1f / d : 0f;
        dst.putShort(Float16.fromFloat(d));
        for (int i = 0; i < QK / 2; i++) {
            int lo = Math.min(15, (int) (x[off + i] * id + 8.5f));
            int hi = Math.min(15, (int) (x[off + QK / 2 + i] * id + 8.5f));
            dst.put((byte) (lo | hi << 4));
        }
    }

    /**
     * block_q4_K, 144 bytes: d (f16), dmin (f16), scales[12] (eight 6-bit sub-block scales and eight 6-bit
     * mins, packed as ggml's quantize_row_q4_K_ref packs them), qs[128] (byte 32g + l: element 64g + l in the
     * low nibble, 64g + 32 + l in the high one). Element e of sub-block j = e / 32 decodes to
     * {@code (float) (d * ls[j]) * q - (float) (dmin * lm[j])}, q in 0..15.
     *
     * <p>Per sub-block: min = min(0, min x), scale = (max x - min) / 15, m = -min; then d = max scale / 63,
     * dmin = max m / 63, ls = round(scale / d), lm = round(m / dmin) (0..63); q = round((x + dmin lm) / (d ls))
     * clamped to 0..15, with d and dmin as stored in f16. ggml instead refines each sub-block's scale and min
     * (make_qkx2_quants), so the bytes differ from llama-quantize's.
     */
    public static void q4_K(float[] x, int off, ByteBuffer dst) {
        float[] scale = new float[8];
        float[] min = new float[8];
        float maxScale = 0f;
        float maxMin = 0f;
        for (int j = 0; j < 8; j++) {
            float lo = 0f; // the min is never above 0: m = -min >= 0, as ggml stores it
            float hi = x[off + 32 * j];
            for (int i = 0; i < 32; i++) {
                lo = Math.min(lo, x[off + 32 * j + i]);
                hi = Math.max(hi, x[off + 32 * j + i]);
            }
            scale[j] = (hi - lo) / 15f;
            min[j] = -lo;
            maxScale = Math.max(maxScale, scale[j]);
            maxMin = Math.max(maxMin, min[j]);
        }
        float invScale = maxScale > 0f ? 63f / maxScale : 0f;
        float invMin = maxMin > 0f ? 63f / maxMin : 0f;
        int[] ls = new int[8];
        int[] lm = new int[8];
        for (int j = 0; j < 8; j++) {
            ls[j] = Math.min(63, nearestInt(invScale * scale[j]));
            lm[j] = Math.min(63, nearestInt(invMin * min[j]));
        }
        short dBits = Float16.fromFloat(maxScale / 63f);
        short dminBits = Float16.fromFloat(maxMin / 63f);
        byte[] sc = new byte[12];
        for (int j = 0; j < 8; j++) {
            if (j < 4) {
                sc[j] = (byte) ls[j];
                sc[j + 4] = (byte) lm[j];
            } else {
                sc[j + 4] = (byte) ((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
                sc[j - 4] |= (byte) ((ls[j] >> 4) << 6);
                sc[j] |= (byte) ((lm[j] >> 4) << 6);
            }
        }
        float d = Float16.toFloat(dBits);
        float dmin = Float16.toFloat(dminBits);
        int[] q = new int[QK_K];
        for (int j = 0; j < 8; j++) {
            float dl = d * ls[j];
            float ml = dmin * lm[j];
            if (dl == 0f) {
                continue; // every q stays 0: the sub-block decodes to -ml
            }
            for (int i = 0; i < 32; i++) {
                q[32 * j + i] = Math.max(0, Math.min(15, nearestInt((x[off + 32 * j + i] + ml) / dl)));
            }
        }
        dst.putShort(dBits);
        dst.putShort(dminBits);
        dst.put(sc);
        for (int g = 0; g < 4; g++) {
            for (int l = 0; l < 32; l++) {
                dst.put((byte) (q[64 * g + l] | q[64 * g + 32 + l] << 4));
            }
        }
    }

    /**
     * block_q6_K, 210 bytes: ql[128] (low 4 bits), qh[64] (top 2 bits), scales[16] (int8, one per 16
     * elements), d (f16). Element e = 128h + 32q + l (h 0..1, q 0..3, l 0..31) has its low 4 bits in nibble
     * q / 2 of ql[64h + 32(q % 2) + l] and its top 2 bits at bits 2q, 2q + 1 of qh[32h + l]; it decodes to
     * {@code d * scales[e / 16] * (q6 - 32)}.
     *
     * <p>As ggml's quantize_row_q6_K_ref, except each group's scale is plain round-to-nearest (its element of
     * largest magnitude, signed, / -32) instead of make_qx_quants' refined one: iscale = -128 / (the group
     * scale of largest magnitude, signed), scales[g] = min(127, round(iscale * scale_g)), d = 1 / iscale,
     * q6 = clamp(round(x / (d scales[g])), -32, 31) + 32. An all-zero super-block is written as zero bytes, as
     * ggml writes it.
     */
    public static void q6_K(float[] x, int off, ByteBuffer dst) {
        float[] scale = new float[16];
        float maxScale = 0f;
        float maxAbsScale = 0f;
        for (int g = 0; g < 16; g++) {
            float amax = 0f;
            float max = 0f;
            for (int i = 0; i < 16; i++) {
                float v = x[off + 16 * g + i];
                if (Math.abs(v) > amax) {
                    amax = Math.abs(v);
                    max = v;
                }
            }
            scale[g] = max / -32f;
            if (Math.abs(scale[g]) > maxAbsScale) {
                maxAbsScale = Math.abs(scale[g]);
                maxScale = scale[g];
            }
        }
        if (maxAbsScale < 1e-15f) { // ggml's GROUP_MAX_EPS: nothing to scale
            for (int i = 0; i < 210; i++) {
                dst.put((byte) 0);
            }
            return;
        }
        float iscale = -128f / maxScale;
        short dBits = Float16.fromFloat(1f / iscale);
        float d = Float16.toFloat(dBits);
        byte[] sc = new byte[16];
        int[] q6 = new int[QK_K];
        for (int g = 0; g < 16; g++) {
            sc[g] = (byte) Math.min(127, nearestInt(iscale * scale[g]));
            float dl = d * sc[g];
            for (int i = 0; i < 16; i++) {
                int l = dl == 0f ? 0 : Math.max(-32, Math.min(31, nearestInt(x[off + 16 * g + i] / dl)));
                q6[16 * g + i] = l + 32;
            }
        }
        byte[] ql = new byte[128];
        byte[] qh = new byte[64];
        for (int h = 0; h < 2; h++) {
            for (int qq = 0; qq < 4; qq++) {
                for (int l = 0; l < 32; l++) {
                    int v = q6[128 * h + 32 * qq + l];
                    ql[64 * h + 32 * (qq % 2) + l] |= (byte) ((v & 0xF) << (qq < 2 ? 0 : 4));
                    qh[32 * h + l] |= (byte) ((v >> 4) << (2 * qq));
                }
            }
        }
        dst.put(ql);
        dst.put(qh);
        dst.put(sc);
        dst.putShort(dBits);
    }

    /**
     * block_q4_1, 20 bytes: d = (max - min) / 15 and m = min of the block (f16), q = min(15, trunc((x - min) / d +
     * 0.5)); element i and i + 16 share byte i (low and high nibble). Decodes to {@code q * d + m}.
     */
    public static void q4_1(float[] x, int off, ByteBuffer dst) {
        float min = Float.MAX_VALUE;
        float max = -Float.MAX_VALUE;
        for (int j = 0; j < QK; j++) {
            float v = x[off + j];
            if (v < min) {
                min = v;
            }
            if (v > max) {
                max = v;
            }
        }
        float d = (max - min) / 15f;
        float id = d != 0f ? 1f / d : 0f;
        dst.putShort(Float16.fromFloat(d));
        dst.putShort(Float16.fromFloat(min));
        for (int j = 0; j < QK / 2; j++) {
            int lo = Math.min(15, (int) ((x[off + j] - min) * id + 0.5f));
            int hi = Math.min(15, (int) ((x[off + QK / 2 + j] - min) * id + 0.5f));
            dst.put((byte) (lo | hi << 4));
        }
    }

    /**
     * block_q5_K, 176 bytes: d, dmin (f16), scales[12] (eight 6-bit scales and mins packed as Q4_K's), qh[32] (bit
     * e / 32 of qh[e % 32]: the fifth bit of element e), qs[128] (low 4 bits, laid out as Q4_K's nibbles). Element e
     * of sub-block j = e / 32 decodes to {@code d * sc[j] * q - dmin * m[j]}, q in 0..31. As
     * quantize_row_q5_K_ref: each sub-block's scale and min from make_qkx2_quants (weights rms(x) + |x|), then 6-bit
     * scales and mins relative to their largest, then q re-rounded against the stored scales.
     */
    public static void q5_K(float[] x, int off, ByteBuffer dst) {
        int[] l = new int[QK_K];
        float[] mins = new float[8];
        float[] scales = new float[8];
        float[] weights = new float[32];
        int[] laux = new int[32];
        float maxScale = 0f;
        float maxMin = 0f;
        for (int j = 0; j < 8; j++) {
            float sumX2 = 0f;
            for (int i = 0; i < 32; i++) {
                sumX2 += x[off + 32 * j + i] * x[off + 32 * j + i];
            }
            float avX = (float) Math.sqrt(sumX2 / 32f);
            for (int i = 0; i < 32; i++) {
                weights[i] = avX + Math.abs(x[off + 32 * j + i]);
            }
            scales[j] = makeQkx2Quants(32, 31, x, off + 32 * j, weights, l, 32 * j, mins, j, laux, -0.5f, 0.1f, 15, false);
            maxScale = Math.max(maxScale, scales[j]);
            maxMin = Math.max(maxMin, mins[j]);
        }
        float invScale = maxScale > 0f ? 63f / maxScale : 0f;
        float invMin = maxMin > 0f ? 63f / maxMin : 0f;
        byte[] sc = new byte[12];
        int[] ls = new int[8];
        int[] lm = new int[8];
        for (int j = 0; j < 8; j++) {
            ls[j] = Math.min(63, nearestInt(invScale * scales[j]) & 0xFF);
            lm[j] = Math.min(63, nearestInt(invMin * mins[j]) & 0xFF);
            if (j < 4) {
                sc[j] = (byte) ls[j];
                sc[j + 4] = (byte) lm[j];
            } else {
                sc[j + 4] = (byte) ((ls[j] & 0xF) | (lm[j] & 0xF) << 4);
                sc[j - 4] |= (byte) ((ls[j] >> 4) << 6);
                sc[j] |= (byte) ((lm[j] >> 4) << 6);
            }
        }
        short dBits = Float16.fromFloat(maxScale / 63f);
        short dminBits = Float16.fromFloat(maxMin / 63f);
        for (int j = 0; j < 8; j++) {
            float d = Float16.toFloat(dBits) * ls[j];
            if (d == 0f) {
                continue; // the sub-block keeps make_qkx2_quants' q, as ggml's does
            }
            float dm = Float16.toFloat(dminBits) * lm[j];
            for (int i = 0; i < 32; i++) {
                l[32 * j + i] = Math.max(0, Math.min(31, nearestInt((x[off + 32 * j + i] + dm) / d)));
            }
        }
        byte[] qh = new byte[32];
        byte[] ql = new byte[128];
        for (int n = 0, m1 = 1, m2 = 2; n < QK_K; n += 64, m1 <<= 2, m2 <<= 2) {
            for (int j = 0; j < 32; j++) {
                int l1 = l[n + j];
                if (l1 > 15) {
                    l1 -= 16;
                    qh[j] |= (byte) m1;
                }
                int l2 = l[n + j + 32];
                if (l2 > 15) {
                    l2 -= 16;
                    qh[j] |= (byte) m2;
                }
                ql[n / 2 + j] = (byte) (l1 | l2 << 4);
            }
        }
        dst.putShort(dBits);
        dst.putShort(dminBits);
        dst.put(sc);
        dst.put(qh);
        dst.put(ql);
    }

    /**
     * block_q2_K, 84 bytes: scales[16] ({@code m << 4 | sc}, 4 bits each, one per 16 elements), qs[64] (element
     * 128 n + 32 k + l at bits 2k of qs[32 n + l]), d, dmin (f16). Element e decodes to
     * {@code d * sc[e / 16] * q - dmin * m[e / 16]}, q in 0..3. As quantize_row_q2_K_ref: each sub-block's scale and
     * min from make_qkx2_quants (weights |x|, absolute error), 4-bit scales and mins relative to their largest, then
     * q re-rounded against the stored scales.
     */
    public static void q2_K(float[] x, int off, ByteBuffer dst) {
        int[] l = new int[QK_K];
        int[] laux = new int[16];
        float[] weights = new float[16];
        float[] mins = new float[16];
        float[] scales = new float[16];
        float maxScale = 0f;
        float maxMin = 0f;
        for (int j = 0; j < 16; j++) {
            for (int i = 0; i < 16; i++) {
                weights[i] = Math.abs(x[off + 16 * j + i]);
            }
            scales[j] = makeQkx2Quants(16, 3, x, off + 16 * j, weights, l, 16 * j, mins, j, laux, -0.5f, 0.1f, 15, true);
            maxScale = Math.max(maxScale, scales[j]);
            maxMin = Math.max(maxMin, mins[j]);
        }
        byte[] sc = new byte[16];
        short dBits = 0;
        short dminBits = 0;
        if (maxScale > 0f) {
            float iscale = 15f / maxScale;
            for (int j = 0; j < 16; j++) {
                sc[j] = (byte) nearestInt(iscale * scales[j]);
            }
            dBits = Float16.fromFloat(maxScale / 15f);
        }
        if (maxMin > 0f) {
            float iscale = 15f / maxMin;
            for (int j = 0; j < 16; j++) {
                sc[j] |= (byte) (nearestInt(iscale * mins[j]) << 4);
            }
            dminBits = Float16.fromFloat(maxMin / 15f);
        }
        for (int j = 0; j < 16; j++) {
            float d = Float16.toFloat(dBits) * (sc[j] & 0xF);
            if (d == 0f) {
                continue; // the sub-block keeps make_qkx2_quants' q, as ggml's does
            }
            float dm = Float16.toFloat(dminBits) * ((sc[j] & 0xFF) >> 4);
            for (int i = 0; i < 16; i++) {
                l[16 * j + i] = Math.max(0, Math.min(3, nearestInt((x[off + 16 * j + i] + dm) / d)));
            }
        }
        dst.put(sc);
        for (int j = 0; j < QK_K; j += 128) {
            for (int i = 0; i < 32; i++) {
                dst.put((byte) (l[j + i] | l[j + i + 32] << 2 | l[j + i + 64] << 4 | l[j + i + 96] << 6));
            }
        }
        dst.putShort(dBits);
        dst.putShort(dminBits);
    }

    /**
     * ggml's make_qkx2_quants: a scale and a min (returned; {@code theMin[mi]} = minus the min, at least 0) for the n
     * values of x from {@code xo}, and their levels 0..nmax in {@code l} from {@code lo}. Starts from the range
     * (min at most 0), then tries nstep + 1 slightly different level spacings, fitting scale and min to each by
     * weighted least squares, and keeps the one of least weighted error (absolute with {@code useMad}, else
     * squared). A port line by line, in float.
     */
    private static float makeQkx2Quants(int n, int nmax, float[] x, int xo, float[] weights, int[] l, int lo,
                                        float[] theMin, int mi, int[] laux, float rmin, float rdelta, int nstep,
                                        boolean useMad) {
        float min = x[xo];
        float max = x[xo];
        float sumW = weights[0];
        float sumX = sumW * x[xo];
        for (int i = 1; i < n; i++) {
            if (x[xo + i] < min) {
                min = x[xo + i];
            }
            if (x[xo + i] > max) {
                max = x[xo + i];
            }
            float w = weights[i];
            sumW += w;
            sumX += w * x[xo + i];
        }
        if (min > 0) {
            min = 0;
        }
        if (max == min) {
            for (int i = 0; i < n; i++) {
                l[lo + i] = 0;
            }
            theMin[mi] = -min;
            return 0f;
        }
        float iscale = nmax / (max - min);
        float scale = 1 / iscale;
        float bestError = 0;
        for (int i = 0; i < n; i++) {
            int q = nearestInt(iscale * (x[xo + i] - min));
            l[lo + i] = Math.max(0, Math.min(nmax, q));
            float diff = scale * l[lo + i] + min - x[xo + i];
            diff = useMad ? Math.abs(diff) : diff * diff;
            bestError += weights[i] * diff;
        }
        if (nstep < 1) {
            theMin[mi] = -min;
            return scale;
        }
        for (int is = 0; is <= nstep; is++) {
            iscale = (rmin + rdelta * is + nmax) / (max - min);
            float sumL = 0;
            float sumL2 = 0;
            float sumXl = 0;
            for (int i = 0; i < n; i++) {
                int q = Math.max(0, Math.min(nmax, nearestInt(iscale * (x[xo + i] - min))));
                laux[i] = q;
                float w = weights[i];
                sumL += w * q;
                sumL2 += w * q * q;
                sumXl += w * q * x[xo + i];
            }
            float det = sumW * sumL2 - sumL * sumL;
            if (det > 0) {
                float thisScale = (sumW * sumXl - sumX * sumL) / det;
                float thisMin = (sumL2 * sumX - sumL * sumXl) / det;
                if (thisMin > 0) {
                    thisMin = 0;
                    thisScale = sumXl / sumL2;
                }
                float curError = 0;
                for (int i = 0; i < n; i++) {
                    float diff = thisScale * laux[i] + thisMin - x[xo + i];
                    diff = useMad ? Math.abs(diff) : diff * diff;
                    curError += weights[i] * diff;
                }
                if (curError < bestError) {
                    System.arraycopy(laux, 0, l, lo, n);
                    bestError = curError;
                    scale = thisScale;
                    min = thisMin;
                }
            }
        }
        theMin[mi] = -min;
        return scale;
    }

    /** ggml's nearest_int: round half to even, as the FPU rounds. */
    private static int nearestInt(float v) {
        return (int) Math.rint(v);
    }
}
