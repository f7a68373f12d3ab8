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
     * from {@link #exp} (the tail's, n % lanes of them, from {@code Math.exp}); the sum adds lane-wise partial sums
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
            float e = (float) Math.exp(x[off + i] - max);
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
     * row (n = the FFN width), never over several rows at once: the tail (n % lanes elements) takes
     * {@code Math.exp}, the rest {@link #exp}, so which path an element takes must not depend on how many rows a
     * call carries (batched and one-token runs give the same bits).
     */
    public static void swiglu(float[] gate, int go, float[] up, int uo, int n) {
        int i = 0;
        for (int bound = F.loopBound(n); i < bound; i += F.length()) {
            FloatVector g = FloatVector.fromArray(F, gate, go + i);
            g.div(exp(g.neg()).add(1f)).mul(FloatVector.fromArray(F, up, uo + i)).intoArray(gate, go + i);
        }
        for (; i < n; i++) {
            float g = gate[go + i];
            gate[go + i] = g / (1f + (float) Math.exp(-g)) * up[uo + i];
        }
    }

    /**
     * e^x per lane: the Vector API's EXP, which JDK 17 compiles on x86 to a call into Intel's SVML (libjsvml) for
     * the vector width in use. Within 2 ulp of {@code (float) Math.exp} (0.4% of SwiGLU's outputs differed, by at
     * most 2 ulp, over 32768 normal samples) and 7x faster: 0.77 against 5.6 ns per element (2-core EPYC,
     * AVX-512); scalar exponentials would cost about 4% of a Q4_0 decode step and 6-8% of batched decode and
     * prefill (docs/engine-speed.md). Not bit-identical
     * across vector widths: one JVM uses one width throughout.
     */
    static FloatVector exp(FloatVector x) {
        return x.lanewise(VectorOperators.EXP);
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
