package io.tnsr.engine.synth;

import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;

/**
 * Round-to-nearest quantizers for the synthetic writer, following ggml's reference ones
 * (quantize_row_q8_0_ref, quantize_row_q4_0_ref), so a synthetic Q8_0 / Q4_0 model is what llama-quantize
 * would write from the same F32 weights. One block of 32 floats in, one block of bytes out.
 */
public final class Quantize {
    public static final int QK = 32;

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
}
