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
 * kernel, token t:    xv = xpair(acts.pairs(), t * cols / 2 + c / 2)   // columns c, c + 1 in every lane pair
 *                     isum += nibble(pair(q, ...)) * xv        // 16-bit lanes, exact
 *                     acc = fma((float) isum, scale * acts.scales()[t * cols / 32 + c / 32], acc)
 * }</pre>
 *
 * Per token and block: {@code s = amax / 127}, {@code xq = rint(x * 127 / amax)} in [-127, 127] (all 0 for an
 * all-zero block), stored as one int per column pair, {@code xq[c] & 0xFFFF | xq[c + 1] << 16}: broadcast and seen
 * as 16-bit lanes, it lines up with a panel's column pair whose weights are in even (column c) and odd (c + 1)
 * lanes. Why an int per pair and not a vector of x per pair: the weights stream through L1 once per panel, and 64
 * bytes of x per pair (24 KB per 768-column token) evicted each other and the stream: 20 G weights/s instead of 40
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
    /** 2L bytes: one column pair of a 4-bit panel. */
    private static final VectorSpecies<Byte> PAIR = VectorSpecies.of(byte.class, VectorShape.forBitSize(L * 16));
    /** 2L 16-bit lanes, the float vectors' shape. */
    static final VectorSpecies<Short> S = VectorSpecies.of(short.class, F.vectorShape());
    private static final VectorSpecies<Integer> I = Blocks.I;

    /** [n][cols / 2]: one int per column pair. */
    private int[] pairs = new int[0];
    /** [n][cols / 32]: the scale of each block. */
    private float[] scales = new float[0];
    /**
     * [n][cols / 32]: per block, 8 times the sum of its even columns' xq and of its odd columns' (each within
     * [-16256, 16256]), packed as a pair is: what a sum of unsigned nibbles {@code q} needs taken off to be the sum of
     * {@code q - 8} ({@link Q4_0Matrix}).
     */
    private int[] offsets = new int[0];

    int[] pairs() {
        return pairs;
    }

    float[] scales() {
        return scales;
    }

    int[] offsets() {
        return offsets;
    }

    /** Quantizes tokens [0, n) of x (token t at {@code xo + t * cols}; cols a multiple of 32), block by block. */
    void quantize(float[] x, int xo, int n, int cols) {
        int blocks = cols / QK;
        if (scales.length < n * blocks) {
            pairs = new int[n * (cols / 2)];
            scales = new float[n * blocks];
            offsets = new int[n * blocks];
        }
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
                for (int c = 0, to = t * (cols / 2) + b * (QK / 2); c < QK; c += 2) {
                    int lo = (int) Math.rint(x[o + c] * id);
                    int hi = (int) Math.rint(x[o + c + 1] * id);
                    pairs[to + c / 2] = lo & 0xFFFF | hi << 16;
                    even += lo;
                    odd += hi;
                }
                offsets[t * blocks + b] = 8 * even & 0xFFFF | 8 * odd << 16;
            }
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

    /** {@link #rowSums}' integer part: ((v << 16) + v) >> 16 per int lane. */
    private static IntVector pairSums(IntVector v) {
        return v.lanewise(VectorOperators.LSHL, 16).add(v).lanewise(VectorOperators.ASHR, 16);
    }
}
