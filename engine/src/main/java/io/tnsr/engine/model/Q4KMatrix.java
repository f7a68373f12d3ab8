package io.tnsr.engine.model;

import static io.tnsr.engine.model.Blocks.B;
import static io.tnsr.engine.model.Blocks.I;
import static io.tnsr.engine.model.Int8Activations.high;
import static io.tnsr.engine.model.Int8Activations.Pairing.HALVES;
import static io.tnsr.engine.model.Int8Activations.pair;
import static io.tnsr.engine.model.Int8Activations.rowSums;
import static io.tnsr.engine.model.Int8Activations.xpair;
import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static jdk.incubator.vector.VectorOperators.ASHR;
import static jdk.incubator.vector.VectorOperators.B2I;
import static jdk.incubator.vector.VectorOperators.I2F;
import static jdk.incubator.vector.VectorOperators.LSHL;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * Q4_K weights (ggml block_q4_K): super-blocks of 256 elements, 144 bytes each,
 * {@code [d: f16][dmin: f16][scales: 12 bytes][qs: 128 bytes]}. Sub-block s (32 elements, s in [0, 8)) has a
 * 6-bit scale sc and min m packed in {@code scales} (see {@link #packedScale}); its element l is
 * {@code d * sc * q - dmin * m} with q the low (s even) or high (s odd) nibble of qs[32 * (s / 2) + l].
 *
 * <p>Repacked at load ({@link #repack}): per super-block its eight 6-bit sc and eight m unpacked to bytes, so that
 * no kernel unpacks a 6-bit field, the 128 bytes of nibbles as they are (every 32 bytes of quants are 64 elements,
 * the low nibbles sub-block 2p and the high nibbles sub-block 2p + 1), d and dmin as floats; then into row panels
 * laid out as Q4_0's ({@link Q4_0Matrix}): per panel and column pair (a, b) (a block's column j and j + 16), 2L
 * bytes whose byte 2i holds column a of row i in its low nibble and of row L + i in its high nibble, byte 2i + 1
 * the same for column b, a low nibble {@code q} and a high one {@code q - 8} as a signed 4-bit number, as Q4_0's;
 * per panel and sub-block the rows' sc, then their m, as bytes ({@code [units][2][P]}); per panel and super-block
 * the rows' d, then their -dmin, as floats ({@code [supers][2][P]}). The kernels make a sub-block's scale
 * {@code d * sc} and negated min {@code -dmin * m} in registers: the float products ggml's dequantizer computes
 * (exact: an f16 times an integer of at most 6 bits), so the same bits as floats stored per sub-block, in 0.75 bits
 * per weight where those took 2 (a one-token call streams its panels from memory: 152 bytes per 256 weights against
 * 192). With the bias, an element is {@code q * scale - min = (q - 8) * scale + (8 * scale - min)}.
 *
 * <p>Multiplied like Q4_0, in 16-bit integers against the activations quantized to 8 bits per sub-block
 * ({@link Int8Activations}; Q4_0's integer block sums serve unchanged, low rows corrected by the activations' offsets). Result of a (row, token), one token or
 * many: for each sub-block, {@code isum} = the exact integer sum of {@code (q - 8) * xq} over its 32 columns, then
 * {@code acc = fma((float) isum, scale * s, acc)} and {@code acc = fma(fma(scale, 8, -min), sx, acc)}, where s is
 * the activations' scale and sx the token's sum of x over the sub-block's columns (floats, in order, from zero;
 * computed once per matmul call for every token). Signed nibbles, not q itself: a row's two 16-bit sums then add
 * up within Q4_0's bound (the cheap {@code rowSums}), and the activations' rounding meets |q - 8| &lt;= 8, not
 * q &lt;= 15. The loops repeat Q4_0's on purpose (see there).
 *
 * <p>Also Q4_1 (ggml block_q4_1: blocks of 32 elements, 20 bytes, {@code [d: f16][m: f16][qs: 16 bytes]}, element
 * i &lt; 16 = (qs[i] &amp; 0xF) * d + m, element 16 + i = (qs[i] &gt;&gt; 4) * d + m): a block is one such sub-block
 * with scale d and min -m ({@link #repackQ4_1}), computed the same way, with 8-bit activations as llama.cpp's
 * q4_1 x q8_1 dot product. Its scales and minus its mins are any halves, so they stay halves, both of a row's
 * sub-block in one int ({@code [units][P]} per panel), widened to floats in the kernels with integer operations
 * ({@link #scales}, {@link #mins}; the Vector API converts no halves on JDK 17): 5 bits a weight, the file's, where
 * floats took 6 (a one-token call streams its panels from memory). Widening assumes finite halves, so a block whose d
 * or m is inf or NaN is refused at load. One-token kernel {@link #m1Halves}.
 */
final class Q4KMatrix extends PanelMatrix {
    private static final int QK = 256;
    private static final int BYTES = 144;
    private static final int SUB = 32; // elements per sub-block (one scale and min)
    private static final int SUBS = QK / SUB; // sub-blocks per super-block
    /** Bytes per super-block {@link #repack} writes: sc and m per sub-block, then the nibbles. */
    private static final int PACKED = 2 * SUBS + QK / 2;
    /** Tokens per {@link #k2x2} call. */
    private static final int TOKENS = 4;
    private static final VectorSpecies<Short> S = Int8Activations.S;
    private static final FloatVector EIGHT = FloatVector.broadcast(F, 8f);
    private static final ShortVector MINUS_SIXTEEN = ShortVector.broadcast(S, (short) -16);

    private final GgmlType type;
    private final int units;
    /** [panels][cols / 2][2L]: Q4_0's layout ({@link Q4_0Matrix#putNibble}). */
    private final byte[] q;
    /** Q4_K: [panels][units][2][P], row r's sc of sub-block b at (r / P) * units * 2P + b * 2P + r % P, its m P on; Q4_1: null. */
    private final byte[] sm;
    /** Q4_K: [panels][units / 8][2][P], row r's d of super-block k at (r / P) * units / 8 * 2P + k * 2P + r % P, -dmin P on. */
    private final float[] dd;
    /**
     * Q4_1: [panels][units][P], row r's sub-block b at (r / P) * units * P + b * P + r % P: the half bits of its scale
     * d in the low 16 bits, of minus its min (ggml's m) in the high 16; Q4_K: null.
     */
    private final int[] dm;
    /** [n][units]: each token's sums of x over each sub-block, for the call in progress; grown on demand. */
    private float[] sx = new float[0];
    /** The activations of the call in progress, quantized. */
    private final Int8Activations acts = new Int8Activations(HALVES);
    /** [units][TOKENS][P]: the integer sub-block sums of {@link #k2x2} ([units][2][P]) and {@link #k4x2}, as floats. */
    private final float[] sums;
    /** The scales and negated mins of the panel in progress as floats, for the batched kernels. */
    private final ExpandedScales expanded;

    Q4KMatrix(String name, int rows, int cols, PackedBlocks packed) {
        this(name, rows, cols, GgmlType.Q4_K, packed);
    }

    /** Q4_1: {@code packed} as {@link #repackQ4_1} gives it. */
    static Q4KMatrix q4_1(String name, int rows, int cols, PackedBlocks packed) {
        return new Q4KMatrix(name, rows, cols, GgmlType.Q4_1, packed);
    }

    private Q4KMatrix(String name, int rows, int cols, GgmlType type, PackedBlocks packed) {
        super(name, rows, cols, TOKENS);
        this.type = type;
        this.units = cols / SUB;
        boolean q4_1 = type == GgmlType.Q4_1;
        int supers = cols / QK;
        if (q4_1) {
            packed.requireShape(name, rows, units, SUB / 2);
        } else {
            packed.requireShape(name, rows, supers, PACKED);
        }
        if (packed.mins().length == 0) {
            throw new IllegalArgumentException(name + ": " + type + " needs a min per " + (q4_1 ? "block" : "super-block")
                    + ", but the packed blocks have none");
        }
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * cols * L)];
        // B.length() bytes to spare: m1 loads B bytes where it converts L (more than L only with 128-bit vectors)
        this.sm = q4_1 ? null : new byte[arrayLength(name, rows, cols, (long) panels * units * 2 * P + B.length())];
        this.dd = q4_1 ? null : new float[arrayLength(name, rows, cols, (long) panels * supers * 2 * P)];
        this.dm = q4_1 ? new int[arrayLength(name, rows, cols, (long) panels * units * P)] : null;
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
        // Q4_K: row r's super-block k at (r * supers + k) * PACKED, its element e in byte 16 + (e / 64) * 32 + e % 32,
        // low nibble when (e / 32) is even; Q4_1: row r's nibbles at r * cols / 2, element c in byte (c / 32) * 16 +
        // c % 16, low nibble when c % 32 < 16.
        byte[] quants = packed.quants();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int e = c % QK;
                int b = q4_1 ? quants[r * (cols / 2) + (c / 32) * 16 + c % 16]
                        : quants[(r * supers + c / QK) * PACKED + 2 * SUBS + (e / 64) * 32 + e % 32];
                boolean low = q4_1 ? c % 32 < 16 : (e / 32) % 2 == 0;
                Q4_0Matrix.putNibble(HALVES, q, cols, r, c, low ? b & 0xF : (b >> 4) & 0xF);
            }
            if (q4_1) {
                int base = (r / P) * units * P + r % P;
                for (int u = 0; u < units; u++) {
                    dm[base + u * P] = finiteHalf(name, r, u, "d", packed.scales()[r * units + u]) & 0xFFFF
                            | finiteHalf(name, r, u, "m", -packed.mins()[r * units + u]) << 16;
                }
                continue;
            }
            for (int k = 0; k < supers; k++) {
                int at = (r * supers + k) * PACKED;
                ScaleMinTotals.putSuperBlock(sm, dd, units, SUBS, r, k, quants, at, packed.scales()[r * supers + k],
                        packed.mins()[r * supers + k]);
            }
        }
    }

    /**
     * The half {@code v} came from ({@link #repackQ4_1} widened it), when finite; a clear error naming the block
     * otherwise.
     */
    private static short finiteHalf(String name, int row, int block, String what, float v) {
        if (!Float.isFinite(v)) {
            throw new IllegalArgumentException(name + ": Q4_1 block " + block + " of row " + row + " has " + what
                    + " = " + v + "; only finite scales and mins are supported");
        }
        short h = Float16.fromFloat(v);
        if (Float16.toFloat(h) != v) {
            throw new IllegalStateException(name + ": " + v + " is not a half"); // repackQ4_1 gives halves only
        }
        return h;
    }

    /** Heap bytes a rows x cols Q4_K matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + 2 * (cols / SUB) + 2 * (cols / QK) * Float.BYTES);
    }

    /** Heap bytes a rows x cols Q4_1 matrix takes once repacked (its rows rounded up to whole panels). */
    static long heapBytesQ4_1(long rows, long cols) {
        return paddedRows(rows) * (cols / 2 + (cols / SUB) * Integer.BYTES);
    }

    /**
     * Q4_1's scales: the halves in the low 16 bits of {@code v}'s lanes, finite, as floats. Moved up so that the sign
     * lands in bit 31 and exponent and mantissa in a float's low exponent and high mantissa bits, the sign copies in
     * between cleared, and scaled by 2^112 (exact, subnormal halves included): half e, m becomes
     * 2^(e - 15) * (1 + m / 1024), as {@link F16Matrix}'s finite halves.
     */
    static FloatVector scales(IntVector v) {
        return v.lanewise(LSHL, 16).lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
    }

    /** Q4_1's negated mins: the halves in the high 16 bits of {@code v}'s lanes, as {@link #scales}. */
    static FloatVector mins(IntVector v) {
        return v.lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
    }

    /** A view: {@code shared}'s weights, scratch of its own. */
    private Q4KMatrix(Q4KMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS);
        this.type = shared.type;
        this.units = shared.units;
        this.q = shared.q;
        this.sm = shared.sm;
        this.dd = shared.dd;
        this.dm = shared.dm;
        this.sums = new float[units * TOKENS * P];
        this.expanded = new ExpandedScales(units, SUBS);
    }

    @Override
    PanelMatrix view() {
        return new Q4KMatrix(this);
    }

    @Override
    public GgmlType type() {
        return type;
    }

    /**
     * 6-bit field {@code k} (0..15: scales of sub-blocks 0..7, then their mins) of the 12 packed bytes at
     * {@code sb}: fields 0-3 and 8-11 are the low 6 bits of bytes 0-7; fields 4-7 and 12-15 take 4 bits from
     * bytes 8-11 (low nibble for scales, high for mins) and their top 2 bits from the top of bytes 0-7.
     */
    static int packedScale(byte[] qs, int sb, int k) {
        int s = k & 7;
        int lowByte = (k >> 3) * 4 + s; // where the low 6 bits (s < 4) or the top 2 bits (s >= 4) live
        if (s < 4) {
            return qs[sb + lowByte] & 63;
        }
        int nib = (qs[sb + s + 4] & 0xFF) >> ((k >> 3) * 4) & 0xF;
        return nib | ((qs[sb + lowByte - 4] & 0xFF) >> 6) << 4;
    }

    /**
     * Splits {@code blocks} super-blocks from {@code data} into, per super-block, its eight 6-bit sc, its eight m and
     * its 128 bytes of nibbles as they are ({@link #PACKED} bytes), and d and dmin as floats.
     */
    static PackedBlocks repack(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, PACKED)];
        float[] d = new float[blocks];
        float[] dmin = new float[blocks];
        byte[] sb = new byte[16];
        for (int k = 0; k < blocks; k++) {
            data.get(k * BYTES, sb, 0, 16);
            d[k] = Blocks.half(sb, 0);
            dmin[k] = Blocks.half(sb, 2);
            int at = k * PACKED;
            for (int j = 0; j < SUBS; j++) {
                quants[at + j] = (byte) packedScale(sb, 4, j);
                quants[at + SUBS + j] = (byte) packedScale(sb, 4, j + 8);
            }
            data.get(k * BYTES + 16, quants, at + 2 * SUBS, QK / 2);
        }
        return new PackedBlocks(quants, d, dmin);
    }

    /**
     * Splits {@code blocks} Q4_1 blocks ({@code [d: f16][m: f16][qs: 16 bytes]}, element i &lt; 16 = (qs[i] &amp; 0xF) * d
     * + m, element 16 + i = (qs[i] &gt;&gt; 4) * d + m) from {@code data} into their nibbles as they are, the scale d and
     * the min -m: a 32-element Q4_K sub-block.
     */
    static PackedBlocks repackQ4_1(ByteBuffer data, int blocks) {
        byte[] quants = new byte[Math.multiplyExact(blocks, SUB / 2)];
        float[] scales = new float[blocks];
        float[] mins = new float[blocks];
        for (int k = 0; k < blocks; k++) {
            scales[k] = Blocks.half(data.getShort(k * 20));
            mins[k] = -Blocks.half(data.getShort(k * 20 + 2));
            data.get(k * 20 + 4, quants, k * (SUB / 2), SUB / 2);
        }
        return new PackedBlocks(quants, scales, mins);
    }

    /** Quantizes tokens [0, n) of x; sx[t * units + u] = sum of x[t] over sub-block u's columns, in order from zero. */
    @Override
    protected void prepare(float[] x, int xo, int n) {
        acts.quantize(x, xo, n, cols);
        if (sx.length < n * units) {
            sx = new float[n * units]; // grows to the largest call once; steady state allocates nothing
        }
        for (int t = 0; t < n; t++) {
            for (int u = 0; u < units; u++) {
                float sum = 0f;
                for (int c = u * SUB, o = xo + t * cols; c < u * SUB + SUB; c++) {
                    sum += x[o + c];
                }
                sx[t * units + u] = sum;
            }
        }
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * cols * L, cols * L);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        int[] xq = acts.pairs();
        float[] xs = acts.scales();
        int[] xoff = acts.offsets();
        if (sm == null) { // Q4_1
            for (int p = from; p < to; p++) {
                m1Halves(q, dm, p * cols * L, p * units * P, units, xq, xs, xoff, sx, out, oo + p * P);
            }
            return;
        }
        for (int p = from; p < to; p++) {
            m1(q, sm, dd, p * cols * L, p * units * 2 * P, p * (units / SUBS) * 2 * P, units, xq, xs, xoff, sx, out,
                    oo + p * P);
        }
    }

    /**
     * One panel (quants from {@code qo}, integer scales and mins from {@code mo}, d and -dmin from {@code dn}) . the
     * prepared token: out[oo..oo+P). The integer sums as {@link Q4_0Matrix}'s one-token kernel forms them: whole
     * bytes, high nibbles, and the low rows' sum {@code sum(v xq) - 16 sum(h xq) - offsets}.
     */
    private static void m1(byte[] q, byte[] sm, float[] dd, int qo, int mo, int dn, int units, int[] xq, float[] xs,
                           int[] xo, float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            ShortVector t0 = ShortVector.zero(S), s1 = t0; // sums of v * xq and of h * xq, rows [0, L) and [L, P)
            for (int k = b * SUB / 2; k < b * SUB / 2 + SUB / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    t0 = v.mul(xv).add(t0);
                    s1 = high(v).mul(xv).add(s1);
                }
            }
            ShortVector s0 = MINUS_SIXTEEN.mul(s1).add(t0).sub(xpair(xo, b));
            int sb = mo + b * 2 * P;
            int dk = dn + b / SUBS * 2 * P; // the super-block's d, then -dmin
            FloatVector xsv = FloatVector.broadcast(F, xs[b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            // the bytes as floats (Blocks.signedBytes, written out: this method is past C2's node count for inlining
            // helpers, and a helper left out of line would box its vector), times d: d * sc, exact
            FloatVector d0 = ((FloatVector) ByteVector.fromArray(B, sm, sb).convertShape(B2I, I, 0).convert(I2F, 0))
                    .mul(FloatVector.fromArray(F, dd, dk));
            FloatVector d1 = ((FloatVector) ByteVector.fromArray(B, sm, sb + L).convertShape(B2I, I, 0).convert(I2F, 0))
                    .mul(FloatVector.fromArray(F, dd, dk + L));
            a0 = rowSums(s0).fma(d0.mul(xsv), a0);
            a1 = rowSums(s1).fma(d1.mul(xsv), a1);
            // m times -dmin: -dmin * m, exact
            FloatVector m0 = ((FloatVector) ByteVector.fromArray(B, sm, sb + P).convertShape(B2I, I, 0).convert(I2F, 0))
                    .mul(FloatVector.fromArray(F, dd, dk + P));
            FloatVector m1 = ((FloatVector) ByteVector.fromArray(B, sm, sb + P + L).convertShape(B2I, I, 0)
                    .convert(I2F, 0)).mul(FloatVector.fromArray(F, dd, dk + P + L));
            a0 = d0.fma(EIGHT, m0).fma(sxv, a0);
            a1 = d1.fma(EIGHT, m1).fma(sxv, a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    /**
     * Q4_1's {@link #m1}: the scales and negated mins widened from their halves per sub-block (from {@code so}), the
     * rest the same.
     */
    private static void m1Halves(byte[] q, int[] dm, int qo, int so, int units, int[] xq, float[] xs,
                                 int[] xo, float[] sx, float[] out, int oo) {
        FloatVector a0 = FloatVector.zero(F), a1 = a0;
        for (int b = 0; b < units; b++) {
            ShortVector t0 = ShortVector.zero(S), s1 = t0; // sums of v * xq and of h * xq, rows [0, L) and [L, P)
            for (int k = b * SUB / 2; k < b * SUB / 2 + SUB / 2; k += 2) {
                for (int u = 0; u < 2; u++) { // two pairs per trip: a constant-count inner loop C2 unrolls
                    int i = k + u;
                    ShortVector v = pair(q, qo + i * P);
                    ShortVector xv = xpair(xq, i);
                    t0 = v.mul(xv).add(t0);
                    s1 = high(v).mul(xv).add(s1);
                }
            }
            ShortVector s0 = MINUS_SIXTEEN.mul(s1).add(t0).sub(xpair(xo, b));
            int sb = so + b * P;
            FloatVector xsv = FloatVector.broadcast(F, xs[b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[b]);
            // the rows' d and -m as floats (scales and mins, written out: this method is past C2's node count for
            // inlining helpers, as m1 is, and a helper left out of line would box its vector)
            IntVector v0 = IntVector.fromArray(I, dm, sb);
            IntVector v1 = IntVector.fromArray(I, dm, sb + L);
            FloatVector d0 = v0.lanewise(LSHL, 16).lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
            FloatVector d1 = v1.lanewise(LSHL, 16).lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
            FloatVector m0 = v0.lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
            FloatVector m1 = v1.lanewise(ASHR, 3).and(0x8FFFE000).reinterpretAsFloats().mul(0x1p112f);
            IntVector r0 = s0.reinterpretAsInts(); // rowSums, written out too
            IntVector r1 = s1.reinterpretAsInts();
            a0 = ((FloatVector) r0.lanewise(LSHL, 16).add(r0).lanewise(ASHR, 16).convert(I2F, 0)).fma(d0.mul(xsv), a0);
            a1 = ((FloatVector) r1.lanewise(LSHL, 16).add(r1).lanewise(ASHR, 16).convert(I2F, 0)).fma(d1.mul(xsv), a1);
            a0 = d0.fma(EIGHT, m0).fma(sxv, a0);
            a1 = d1.fma(EIGHT, m1).fma(sxv, a1);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        if (valid > 2) {
            k4x2(p, t0, valid, out, oo, os);
        } else {
            k2x2(p, t0, valid, out, oo, os);
        }
    }

    /**
     * As {@link #k2x2} for tokens t0 + j, j in [0, valid) (valid 3..4), the integer sums of four tokens in one pass
     * over the panel ({@link Q4_0Matrix#subSums}, kept out of line), then the scales and min terms in {@link #m1}'s
     * order ({@link ScaleMinTotals#four}): the same bits.
     */
    private void k4x2(int p, int t0, int valid, float[] out, int oo, int os) {
        Q4_0Matrix.subSums(q, p * cols * L, units, acts.pairs(), acts.offsets(), t0, t0 + 1, t0 + 2, t0 + valid - 1,
                cols / 2, sums);
        expand(p);
        ScaleMinTotals.four(expanded.scales, expanded.mins, 0, units, 8f, acts.scales(), units, 0, sx, t0, valid, sums,
                out, oo, os);
    }

    /** Makes panel p's scales and negated mins as floats in {@link #expanded}: Q4_K's from bytes, Q4_1's from halves. */
    private void expand(int p) {
        if (sm == null) {
            expanded.ofHalves(dm, p);
        } else {
            expanded.of(sm, dd, p);
        }
    }

    /**
     * Panel p . prepared tokens t0 + j, j in [0, valid) (valid 1..2): out[oo + j * os + i] for the panel's P rows
     * i. A missing second token repeats the first and is not stored. In two passes like Q4_0's (its integer block
     * sums, then the scales and here the min terms, in {@link #m1}'s order): one kernel doing both ran C2 (JDK 17)
     * out of its node budget and boxed.
     */
    private void k2x2(int p, int t0, int valid, float[] out, int oo, int os) {
        expand(p);
        float[] s = expanded.scales;
        float[] mneg = expanded.mins;
        int u0 = t0, u1 = t0 + Math.min(1, valid - 1); // the tokens: pairs at u<j> * cols / 2, sums and scales at u<j> * units
        Q4_0Matrix.blockSums(q, p * cols * L, units, acts.pairs(), acts.offsets(), u0 * (cols / 2), u1 * (cols / 2),
                u0 * units, u1 * units, sums);
        float[] xs = acts.scales();
        FloatVector a0 = FloatVector.zero(F), a1 = a0; // totals, rows [0, L), per token
        FloatVector b0 = a0, b1 = a0;                   // totals, rows [L, P)
        for (int b = 0; b < units; b++) {
            int sb = b * P;
            int ib = b * 2 * P; // the integer sums of sub-block b
            FloatVector d0 = FloatVector.fromArray(F, s, sb);
            FloatVector d1 = FloatVector.fromArray(F, s, sb + L);
            FloatVector m0 = d0.fma(EIGHT, FloatVector.fromArray(F, mneg, sb)); // 8 * scale - min
            FloatVector m1 = d1.fma(EIGHT, FloatVector.fromArray(F, mneg, sb + L));
            FloatVector xsv = FloatVector.broadcast(F, xs[u0 * units + b]);
            FloatVector sxv = FloatVector.broadcast(F, sx[u0 * units + b]);
            a0 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib).fma(d0.mul(xsv), a0));
            b0 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + L).fma(d1.mul(xsv), b0));
            xsv = FloatVector.broadcast(F, xs[u1 * units + b]);
            sxv = FloatVector.broadcast(F, sx[u1 * units + b]);
            a1 = m0.fma(sxv, FloatVector.fromArray(F, sums, ib + P).fma(d0.mul(xsv), a1));
            b1 = m1.fma(sxv, FloatVector.fromArray(F, sums, ib + P + L).fma(d1.mul(xsv), b1));
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        int base = (row / P) * units * P + row % P;
        int dn = ScaleMinTotals.superAt(row, 0, units / SUBS);
        for (int c = 0; c < cols; c++) {
            int n = Q4_0Matrix.nibble(HALVES, q, cols, row, c) + 8; // q
            if (sm == null) {
                int v = dm[base + (c / SUB) * P];
                dst[off + c] = n * Float16.toFloat(v & 0xFFFF) + Float16.toFloat(v >>> 16); // q * scale - min, as repacked
            } else {
                int u = ScaleMinTotals.scaleAt(row, c / SUB, units);
                int k = dn + c / QK * 2 * P;
                dst[off + c] = n * (dd[k] * sm[u]) + dd[k + P] * sm[u + P]; // q * (d * sc) - dmin * m, as ggml
            }
        }
    }
}
