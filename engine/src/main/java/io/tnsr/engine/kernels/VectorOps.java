package io.tnsr.engine.kernels;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorSpecies;

/**
 * The element-wise and reduction kernels of the forward pass, on {@code float[]} activations (and on the
 * off-heap KV cache for attention). Vector loops with {@link FloatVector}; scalar loops only for tails.
 *
 * <p>Every kernel sums in one fixed order that depends only on the length of its input, never on how many
 * tokens a call carries: that is what makes batched and layer-split runs reproduce one-token-at-a-time runs.
 * None allocates.
 */
public final class VectorOps {
    public static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private VectorOps() {
    }

    /** Sum of a[ao..ao+n) * b[bo..bo+n). */
    public static float dot(float[] a, int ao, float[] b, int bo, int n) {
        int i = 0;
        float sum = 0f;
        if (n >= F.length()) {
            FloatVector acc = FloatVector.zero(F);
            for (int bound = F.loopBound(n); i < bound; i += F.length()) {
                acc = FloatVector.fromArray(F, a, ao + i).fma(FloatVector.fromArray(F, b, bo + i), acc);
            }
            sum = acc.reduceLanes(VectorOperators.ADD);
        }
        for (; i < n; i++) {
            sum += a[ao + i] * b[bo + i];
        }
        return sum;
    }

    /** Copies n floats of {@code src} into {@code buf} at byte offset {@code bo}. */
    public static void store(ByteBuffer buf, int bo, float[] src, int so, int n) {
        int i = 0;
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            FloatVector.fromArray(F, src, so + i).intoByteBuffer(buf, bo + i * 4, LE);
        }
        for (; i < n; i++) {
            buf.putFloat(bo + i * 4, src[so + i]);
        }
    }

    /** out[oo..oo+n) = w * x[xo..xo+n) / sqrt(mean(x^2) + eps): RMSNorm. {@code out} may be {@code x}. */
    public static void rmsnorm(float[] out, int oo, float[] x, int xo, float[] w, int n, float eps) {
        float ss = dot(x, xo, x, xo, n);
        float scale = (float) (1.0 / Math.sqrt(ss / n + eps));
        int i = 0;
        FloatVector vs = FloatVector.broadcast(F, scale);
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            FloatVector.fromArray(F, x, xo + i).mul(vs).mul(FloatVector.fromArray(F, w, i)).intoArray(out, oo + i);
        }
        for (; i < n; i++) {
            out[oo + i] = w[i] * (scale * x[xo + i]);
        }
    }

    /** In-place softmax of x[off..off+n). */
    public static void softmax(float[] x, int off, int n) {
        float max = Float.NEGATIVE_INFINITY;
        for (int i = 0; i < n; i++) {
            max = Math.max(max, x[off + i]);
        }
        float sum = 0f;
        for (int i = 0; i < n; i++) {
            float e = (float) Math.exp(x[off + i] - max);
            x[off + i] = e;
            sum += e;
        }
        float inv = 1f / sum;
        for (int i = 0; i < n; i++) {
            x[off + i] *= inv;
        }
    }

    /** SwiGLU: gate[go..go+n) = silu(gate) * up[uo..uo+n). */
    public static void swiglu(float[] gate, int go, float[] up, int uo, int n) {
        for (int i = 0; i < n; i++) {
            float g = gate[go + i];
            gate[go + i] = g / (1f + (float) Math.exp(-g)) * up[uo + i];
        }
    }

    /** dst[do..do+n) += src[so..so+n). */
    public static void add(float[] dst, int dOff, float[] src, int so, int n) {
        int i = 0;
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            FloatVector.fromArray(F, dst, dOff + i).add(FloatVector.fromArray(F, src, so + i)).intoArray(dst, dOff + i);
        }
        for (; i < n; i++) {
            dst[dOff + i] += src[so + i];
        }
    }

    /** x[off..off+n) *= s. */
    public static void scale(float[] x, int off, float s, int n) {
        for (int i = 0; i < n; i++) {
            x[off + i] *= s;
        }
    }
}
