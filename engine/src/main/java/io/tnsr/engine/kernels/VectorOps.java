package io.tnsr.engine.kernels;

import io.tnsr.engine.memory.Region;
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

    private VectorOps() {
    }

    /*
     * Warm-up, once per JVM (as PanelKernels does for its kernels): a few thousand calls on short rows (well under a
     * millisecond), their lengths cycling through 1 .. 3 vectors + 3, so that the vector loops, the scalar tails and
     * rows shorter than a vector are all in the profile C2 first compiles softmax and swiglu from. A Vector API call
     * C2 cannot bind to the vector's class becomes a virtual call that boxes every vector; softmax keeps its
     * loop-carried vectors out of receiver position for that reason (see there), and this makes sure the rest of
     * its call sites have a profile before real rows arrive.
     */
    static {
        float[] a = new float[3 * F.length() + 4];
        float[] b = new float[a.length];
        for (int i = 0; i < 3000; i++) {
            int n = 1 + i % (a.length - 1);
            softmax(a, 0, n);
            swiglu(b, 0, a, 0, n);
        }
    }

    /**
     * The lanes of {@code v} added in order, lane 0 first: what {@code reduceLanes(ADD)} computes on JDK 17. Its
     * order is unspecified, and JDK 25's C2 adds the lanes as a tree (most results then differ from the
     * interpreter's in the last bit), so the engine's kernels sum lanes through this, one implementation per JDK
     * ({@code LaneSum}).
     */
    public static float sumLanes(FloatVector v) {
        return LaneSum.of(v);
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
            sum = sumLanes(acc);
        }
        for (; i < n; i++) {
            sum += a[ao + i] * b[bo + i];
        }
        return sum;
    }

    /** Copies n floats of {@code src} into {@code dst} at byte offset {@code bo}. */
    public static void store(Region dst, int bo, float[] src, int so, int n) {
        int i = 0;
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            dst.put(FloatVector.fromArray(F, src, so + i), bo + i * 4);
        }
        for (; i < n; i++) {
            dst.putFloat(bo + i * 4, src[so + i]);
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

    /**
     * In-place softmax of x[off..off+n): e^(x - max) over the sum of them. The exponentials of the vector part come
     * from {@link #exp}, lane by lane the same as the tail's; the sum adds lane-wise partial sums
     * in a fixed order, so a row's result depends only on its values and n.
     */
    public static void softmax(float[] x, int off, int n) {
        // Loop-carried vectors (m, acc) are only ever arguments, never receivers: C2 parses a loop's phi with its
        // declared type (FloatVector), so a call on it needs a receiver profile to be inlined, and a compile made
        // before that profile exists (C1 tier 2 collects none) boxes every vector through a virtual call (70848 B
        // per decode token, one engine-bench JVM in a few). A vector fresh from a load or an operation has its exact
        // class. After the loops, a fresh vector takes the reduction for the same reason. MAX and ADD commute.
        int bound = F.loopBound(n);
        float max = Float.NEGATIVE_INFINITY;
        if (bound > 0) {
            FloatVector m = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY);
            for (int i = 0; i < bound; i += F.length()) {
                m = FloatVector.fromArray(F, x, off + i).lanewise(VectorOperators.MAX, m);
            }
            max = FloatVector.broadcast(F, Float.NEGATIVE_INFINITY).lanewise(VectorOperators.MAX, m)
                    .reduceLanes(VectorOperators.MAX);
        }
        for (int i = bound; i < n; i++) {
            max = Math.max(max, x[off + i]);
        }
        FloatVector vmax = FloatVector.broadcast(F, max);
        FloatVector acc = FloatVector.zero(F);
        for (int i = 0; i < bound; i += F.length()) {
            FloatVector e = exp(FloatVector.fromArray(F, x, off + i).sub(vmax));
            e.intoArray(x, off + i);
            acc = e.add(acc);
        }
        float sum = sumLanes(FloatVector.zero(F).add(acc));
        for (int i = bound; i < n; i++) {
            float e = exp(x[off + i] - max);
            x[off + i] = e;
            sum += e;
        }
        float inv = 1f / sum;
        FloatVector vinv = FloatVector.broadcast(F, inv);
        for (int i = 0; i < bound; i += F.length()) {
            FloatVector.fromArray(F, x, off + i).mul(vinv).intoArray(x, off + i);
        }
        for (int i = bound; i < n; i++) {
            x[off + i] *= inv;
        }
    }

    /**
     * SwiGLU of one row: gate[go..go+n) = silu(gate) * up[uo..uo+n), silu(g) = g / (1 + e^-g). Call it once per
     * row (n = the FFN width), so that the split between vector lanes and the scalar tail never depends on how many
     * rows a call carries (both take {@link #exp}, with the same bits; the division and product are per element).
     */
    public static void swiglu(float[] gate, int go, float[] up, int uo, int n) {
        int i = 0;
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            FloatVector g = FloatVector.fromArray(F, gate, go + i);
            g.div(exp(g.neg()).add(1f)).mul(FloatVector.fromArray(F, up, uo + i)).intoArray(gate, go + i);
        }
        for (; i < n; i++) {
            float g = gate[go + i];
            gate[go + i] = g / (1f + exp(-g)) * up[uo + i];
        }
    }

    // e^x in float arithmetic (Cephes expf): e^x = 2^n e^r with n = round(x / ln 2) and r = x - n ln 2 (ln 2 in two
    // parts), e^r by a degree-6 polynomial. Every step is an IEEE add, multiply, FMA, min, max or integer operation,
    // so a lane gives the same bits in a vector or in the scalar tail, compiled or interpreted, on every JDK. The
    // Vector API's EXP did not (SVML once C2 has compiled the caller, Math.exp per lane before), and seeded sampling
    // then chose other tokens depending on when the JIT had compiled the softmax. Within 2 ulp of Math.exp over
    // [-87, 88]; arguments are clamped to it (softmax and SwiGLU never need more). The launchers and the tests
    // force C2 to inline exp (-XX:CompileCommand=inline), since a vector returned by a call left out of line is
    // boxed.
    private static final float EXP_MAX = 88f;
    private static final float EXP_MIN = -87.3365447505531f;
    private static final float LOG2E = 1.44269504088896341f;
    private static final float LN2_HI = 0.693359375f;
    private static final float LN2_LO = -2.12194440e-4f;
    private static final float ROUNDER = 12582912f;            // 1.5 * 2^23: adding it rounds to an integer
    private static final int ROUNDER_BITS = 0x4B400000;
    private static final float P0 = 1.9875691500e-4f;
    private static final float P1 = 1.3981999507e-3f;
    private static final float P2 = 8.3334519073e-3f;
    private static final float P3 = 4.1665795894e-2f;
    private static final float P4 = 1.6666665459e-1f;
    private static final float P5 = 5.0000001201e-1f;

    /** e^x per lane; the same bits as {@link #exp(float)} of each lane. */
    static FloatVector exp(FloatVector x) {
        FloatVector c = x.lanewise(VectorOperators.MIN, EXP_MAX).lanewise(VectorOperators.MAX, EXP_MIN);
        FloatVector t = c.fma(LOG2E, ROUNDER);                      // ROUNDER + round(c / ln 2)
        FloatVector n = t.sub(ROUNDER);
        FloatVector r = n.fma(FloatVector.broadcast(F, -LN2_HI), c);
        r = n.fma(FloatVector.broadcast(F, -LN2_LO), r);
        FloatVector p = r.fma(P0, P1);
        p = p.fma(r, FloatVector.broadcast(F, P2));
        p = p.fma(r, FloatVector.broadcast(F, P3));
        p = p.fma(r, FloatVector.broadcast(F, P4));
        p = p.fma(r, FloatVector.broadcast(F, P5));
        FloatVector y = p.fma(r.mul(r), r).add(1f);
        FloatVector scale = t.reinterpretAsInts().sub(ROUNDER_BITS - 127).lanewise(VectorOperators.LSHL, 23)
                .reinterpretAsFloats();                              // 2^n
        return y.mul(scale);
    }

    /** e^x of one float, step for step as a lane of {@link #exp(FloatVector)}. */
    static float exp(float x) {
        float c = Math.max(Math.min(x, EXP_MAX), EXP_MIN);
        float t = Math.fma(c, LOG2E, ROUNDER);
        float n = t - ROUNDER;
        float r = Math.fma(n, -LN2_HI, c);
        r = Math.fma(n, -LN2_LO, r);
        float p = Math.fma(r, P0, P1);
        p = Math.fma(p, r, P2);
        p = Math.fma(p, r, P3);
        p = Math.fma(p, r, P4);
        p = Math.fma(p, r, P5);
        float y = Math.fma(p, r * r, r) + 1f;
        return y * Float.intBitsToFloat((Float.floatToRawIntBits(t) - (ROUNDER_BITS - 127)) << 23);
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
