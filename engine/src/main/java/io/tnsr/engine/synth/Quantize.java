package io.tnsr.engine.synth;

import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;

/**
 * Round-to-nearest quantizers for the synthetic writer. Q8_0 and Q4_0 follow ggml's reference ones
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref), so a synthetic Q8_0 / Q4_0 model is what llama-quantize
 * would write from the same F32 weights: one block of {@link #QK} floats in, one block of bytes out.
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

    /** ggml's nearest_int: round half to even, as the FPU rounds. */
    private static int nearestInt(float v) {
        return (int) Math.rint(v);
    }
}
