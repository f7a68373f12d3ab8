package io.tnsr.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
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
     * ({@code LaneSum}). The lanes are read from -0 + v (the same bits): a fresh vector, whose class C2 knows even when
     * v is an accumulator leaving its loop (see PanelKernels on stores).
     */
    public static float sumLanes(FloatVector v) {
        return LaneSum.of(FloatVector.broadcast(F, -0f).add(v));
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
     * In-place softmax of x[off..off+n): e^(x - max) over the sum of them. The exponentials come from {@link #exps}
     * (the tail's, n % lanes of them, from {@link #exp(float)}, the same bits); the sum adds lane-wise partial sums
     * in a fixed order, so a row's result depends only on its values and n.
     */
    public static void softmax(float[] x, int off, int n) {
        // The maximum and the sum each in a method of its own, which takes and returns plain values (see vectorSum).
        int bound = F.loopBound(n);
        float max = max(x, off, n);
        exps(x, off, bound, max, null, 0);
        // Summed in a pass of its own, behind a call that takes and returns plain values: with the exponentials in
        // the same method, C2 reached its node budget (NodeCountInliningCutoff) before the lane sum and passed the
        // accumulator boxed, 96 B per call.
        float sum = vectorSum(x, off, bound);
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

    /** x[off..off+bound) added lane-wise in vector order, then the lanes in order; bound a multiple of the lanes. */
    private static float vectorSum(float[] x, int off, int bound) {
        FloatVector acc = FloatVector.zero(F);
        for (int i = 0; i < bound; i += F.length()) {
            acc = FloatVector.fromArray(F, x, off + i).add(acc);
        }
        return sumLanes(FloatVector.zero(F).add(acc));
    }

    /**
     * SwiGLU of one row: gate[go..go+n) = silu(gate) * up[uo..uo+n), silu(g) = g / (1 + e^-g). Call it once per
     * row (n = the FFN width): the tail (n % lanes elements) takes the scalar {@link #exp(float)}, the rest the vector
     * one, which give the same bits, as do the division and the multiplication.
     */
    public static void swiglu(float[] gate, int go, float[] up, int uo, int n) {
        int bound = F.loopBound(n);
        exps(gate, go, bound, 0f, up, uo);
        for (int i = bound; i < n; i++) {
            float g = gate[go + i];
            gate[go + i] = g / (1f + exp(-g)) * up[uo + i];
        }
    }

    /** The largest of x[off..off+n) (as a loop of {@code Math.max} from -inf finds it: MAX commutes), -inf if n is 0. */
    public static float max(float[] x, int off, int n) {
        // Loop-carried vectors (m here, acc in vectorSum) are only ever arguments, never receivers: C2 parses a loop's
        // phi with its declared type (FloatVector), so a call on it needs a receiver profile to be inlined, and a
        // compile made before that profile exists (C1 tier 2 collects none) boxes every vector through a virtual call
        // (70848 B per decode token in softmax, one engine-bench JVM in a few). A vector fresh from a load or an
        // operation has its exact class. After the loop, a fresh vector takes the reduction for the same reason.
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
        return max;
    }

    /**
     * x[off..off+n) = e^(x - shift) in place, each element bit for bit {@link #exp}{@code (x[i] - shift)}: the
     * sampler's softmax over a whole vocabulary, whose sum it makes in an order of its own.
     */
    public static void expShifted(float[] x, int off, int n, float shift) {
        int bound = F.loopBound(n);
        exps(x, off, bound, shift, null, 0);
        for (int i = bound; i < n; i++) {
            x[off + i] = exp(x[off + i] - shift);
        }
    }

    /** 1.5 * 2^23: adding it rounds a float of magnitude below 2^22 to an integer, to nearest even. */
    private static final float ROUNDER = 12582912f;
    private static final float LOG2E = 1.44269504088896341f;
    /** ln 2 split in two (Cody and Waite): {@code n * LN2_HI} is exact for the n that occur. */
    private static final float LN2_HI = 0.693359375f;
    private static final float LN2_LO = -2.12194440e-4f;
    /**
     * The clamp of x: e^x of EXP_HI (88.8) overflows to +inf and of EXP_LO (-104) underflows to 0 by themselves, so
     * every x beyond either gives what e^x gives (n stays within [-150, 128], whose halves are valid exponents).
     */
    private static final float EXP_HI = 88.8f;
    private static final float EXP_LO = -104f;
    /** Cephes' expf polynomial for e^r - 1 - r on [-ln2/2, ln2/2], highest degree first. */
    private static final float P0 = 1.9875691500e-4f, P1 = 1.3981999507e-3f, P2 = 8.3334519073e-3f,
            P3 = 4.1665795894e-2f, P4 = 1.6666665459e-1f, P5 = 5.0000001201e-1f;

    /**
     * e^x per lane, for softmax and SwiGLU alike, from operations whose results Java specifies to the bit
     * (multiplies, adds, one fused multiply-add, lane comparisons, bit moves): the same bits in the interpreter, C1 and
     * C2, at every vector width, and the same as {@link #exp(float)} for a single float. The Vector API's own
     * {@code EXP} is not: compiled it calls Intel's SVML, interpreted it calls {@code Math.exp} per lane, and the two
     * differ in the last bit, so a JVM's first forward passes gave other bits than its later ones. Cephes' expf:
     * x = n ln2 + r with n = round(x / ln2) (the 1.5 * 2^23 rounding trick), r with ln2 in two parts, e^r by Cephes'
     * polynomial (multiplies and adds, unfused, as Cephes has them; scalar operands only: a broadcast constant kept
     * live across softmax's loop was boxed, 96 B a call), then 2^n into the exponent bits. Within 2 ulp of
     * {@code Math.exp} over the normal range (VectorOpsTest); 0 below e^-87.34 (where floats turn subnormal), +inf
     * above e^88.72.
     *
     * <p>Over the whole vectors of x[off..off+bound) (bound a multiple of the lanes): with {@code up} null, x becomes
     * e^(x - shift) (softmax's numerators); otherwise x becomes x / (1 + e^-x) * up[uo..] (SwiGLU; shift 0). Both
     * uses share this one loop so that no vector crosses a call: a vector passed to a method that C2 leaves out of
     * line is boxed, and C2 did leave a separate {@code exp(FloatVector)} out of line in some JVMs (its call site's
     * profile rated cold, the callee "already compiled into a medium method"), 18-31 KB per frame in a one-stage
     * pipeline, for good. The exponent's argument is sign * x - shift with sign 1 or -1, exact in both cases.
     */
    static void exps(float[] x, int off, int bound, float shift, float[] up, int uo) {
        float sign = up == null ? 1f : -1f;
        for (int i = 0; i < bound; i += F.length()) {
            FloatVector v = FloatVector.fromArray(F, x, off + i);
            FloatVector c = v.mul(sign).sub(shift).max(EXP_LO).min(EXP_HI);
            FloatVector t = c.fma(LOG2E, ROUNDER);               // ROUNDER + round(c / ln2), exactly
            FloatVector n = t.sub(ROUNDER);
            FloatVector r = c.sub(n.mul(LN2_HI)).sub(n.mul(LN2_LO)); // n * LN2_HI is exact
            FloatVector p = r.mul(P0).add(P1).mul(r).add(P2).mul(r).add(P3).mul(r).add(P4).mul(r).add(P5);
            p = p.mul(r.mul(r)).add(r).add(1f);
            // 2^n as 2^h * 2^(n - h), h = n >> 1, each a valid exponent for n in [-150, 128]; p * 2^h is exact, so the
            // product rounds once (to a subnormal, 0 or +inf where e^x is one), as p * 2^n would. t's low mantissa
            // bits hold n + 0x400000 as an integer.
            IntVector ni = t.reinterpretAsInts().sub(0x4B400000);
            IntVector h = ni.lanewise(VectorOperators.ASHR, 1);
            FloatVector e = p.mul(h.add(127).lanewise(VectorOperators.LSHL, 23).reinterpretAsFloats())
                    .mul(ni.sub(h).add(127).lanewise(VectorOperators.LSHL, 23).reinterpretAsFloats());
            if (up == null) {
                e.intoArray(x, off + i);
            } else {
                v.div(e.add(1f)).mul(FloatVector.fromArray(F, up, uo + i)).intoArray(x, off + i);
            }
        }
    }

    /** e^x for one float, bit for bit as one lane of {@link #exps}. */
    public static float exp(float x) {
        float c = Math.min(Math.max(x, EXP_LO), EXP_HI);
        float t = Math.fma(c, LOG2E, ROUNDER);
        float n = t - ROUNDER;
        float r = c - n * LN2_HI - n * LN2_LO;
        float p = ((((r * P0 + P1) * r + P2) * r + P3) * r + P4) * r + P5;
        p = p * (r * r) + r + 1f;
        int ni = Float.floatToRawIntBits(t) - 0x4B400000;
        int h = ni >> 1;
        return p * Float.intBitsToFloat((h + 127) << 23) * Float.intBitsToFloat((ni - h + 127) << 23);
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
