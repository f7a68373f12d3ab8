package io.tnsr.engine.synth;

import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;

/**
 * Quantizers for the synthetic writer. Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS, Q3_K and BF16 follow ggml's own
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref, quantize_row_q5_0_ref, quantize_iq4_nl, quantize_row_iq4_xs_ref,
 * quantize_row_q3_K_ref, ggml_fp32_to_bf16_row_ref) operation for operation, so a synthetic model of those types is
 * what llama-quantize writes from the same F32 weights without an importance matrix, byte for byte (a test checks
 * it on llama-quantize's files): one block of {@link #QK} (Q3_K, IQ4_XS: {@link #QK_K}) floats in, one block of bytes
 * out.
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
        float max = signedAbsMax(x, off, QK);
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
     * block_q5_0, as ggml's quantize_row_q5_0_ref: d = (the element of largest magnitude, signed) / -16,
     * q = min(31, trunc(x / d + 16.5)); element i < 16 in the low nibble of qs[i], i + 16 in its high nibble, bit 4 of
     * element i at bit i of qh; 22 bytes {@code [d: f16][qh: u32][qs: 16]}.
     */
    public static void q5_0(float[] x, int off, ByteBuffer dst) {
        float max = signedAbsMax(x, off, QK);
        float d = max / -16f;
        float id = d != 0f ? 1f / d : 0f;
        byte[] qs = new byte[QK / 2];
        int qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = Math.min(31, (int) (x[off + j] * id + 16.5f));
            int hi = Math.min(31, (int) (x[off + QK / 2 + j] * id + 16.5f));
            qs[j] = (byte) ((lo & 0xF) | (hi & 0xF) << 4);
            qh |= (lo >> 4) << j;
            qh |= (hi >> 4) << (j + QK / 2);
        }
        dst.putShort(Float16.fromFloat(d));
        dst.putInt(qh);
        dst.put(qs);
    }

    /**
     * block_q3_K, 110 bytes {@code [hmask: 32][qs: 64][scales: 12][d: f16]}, as ggml's quantize_row_q3_K_ref (what
     * llama-quantize writes without an importance matrix): per group of 16, make_q3_quants' scale (with its
     * rmse refinement), the 16 scales quantized to 6 bits against the one of largest magnitude, then every element
     * requantized to [-4, 3] against its group's stored scale. Element e = 128 n + 32 j + k keeps its low two bits at
     * 2 j of qs[32 n + k] and its third bit (set when q >= 0) at bit 4 n + j of hmask[k].
     */
    public static void q3_K(float[] x, int off, ByteBuffer dst) {
        int[] l = new int[QK_K];
        float[] scales = new float[16];
        float maxScale = 0f;
        float amax = 0f;
        for (int j = 0; j < 16; j++) {
            scales[j] = makeQ3Quants(x, off + 16 * j, l, 16 * j);
            float scale = Math.abs(scales[j]);
            if (scale > amax) {
                amax = scale;
                maxScale = scales[j];
            }
        }
        byte[] sc = new byte[12];
        short dBits;
        if (maxScale != 0f) {
            float iscale = -32f / maxScale;
            for (int j = 0; j < 16; j++) {
                int v = Math.max(-32, Math.min(31, nearestInt(iscale * scales[j]))) + 32;
                if (j < 8) {
                    sc[j] = (byte) (v & 0xF);
                } else {
                    sc[j - 8] |= (byte) ((v & 0xF) << 4);
                }
                sc[j % 4 + 8] |= (byte) ((v >> 4) << (2 * (j / 4)));
            }
            dBits = Float16.fromFloat(1 / iscale);
        } else {
            dBits = Float16.fromFloat(0f);
        }
        float dAll = Float16.toFloat(dBits);
        for (int j = 0; j < 16; j++) {
            int low = j < 8 ? sc[j] & 0xF : (sc[j - 8] & 0xFF) >> 4;
            int s = (low | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
            float d = dAll * s;
            if (d == 0f) {
                continue; // make_q3_quants' values stay
            }
            for (int i = 0; i < 16; i++) {
                l[16 * j + i] = Math.max(-4, Math.min(3, nearestInt(x[off + 16 * j + i] / d))) + 4;
            }
        }
        byte[] hmask = new byte[QK_K / 8];
        for (int e = 0; e < QK_K; e++) {
            if (l[e] > 3) {
                hmask[e % 32] |= (byte) (1 << (e / 32));
                l[e] -= 4;
            }
        }
        byte[] qs = new byte[QK_K / 4];
        for (int n = 0; n < 2; n++) {
            for (int k = 0; k < 32; k++) {
                int e = 128 * n + k;
                qs[32 * n + k] = (byte) (l[e] | l[e + 32] << 2 | l[e + 64] << 4 | l[e + 96] << 6);
            }
        }
        dst.put(hmask);
        dst.put(qs);
        dst.put(sc);
        dst.putShort(dBits);
    }

    /**
     * ggml's make_q3_quants(16, 4, x, L, do_rmse = true): levels l in [-4, 3] for 16 values and their scale, refined
     * by up to 5 passes that move single levels while the weighted (x^2) fit improves; l + 4 into {@code l[lo..]}.
     */
    private static float makeQ3Quants(float[] x, int off, int[] l, int lo) {
        final int n = 16;
        final int nmax = 4;
        float max = 0f;
        float amax = 0f;
        for (int i = 0; i < n; i++) {
            float ax = Math.abs(x[off + i]);
            if (ax > amax) {
                amax = ax;
                max = x[off + i];
            }
        }
        if (amax < GROUP_MAX_EPS) {
            for (int i = 0; i < n; i++) {
                l[lo + i] = 0;
            }
            return 0f;
        }
        float iscale = -nmax / max;
        float sumlx = 0f;
        float suml2 = 0f;
        for (int i = 0; i < n; i++) {
            int q = Math.max(-nmax, Math.min(nmax - 1, nearestInt(iscale * x[off + i])));
            l[lo + i] = q;
            float w = x[off + i] * x[off + i];
            sumlx += w * x[off + i] * q;
            suml2 += w * q * q;
        }
        for (int itry = 0; itry < 5; itry++) {
            int changed = 0;
            for (int i = 0; i < n; i++) {
                float xi = x[off + i];
                float w = xi * xi;
                float slx = sumlx - w * xi * l[lo + i];
                if (slx > 0) {
                    float sl2 = suml2 - w * l[lo + i] * l[lo + i];
                    int q = Math.max(-nmax, Math.min(nmax - 1, nearestInt(xi * sl2 / slx)));
                    if (q != l[lo + i]) {
                        slx += w * xi * q;
                        sl2 += w * q * q;
                        if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                            l[lo + i] = q;
                            sumlx = slx;
                            suml2 = sl2;
                            changed++;
                        }
                    }
                }
            }
            if (changed == 0) {
                break;
            }
        }
        for (int i = 0; i < n; i++) {
            l[lo + i] += nmax;
        }
        return suml2 > 0f ? sumlx / suml2 : 0f;
    }

    /** ggml's kvalues_iq4nl: the 16 values of an IQ4_NL / IQ4_XS nibble. */
    private static final byte[] IQ4NL = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

    /**
     * block_iq4_nl, 18 bytes {@code [d: f16][qs: 16]} (element i < 16 the low nibble of qs[i], i + 16 its high one;
     * value {@code d * IQ4NL[nibble]}), as llama-quantize writes it without an importance matrix (ggml's
     * quantize_iq4_nl: {@link #iq4(float[], int, int, ByteBuffer)} with one block of 32).
     */
    public static void iq4_nl(float[] x, int off, ByteBuffer dst) {
        iq4(x, off, QK, dst);
    }

    /**
     * block_iq4_xs, 136 bytes {@code [d: f16][scales_h: u16][scales_l: 4][qs: 128]}: eight sub-blocks of 32 in
     * IQ4_NL's nibble layout, each with a 6-bit scale ls (low 4 bits in scales_l, top 2 in scales_h), value
     * {@code d * (ls - 32) * IQ4NL[nibble]}; as ggml's quantize_row_iq4_xs_ref.
     */
    public static void iq4_xs(float[] x, int off, ByteBuffer dst) {
        iq4(x, off, QK_K, dst);
    }

    /**
     * ggml's quantize_row_iq4_nl_impl without importance weights (weight x^2) and with ntry = 7: per block of 32,
     * the scale of the element of largest magnitude against IQ4NL's -127, refit by least squares, then the best of 15
     * more trial scales; for IQ4_XS ({@code size} 256) the 8 block scales are then quantized to 6 bits against the one
     * of largest magnitude ({@code d = -max / 32}) and every element requantized against its stored block scale.
     */
    private static void iq4(float[] x, int off, int size, ByteBuffer dst) {
        final int ntry = 7;
        int blocks = size / QK;
        float[] scales = new float[blocks];
        int[] l = new int[size];
        float maxScale = 0f;
        float amaxScale = 0f;
        for (int ib = 0; ib < blocks; ib++) {
            int xb = off + ib * QK;
            float amax = 0f;
            float max = 0f;
            for (int j = 0; j < QK; j++) {
                float ax = Math.abs(x[xb + j]);
                if (ax > amax) {
                    amax = ax;
                    max = x[xb + j];
                }
            }
            if (amax < GROUP_MAX_EPS) {
                scales[ib] = 0f;
                continue;
            }
            float d = -max / IQ4NL[0];
            float id = 1 / d;
            float sumqx = 0f;
            float sumq2 = 0f;
            for (int j = 0; j < QK; j++) {
                float xj = x[xb + j];
                int q = bestIndex(id * xj);
                l[ib * QK + j] = q;
                float v = IQ4NL[q];
                float w = xj * xj;
                sumqx += w * v * xj;
                sumq2 += w * v * v;
            }
            d = sumq2 > 0 ? sumqx / sumq2 : 0f;
            float best = d * sumqx;
            for (int itry = -ntry; itry <= ntry; itry++) {
                id = (itry + IQ4NL[0]) / max;
                sumqx = 0f;
                sumq2 = 0f;
                for (int j = 0; j < QK; j++) {
                    float xj = x[xb + j];
                    float v = IQ4NL[bestIndex(id * xj)];
                    float w = xj * xj;
                    sumqx += w * v * xj;
                    sumq2 += w * v * v;
                }
                if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
                    d = sumqx / sumq2;
                    best = d * sumqx;
                }
            }
            scales[ib] = d;
            if (Math.abs(d) > amaxScale) {
                amaxScale = Math.abs(d);
                maxScale = d;
            }
        }
        if (blocks > 1) {
            int scalesH = 0;
            byte[] scalesL = new byte[blocks / 2];
            float d = -maxScale / 32;
            float id = d != 0f ? 1 / d : 0f;
            for (int ib = 0; ib < blocks; ib++) {
                int ls = Math.max(-32, Math.min(31, nearestInt(id * scales[ib])));
                float dl = d * ls;
                float idl = dl != 0f ? 1 / dl : 0f;
                for (int j = 0; j < QK; j++) {
                    l[ib * QK + j] = bestIndex(idl * x[off + ib * QK + j]);
                }
                ls += 32;
                scalesL[ib / 2] |= (byte) ((ls & 0xF) << 4 * (ib % 2));
                scalesH |= (ls >> 4) << 2 * ib;
            }
            dst.putShort(Float16.fromFloat(d));
            dst.putShort((short) scalesH);
            dst.put(scalesL);
        } else {
            dst.putShort(Float16.fromFloat(scales[0]));
            float id = scales[0] != 0f ? 1 / scales[0] : 0f;
            for (int j = 0; j < QK; j++) {
                l[j] = bestIndex(id * x[off + j]);
            }
        }
        for (int ib = 0; ib < blocks; ib++) {
            for (int j = 0; j < 16; j++) {
                dst.put((byte) (l[ib * QK + j] | l[ib * QK + 16 + j] << 4));
            }
        }
    }

    /** ggml's best_index_int8 over IQ4NL: the index of the value nearest {@code v} (the lower one on a tie). */
    private static int bestIndex(float v) {
        if (v <= IQ4NL[0]) {
            return 0;
        }
        if (v >= IQ4NL[15]) {
            return 15;
        }
        int ml = 0;
        int mu = 15;
        while (mu - ml > 1) {
            int mav = (ml + mu) / 2;
            if (v < IQ4NL[mav]) {
                mu = mav;
            } else {
                ml = mav;
            }
        }
        return v - IQ4NL[mu - 1] < IQ4NL[mu] - v ? mu - 1 : mu;
    }

    /** BF16 bits of {@code f}, as ggml's ggml_compute_fp32_to_bf16: rounded to nearest even, NaN kept quiet. */
    public static short bf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        if ((bits & 0x7fffffff) > 0x7f800000) {
            return (short) ((bits >>> 16) | 64);
        }
        return (short) ((bits + (0x7fff + ((bits >>> 16) & 1))) >>> 16);
    }

    /** The element of largest magnitude among x[off..off+n), with its sign (the first of equal magnitudes); 0 if all are. */
    private static float signedAbsMax(float[] x, int off, int n) {
        float amax = 0f;
        float max = 0f;
        for (int i = 0; i < n; i++) {
            if (amax < Math.abs(x[off + i])) {
                amax = Math.abs(x[off + i]);
                max = x[off + i];
            }
        }
        return max;
    }

    /** ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it quantizes to zero. */
    private static final float GROUP_MAX_EPS = 1e-15f;

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
