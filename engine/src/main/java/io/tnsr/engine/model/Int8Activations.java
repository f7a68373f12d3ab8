package io.tnsr.engine.model;

import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;

import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;

/**
 * The activations of one matmul call quantized to 8 bits per block of 32, for the integer kernels
 * ({@link Q4_0Matrix}, {@link Q4KMatrix}, {@link Q5KMatrix}, {@link Q2KMatrix}), as llama.cpp quantizes them to q8_0 / q8_K for its own dot products.
 *
 * <pre>{@code
 * prepare(x, xo, n):  acts.quantize(x, xo, n, cols)           // once per call, before any kernel
 * kernel, token t:    xv = xpair(acts.pairs(), t * cols / 2 + i)   // pair i's two columns in every lane pair
 *                     isum += nibble(pair(q, ...)) * xv        // 16-bit lanes, exact
 *                     acc = fma((float) isum, scale * acts.scales()[t * cols / 32 + c / 32], acc)
 * }</pre>
 *
 * Per token and block: {@code s = amax / 127}, {@code xq = rint(x * 127 / amax)} in [-127, 127] (all 0 for an
 * all-zero block), stored as one int per column pair, {@code xq[a] & 0xFFFF | xq[b] << 16}: broadcast and seen
 * as 16-bit lanes, it lines up with a panel's column pair whose weights are in even (column a) and odd (column b)
 * lanes. Which columns pair up is the {@link Pairing}: a block's 16 pairs are pairs [16 * block, 16 * block + 16)
 * either way, so the kernels' loops do not depend on it, and integer sums do not depend on the order of their terms.
 * Why an int per pair and not a vector of x per pair: the weights stream through L1 once per panel, and 64 bytes of
 * x per pair (24 KB per 768-column token) evicted each other and the stream: 20 G weights/s instead of 40
 * (stand-alone, this machine). Grows to the largest call once; steady state allocates nothing. One compute thread
 * uses an instance (a matrix's scratch).
 *
 * <p>Also the vector helpers of that pair layout, shared by both kernels: {@link #pair} (a column pair's bytes as
 * 16-bit lanes), {@link #xpair}, {@link #lowUnsigned} / {@link #high} (the nibbles of rows [0, L), unsigned, and [L, P), signed) and
 * {@link #rowSums} (a block's even and odd lanes added per row, as floats). They are small enough that C2 inlines
 * them into each kernel; a kernel past C2's node budget boxes them (the types' javadoc says where that bit).
 */
final class Int8Activations {
    /** Columns per scale. */
    static final int QK = 32;

    /** Which two columns of a block of 32 share a pair (an int of {@link #pairs}, a pair of a panel's bytes). */
    enum Pairing {
        /**
         * Column j of a block with column j + 16 (j &lt; 16): Q4_0, Q4_1, Q4_K, Q5_K. Quantized in vectors: a vector
         * of the first half and the vector 16 columns on are, lane for lane, the two halves of L pairs.
         */
        HALVES,
        /** Column 2j with 2j + 1: Q2_K, whose sub-blocks of 16 columns must each own whole pairs. One value at a time. */
        ADJACENT;

        /** Pair index of column c (pairs of block b: [16b, 16b + 16)). */
        int pairOf(int c) {
            return this == HALVES ? (c >> 5) * 16 + (c & 15) : c >> 1;
        }

        /** 0 if column c is its pair's even (low) half, 1 the odd (high) half. */
        int halfOf(int c) {
            return this == HALVES ? (c >> 4) & 1 : c & 1;
        }
    }

    /** 2L bytes: one column pair of a 4-bit panel. */
    /** A column pair's 2L bytes, which {@link #pair} widens to one 16-bit lane each. */
    static final VectorSpecies<Byte> PAIR = VectorSpecies.of(byte.class, VectorShape.forBitSize(L * 16));
    /** 2L 16-bit lanes, the float vectors' shape. */
    static final VectorSpecies<Short> S = VectorSpecies.of(short.class, F.vectorShape());
    private static final VectorSpecies<Integer> I = Blocks.I;
    /** 1.5 * 2^23: {@code (v + ROUND) - ROUND} is v rounded to the nearest integer, ties to even, for |v| &lt; 2^22. */
    private static final float ROUND = 12582912f;
    /** ROUND's bits: {@code v + ROUND} seen as an int, minus these, is that integer. */
    private static final int ROUND_BITS = Float.floatToRawIntBits(ROUND);

    /** [n][cols / 2]: one int per column pair. */
    private int[] pairs = new int[0];
    /** [n][cols / 32]: the scale of each block. */
    private float[] scales = new float[0];
    /**
     * [n][cols / 32]: per block, 8 times the sum of the xq of its pairs' even halves and of their odd halves (each
     * within [-16256, 16256]), packed as a pair is: what a sum of unsigned nibbles {@code q} needs taken off to be the
     * sum of {@code q - 8} ({@link Q4_0Matrix}).
     */
    private int[] offsets = new int[0];
    private final Pairing pairing;

    Int8Activations(Pairing pairing) {
        this.pairing = pairing;
    }

    int[] pairs() {
        return pairs;
    }

    float[] scales() {
        return scales;
    }

    int[] offsets() {
        return offsets;
    }

    /**
     * Quantizes tokens [0, n) of x (token t at {@code xo + t * cols}; cols a multiple of 32), block by block. With
     * {@link Pairing#HALVES}, in vectors: per block the amax of its lanes, then per vector {@code rint(x * id)} read
     * from the bits of {@code x * id + 1.5 * 2^23} (below 2^22 in magnitude, a float sum in [2^23, 2^24) is rounded
     * to the nearest integer, ties to even, as {@link Math#rint} rounds, and its bits are that integer plus
     * ROUND_BITS), and pairs as {@code lo & 0xFFFF | hi << 16} of the vectors 16 columns apart: lane-wise integer
     * operations only (a conversion to 16-bit lanes would put another shape on the Vector API's conversion call
     * sites, which the kernels share, and C2 then boxed their vectors). The bits of {@link #quantizeScalar} for finite
     * x (where a block's amax is below 127 / Float.MAX_VALUE but not 0, id overflows and both give nonsense); 3-4x
     * faster: one value at a time took 4-5 ns a value, 13% of a batched Q4_0 step.
     */
    void quantize(float[] x, int xo, int n, int cols) {
        if (pairing == Pairing.ADJACENT) {
            quantizeScalar(x, xo, n, cols);
            return;
        }
        int blocks = cols / QK;
        grow(n, cols);
        for (int t = 0; t < n; t++) {
            for (int b = 0; b < blocks; b++) {
                int o = xo + t * cols + b * QK;
                // Loop-carried vectors (m, even, odd) are only ever arguments, never receivers, and fresh vectors take
                // the reductions: a call on a loop phi needs a receiver profile to be inlined, and a compile made
                // without one (C1 tier 2 collects none) boxed all three, 3 x 96 bytes per block (VectorOps.softmax).
                FloatVector m = FloatVector.fromArray(F, x, o).abs();
                for (int c = L; c < QK; c += L) {
                    m = FloatVector.fromArray(F, x, o + c).abs().max(m);
                }
                float amax = FloatVector.zero(F).max(m).reduceLanes(VectorOperators.MAX); // m >= +0 lane-wise
                float id = amax > 0f ? 127f / amax : 0f;
                scales[t * blocks + b] = amax / 127f;
                IntVector even = IntVector.zero(I);
                IntVector odd = even;
                for (int j = 0, to = t * (cols / 2) + b * (QK / 2); j < QK / 2; j += L) {
                    IntVector lo = rounded(x, o + j, id);
                    IntVector hi = rounded(x, o + QK / 2 + j, id);
                    lo.and(0xFFFF).or(hi.lanewise(VectorOperators.LSHL, 16)).intoArray(pairs, to + j);
                    even = lo.add(even);
                    odd = hi.add(odd);
                }
                offsets[t * blocks + b] = 8 * IntVector.zero(I).add(even).reduceLanes(VectorOperators.ADD) & 0xFFFF
                        | 8 * IntVector.zero(I).add(odd).reduceLanes(VectorOperators.ADD) << 16;
            }
        }
    }

    /** {@code rint(x[o + i] * id)} for the L lanes i, as ints (|x * id| &lt; 2^22). */
    private static IntVector rounded(float[] x, int o, float id) {
        return FloatVector.fromArray(F, x, o).mul(id).add(ROUND).reinterpretAsInts().sub(ROUND_BITS);
    }

    /** {@link #quantize} one value at a time, for either pairing: its definition (tests compare the two). */
    void quantizeScalar(float[] x, int xo, int n, int cols) {
        int blocks = cols / QK;
        grow(n, cols);
        for (int t = 0; t < n; t++) {
            for (int b = 0; b < blocks; b++) {
                int o = xo + t * cols + b * QK;
                float amax = 0f;
                for (int c = 0; c < QK; c++) {
                    amax = Math.max(amax, Math.abs(x[o + c]));
                }
                float id = amax > 0f ? 127f / amax : 0f;
                scales[t * blocks + b] = amax / 127f;
                int even = 0;
                int odd = 0;
                for (int c = 0; c < QK; c++) {
                    int v = (int) Math.rint(x[o + c] * id);
                    int i = t * (cols / 2) + pairing.pairOf(b * QK + c);
                    if (pairing.halfOf(b * QK + c) == 0) {
                        pairs[i] = pairs[i] & 0xFFFF0000 | v & 0xFFFF;
                        even += v;
                    } else {
                        pairs[i] = pairs[i] & 0xFFFF | v << 16;
                        odd += v;
                    }
                }
                offsets[t * blocks + b] = 8 * even & 0xFFFF | 8 * odd << 16;
            }
        }
    }

    /** Room for n tokens of cols columns; grows to the largest call once. */
    private void grow(int n, int cols) {
        int blocks = cols / QK;
        if (scales.length < n * blocks) {
            pairs = new int[n * (cols / 2)];
            scales = new float[n * blocks];
            offsets = new int[n * blocks];
        }
    }

    /** One column pair of a 4-bit panel (2L bytes from {@code off}), sign-extended to 16-bit lanes. */
    static ShortVector pair(byte[] q, int off) {
        return (ShortVector) ByteVector.fromArray(PAIR, q, off).convertShape(VectorOperators.B2S, S, 0);
    }

    /** Activation pair i, (xq[2i], xq[2i + 1]), in every even and odd 16-bit lane. */
    static ShortVector xpair(int[] pairs, int i) {
        return IntVector.broadcast(I, pairs[i]).reinterpretAsShorts();
    }

    /** Rows [0, L) of a pair, whose low nibbles are unsigned ({@link Q4_0Matrix}): one AND, where sign-extending took two shifts. */
    static ShortVector lowUnsigned(ShortVector v) {
        return v.and((short) 0xF);
    }

    /** Rows [L, P) of a pair: the high nibbles, sign-extended. */
    static ShortVector high(ShortVector v) {
        return v.lanewise(VectorOperators.ASHR, 4);
    }

    /**
     * Per row: its even lane plus its odd lane (its even and odd columns' sums), as floats; exact. Seen as an int,
     * a row is {@code v = odd * 65536 + (even & 0xFFFF)} and {@code (v << 16) + v = (even + odd) * 65536 + (even &
     * 0xFFFF)}: shifted right by 16, the sum. It fits an int as |even + odd| &lt;= 32512.
     *
     * <p>Two methods of at most 35 bytecodes each ({@code -XX:MaxInlineSize}'s default), not one of 37: C2 inlines
     * a method that small at any call site, a larger one only where the profile calls it often. At 256-bit vectors,
     * one JVM in two compiled the Q4_0 batched kernel with its last {@code rowSums} calls out of line ("callee is
     * too large" in PrintInlining), passing vectors as objects: 16-21 MB per token, prefill 252-267 instead of
     * 323-331 tokens/s.
     */
    static FloatVector rowSums(ShortVector s) {
        return (FloatVector) pairSums(s.reinterpretAsInts()).convert(VectorOperators.I2F, 0);
    }

    /**
     * Per row: its even lane plus its odd lane, as floats, each lane sign-extended first: exact for any two 16-bit
     * values, where {@link #rowSums} needs their sum within 16 bits (Q5_0's rows reach 32 * 16 * 127 = 65024).
     */
    static FloatVector wideRowSums(ShortVector s) {
        IntVector v = s.reinterpretAsInts();
        return (FloatVector) v.lanewise(VectorOperators.LSHL, 16).lanewise(VectorOperators.ASHR, 16)
                .add(v.lanewise(VectorOperators.ASHR, 16)).convert(VectorOperators.I2F, 0);
    }

    /** {@link #rowSums}' integer part: ((v << 16) + v) >> 16 per int lane. */
    private static IntVector pairSums(IntVector v) {
        return v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16);
    }
}
