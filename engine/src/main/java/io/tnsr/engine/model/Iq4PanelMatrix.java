package io.tnsr.engine.model;

import static io.tnsr.engine.model.PanelKernels.P;
import static io.tnsr.engine.model.TileKernels.F;
import static io.tnsr.engine.model.TileKernels.L;
import static io.tnsr.engine.model.WidenedSlices.scales;
import static jdk.incubator.vector.VectorOperators.ASHR;
import static jdk.incubator.vector.VectorOperators.B2I;

import io.tnsr.engine.gguf.GgmlType;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import jdk.incubator.vector.ByteVector;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.VectorSpecies;

/**
 * IQ4_NL and IQ4_XS weights kept as their 4-bit indices into the 16 values of {@link Int8Blocks#KVALUES}, looked up
 * per vector of rows ({@code IntVector.selectFrom}), where {@link Int8PanelMatrix} keeps one byte per weight: a
 * one-token call reads half the bytes. The same products in the same order as the int8 panels, so the same bits:
 * per unit of 32 columns {@code usum = fma(value, x[c], usum)} over its columns in order, then
 * {@code acc = fma(usum, scale, acc)} over the units; the one-token, token-group and prefill paths repeat
 * Int8PanelMatrix's loops with a lookup where it converts a byte.
 *
 * <p>Only where the lookup is cheap ({@link #AVAILABLE}): 512-bit vectors, whose 16 float lanes hold the 16 values,
 * and a JDK whose {@code selectFrom} wraps its indices (JDK 24 on). There a byte's sign-extended value is its low
 * index and {@code v >> 4} its high one, with no mask and no index check: stand-alone, 43.6 G weights/s in cache
 * (0.79x the int8 panels) and 34.5-36.5 from memory (1.53-1.58x), where JDK 17's checked lookup ran 7.8 and 7.6
 * (docs/engine-speed.md). Elsewhere the int8 panels serve these types.
 *
 * <p>Layout, in panels of H = 4L rows: per panel and unit, 32 columns of 2L bytes, then the unit's H scales as floats
 * (platform order). In column c's bytes, byte j (j &lt; L) holds row j in its low nibble and row L + j in its high
 * one; byte L + j rows 2L + j and 3L + j.
 */
final class Iq4PanelMatrix extends PanelMatrix {
    /** Whether this class can serve here: see above. */
    static final boolean AVAILABLE = L == 16 && selectFromWraps();

    private static final int UNIT = 32;
    /** Rows per panel. */
    private static final int H = WidenedSlices.H;
    /** Bytes per panel and unit: 32 columns of H / 2 bytes, then H floats. */
    private static final int UNIT_BYTES = UNIT * H / 2 + H * Float.BYTES;
    private static final int TOKENS = 4;
    /** L bytes, one per two rows (only used where L is 16). */
    private static final VectorSpecies<Byte> B = ByteVector.SPECIES_128;
    private static final VectorSpecies<Integer> I = IntVector.SPECIES_512;
    private static final VarHandle FLOAT = MethodHandles.byteArrayViewVarHandle(float[].class, ByteOrder.nativeOrder());
    /** The 16 values as float bits, one per lane (512 bits). */
    private static final IntVector TABLE = AVAILABLE ? table() : null;
    /** Index of each value of KVALUES, by the value's byte; -1 elsewhere. */
    private static final int[] INDEX = new int[256];

    static {
        Arrays.fill(INDEX, -1);
        for (int i = 0; i < Int8Blocks.KVALUES.length; i++) {
            INDEX[Int8Blocks.KVALUES[i] & 0xFF] = i;
        }
    }

    private final GgmlType type;
    private final int blocks;
    /** [panels][blocks][UNIT_BYTES], as above; rows past the last hold index 0 and scale 0 (never stored). */
    private final byte[] q;
    /** A prefill's loop and scratch. */
    private final WidenedSlices prefill = new WidenedSlices(this::widen, UNIT, UNIT_BYTES, UNIT * H / 2);

    /** {@code packed} as {@link Int8Blocks#iq4_nl} or {@link Int8Blocks#iq4_xs} gives it: values of KVALUES. */
    Iq4PanelMatrix(String name, int rows, int cols, GgmlType type, PackedBlocks packed) {
        super(name, rows, cols, TOKENS, H);
        if (!AVAILABLE) {
            throw new IllegalStateException("IQ4 nibble panels need 512-bit vectors and a wrapping selectFrom");
        }
        this.type = type;
        this.blocks = cols / UNIT;
        packed.requireShape(name, rows, blocks, UNIT);
        this.q = new byte[arrayLength(name, rows, cols, (long) panels * blocks * UNIT_BYTES)];
        byte[] quants = packed.quants();
        float[] scales = packed.scales();
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < cols; c++) {
                int v = quants[r * cols + c];
                int n = INDEX[v & 0xFF];
                if (n < 0) {
                    throw new IllegalArgumentException(name + ": row " + r + ", column " + c + ": " + v
                            + " is not one of the IQ4 values");
                }
                int at = nibbleAt(r, c);
                q[at] = (byte) (lowRow(r) ? (q[at] & 0xF0) | n : (q[at] & 0x0F) | n << 4);
            }
            for (int b = 0; b < blocks; b++) {
                FLOAT.set(q, scaleAt(r, b), scales[r * blocks + b]);
            }
        }
    }

    private Iq4PanelMatrix(Iq4PanelMatrix shared) {
        super(shared.name, shared.rows, shared.cols, TOKENS, H);
        this.type = shared.type;
        this.blocks = shared.blocks;
        this.q = shared.q;
    }

    /** Heap bytes a rows x cols matrix takes (its rows rounded up to whole panels). */
    static long heapBytes(long rows, long cols) {
        return paddedRows(rows, H) * (cols / 2 + cols / UNIT * Float.BYTES);
    }

    private static IntVector table() {
        float[] values = new float[16];
        for (int i = 0; i < 16; i++) {
            values[i] = Int8Blocks.KVALUES[i];
        }
        return FloatVector.fromArray(FloatVector.SPECIES_512, values, 0).reinterpretAsInts();
    }

    /** Whether {@code selectFrom} takes indices modulo the lane count (JDK 24 on) rather than refusing them. */
    private static boolean selectFromWraps() {
        try {
            int[] idx = new int[16];
            int[] lanes = new int[16];
            for (int i = 0; i < 16; i++) {
                idx[i] = i * 37 - 300; // negative and past the end
                lanes[i] = 100 + i;
            }
            int[] got = IntVector.fromArray(IntVector.SPECIES_512, idx, 0)
                    .selectFrom(IntVector.fromArray(IntVector.SPECIES_512, lanes, 0)).toArray();
            for (int i = 0; i < 16; i++) {
                if (got[i] != 100 + Math.floorMod(idx[i], 16)) {
                    return false;
                }
            }
            return true;
        } catch (RuntimeException e) { // IndexOutOfBoundsException before JDK 24
            return false;
        }
    }

    /** Where row r's nibble of column c is. */
    private int nibbleAt(int r, int c) {
        int i = r % H;
        return ((r / H) * blocks + c / UNIT) * UNIT_BYTES + (c % UNIT) * (H / 2) + (i / (2 * L)) * L + i % L;
    }

    /** Whether row r is in the low nibbles. */
    private static boolean lowRow(int r) {
        return r % (2 * L) < L;
    }

    /** Where row r's scale of unit b is. */
    private int scaleAt(int r, int b) {
        return ((r / H) * blocks + b) * UNIT_BYTES + UNIT * H / 2 + (r % H) * Float.BYTES;
    }

    @Override
    PanelMatrix view() {
        return new Iq4PanelMatrix(this);
    }

    @Override
    public GgmlType type() {
        return type;
    }

    @Override
    protected int touch(int p) {
        return PanelTouch.lines(q, p * blocks * UNIT_BYTES, blocks * UNIT_BYTES);
    }

    @Override
    protected void wholePanels(float[] x, int xo, float[] out, int oo, int from, int to) {
        for (int p = from; p < to; p++) {
            m1(q, p * blocks * UNIT_BYTES, blocks, x, xo, out, oo + p * panelRows);
        }
    }

    /**
     * One panel of H rows (from {@code qo}) . one token: out[oo..oo+H). Per column, two loads of L bytes, four
     * lookups and four FMA chains; per unit, its sums times its scales. Only Vector API calls inside: a helper of
     * ours left out of line would box its vectors.
     */
    private static void m1(byte[] q, int qo, int blocks, float[] x, int xo, float[] out, int oo) {
        IntVector table = TABLE;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0;
        for (int b = 0; b < blocks; b++) {
            int bo = qo + b * UNIT_BYTES;
            int xb = xo + b * UNIT;
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0; // the unit's sums
            for (int c = 0; c < UNIT; c++) {
                FloatVector xv = FloatVector.broadcast(F, x[xb + c]);
                int o = bo + c * (H / 2);
                IntVector v = (IntVector) ByteVector.fromArray(B, q, o).convertShape(B2I, I, 0);
                IntVector w = (IntVector) ByteVector.fromArray(B, q, o + L).convertShape(B2I, I, 0);
                s0 = v.selectFrom(table).reinterpretAsFloats().fma(xv, s0);
                s1 = v.lanewise(ASHR, 4).selectFrom(table).reinterpretAsFloats().fma(xv, s1);
                s2 = w.selectFrom(table).reinterpretAsFloats().fma(xv, s2);
                s3 = w.lanewise(ASHR, 4).selectFrom(table).reinterpretAsFloats().fma(xv, s3);
            }
            int so = bo + UNIT * H / 2; // the unit's H scales
            a0 = s0.fma(scales(q, so), a0);
            a1 = s1.fma(scales(q, so + L * Float.BYTES), a1);
            a2 = s2.fma(scales(q, so + 2 * L * Float.BYTES), a2);
            a3 = s3.fma(scales(q, so + 3 * L * Float.BYTES), a3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + L);
        FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * L);
        FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * L);
    }

    @Override
    protected void prepare(float[] x, int xo, int n) {
        prefill.newCall();
    }

    /**
     * A prefill ({@link WidenedSlices#serves}): as {@link Int8PanelMatrix}'s, the whole panels through
     * {@link WidenedSlices}, each slice of P rows looked up into floats a chunk of columns at a time ({@link #widen}).
     */
    @Override
    protected void panelsTokens(float[] x, int xo, int n, float[] out, int oo, int from, int to) {
        if (!WidenedSlices.serves(n)) {
            groups(x, xo, n, out, oo, from, to);
            return;
        }
        int whole = Math.min(to, fullPanels);
        prefill.run(q, cols, rows, x, xo, n, out, oo, from, whole);
        groups(x, xo, n, out, oo, Math.max(from, whole), to);
    }

    /** {@link WidenedSlices.Widener#widen}: each index looked up in the 16 values. */
    private void widen(int bo, int h, int width, float[] w) {
        byte[] q = this.q;
        IntVector table = TABLE;
        bo += h / 2; // rows h.. of a column: the bytes from h / 2 (P rows per L bytes)
        for (int u = 0; u < width; u += UNIT, bo += UNIT_BYTES) {
            for (int c = 0; c < UNIT; c++) {
                IntVector v = (IntVector) ByteVector.fromArray(B, q, bo + c * (H / 2)).convertShape(B2I, I, 0);
                v.selectFrom(table).reinterpretAsFloats().intoArray(w, (u + c) * P);
                v.lanewise(ASHR, 4).selectFrom(table).reinterpretAsFloats().intoArray(w, (u + c) * P + L);
            }
        }
    }

    @Override
    protected void group(int p, float[] x, int xo, int t0, int valid, float[] out, int oo, int os) {
        for (int h = 0; h < H; h += P) {
            k2x4(p, h, x, xo, valid, out, oo + h, os);
        }
    }

    /**
     * Rows [h, h + P) of panel p . tokens j in [0, valid) (valid 1..4) of x (token j at {@code xo + j * cols}):
     * out[oo + j * os + i]; missing tokens repeat the last valid one and are not stored. Int8PanelMatrix's k2x4 with
     * lookups.
     */
    private void k2x4(int p, int h, float[] x, int xo, int valid, float[] out, int oo, int os) {
        byte[] q = this.q;
        IntVector table = TABLE;
        int qo = p * blocks * UNIT_BYTES + h / 2;
        int x0 = xo;
        int x1 = xo + Math.min(1, valid - 1) * cols;
        int x2 = xo + Math.min(2, valid - 1) * cols;
        int x3 = xo + Math.min(3, valid - 1) * cols;
        FloatVector a0 = FloatVector.zero(F), a1 = a0, a2 = a0, a3 = a0; // totals, rows h + [0, L), per token
        FloatVector b0 = a0, b1 = a0, b2 = a0, b3 = a0;                   // totals, rows h + [L, P)
        for (int b = 0; b < blocks; b++) {
            int bo = qo + b * UNIT_BYTES;
            FloatVector s0 = FloatVector.zero(F), s1 = s0, s2 = s0, s3 = s0;
            FloatVector t0 = s0, t1 = s0, t2 = s0, t3 = s0;
            for (int c = 0; c < UNIT; c++) {
                int xc = b * UNIT + c;
                IntVector v = (IntVector) ByteVector.fromArray(B, q, bo + c * (H / 2)).convertShape(B2I, I, 0);
                FloatVector w0 = v.selectFrom(table).reinterpretAsFloats();
                FloatVector w1 = v.lanewise(ASHR, 4).selectFrom(table).reinterpretAsFloats();
                FloatVector xv = FloatVector.broadcast(F, x[x0 + xc]);
                s0 = w0.fma(xv, s0); t0 = w1.fma(xv, t0);
                xv = FloatVector.broadcast(F, x[x1 + xc]);
                s1 = w0.fma(xv, s1); t1 = w1.fma(xv, t1);
                xv = FloatVector.broadcast(F, x[x2 + xc]);
                s2 = w0.fma(xv, s2); t2 = w1.fma(xv, t2);
                xv = FloatVector.broadcast(F, x[x3 + xc]);
                s3 = w0.fma(xv, s3); t3 = w1.fma(xv, t3);
            }
            int so = p * blocks * UNIT_BYTES + b * UNIT_BYTES + UNIT * H / 2 + h * Float.BYTES; // scales of rows h..
            FloatVector d0 = scales(q, so);
            FloatVector d1 = scales(q, so + L * Float.BYTES);
            a0 = s0.fma(d0, a0); b0 = t0.fma(d1, b0);
            a1 = s1.fma(d0, a1); b1 = t1.fma(d1, b1);
            a2 = s2.fma(d0, a2); b2 = t2.fma(d1, b2);
            a3 = s3.fma(d0, a3); b3 = t3.fma(d1, b3);
        }
        FloatVector.broadcast(F, -0f).add(a0).intoArray(out, oo);
        FloatVector.broadcast(F, -0f).add(b0).intoArray(out, oo + L);
        if (valid > 1) {
            FloatVector.broadcast(F, -0f).add(a1).intoArray(out, oo + os);
            FloatVector.broadcast(F, -0f).add(b1).intoArray(out, oo + os + L);
        }
        if (valid > 2) {
            FloatVector.broadcast(F, -0f).add(a2).intoArray(out, oo + 2 * os);
            FloatVector.broadcast(F, -0f).add(b2).intoArray(out, oo + 2 * os + L);
        }
        if (valid > 3) {
            FloatVector.broadcast(F, -0f).add(a3).intoArray(out, oo + 3 * os);
            FloatVector.broadcast(F, -0f).add(b3).intoArray(out, oo + 3 * os + L);
        }
    }

    @Override
    protected void decodeRow(int row, float[] dst, int off) {
        for (int c = 0; c < cols; c++) {
            int v = q[nibbleAt(row, c)];
            int n = lowRow(row) ? v & 0xF : (v >> 4) & 0xF;
            dst[off + c] = Int8Blocks.KVALUES[n] * (float) FLOAT.get(q, scaleAt(row, c / UNIT));
        }
    }
}
