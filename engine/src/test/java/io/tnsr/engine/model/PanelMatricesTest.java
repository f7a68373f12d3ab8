package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.SplittableRandom;
import java.util.function.IntBinaryOperator;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The row-panel types (F32, BF16, the int8 types, Q4_0, Q4_K; {@link PanelKernels}): every (row, token) equals the
 * scalar reference of the type's documented order, bit for bit, for one token and for any number of tokens; rows past the last whole
 * panel and tokens past the last whole group are computed and stored like the others, and nothing outside the
 * output rows is written. The references: F32 and BF16 {@code acc = Math.fma(w[c], x[c], acc)} over the columns in
 * order; the int8 types (Q8_0, Q6_K, IQ4_NL, IQ4_XS) the same over each unit's quants ({@code q}, as
 * floats; 32 elements, 16 for Q6_K) into a unit sum, then {@code acc = Math.fma(usum, scale, acc)}; Q4_0, Q5_0 and Q4_K
 * quantize x per block of 32 ({@code xq = rint(x * 127 / amax)}), sum {@code (q - 8) * xq} (Q5_0: {@code (q - 16) * xq})
 * as integers and do
 * {@code acc = Math.fma((float) isum, scale * (amax / 127), acc)}; Q4_K then also
 * {@code acc = Math.fma(Math.fma(scale, 8, -min), sx, acc)} with sx the sum of x over the sub-block, in order.
 */
class PanelMatricesTest {
    private static final int P = PanelKernels.P;

    /** A matrix and its scalar reference. */
    private interface Case {
        WeightMatrix matrix();

        float weight(int row, int col);

        float dot(int row, float[] x, int xo);
    }

    private static Case f32(int rows, int cols, SplittableRandom r) {
        float[] w = new float[rows * cols];
        ByteBuffer b = ByteBuffer.allocate(w.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < w.length; i++) {
            w[i] = (float) r.nextGaussian();
            b.putFloat(i * 4, w[i]);
        }
        WeightMatrix m = new F32Matrix("w", rows, cols, b);
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            public float weight(int row, int col) {
                return w[row * cols + col];
            }

            public float dot(int row, float[] x, int xo) {
                float acc = 0f;
                for (int c = 0; c < cols; c++) {
                    acc = Math.fma(w[row * cols + c], x[xo + c], acc);
                }
                return acc;
            }
        };
    }

    /** BF16: F32's chain over the widened values; bf16(v) is the top half of v's bits. */
    private static Case bf16(int rows, int cols, SplittableRandom r) {
        float[] w = new float[rows * cols];
        ByteBuffer b = ByteBuffer.allocate(w.length * 2).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < w.length; i++) {
            int bits = Float.floatToIntBits((float) r.nextGaussian()) >>> 16;
            w[i] = Float.intBitsToFloat(bits << 16);
            b.putShort(i * 2, (short) bits);
        }
        WeightMatrix m = new BF16Matrix("w", rows, cols, b);
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            public float weight(int row, int col) {
                return w[row * cols + col];
            }

            public float dot(int row, float[] x, int xo) {
                float acc = 0f;
                for (int c = 0; c < cols; c++) {
                    acc = Math.fma(w[row * cols + c], x[xo + c], acc);
                }
                return acc;
            }
        };
    }

    /**
     * The int8 types as repacked: one int8 per element, one scale per unit (32: Q8_0, IQ4_NL, IQ4_XS;
     * 16: Q6_K).
     */
    private static Case int8(String type, int rows, int cols, SplittableRandom r) {
        int unit = type.equals("Q6_K") ? 16 : 32;
        int blocks = cols / unit;
        byte[] q = new byte[rows * cols];
        float[] d = new float[rows * blocks];
        for (int i = 0; i < q.length; i++) {
            q[i] = (byte) r.nextInt(-128, 128); // -128 too: a file may hold it
        }
        for (int i = 0; i < d.length; i++) {
            d[i] = (float) (r.nextDouble() * 0.02);
        }
        PackedBlocks packed = new PackedBlocks(q.clone(), d.clone());
        WeightMatrix m = switch (type) {
            case "Q8_0" -> Int8PanelMatrix.q8_0("w", rows, cols, packed);
            case "Q6_K" -> Int8PanelMatrix.q6_K("w", rows, cols, packed);
            case "IQ4_NL" -> Int8PanelMatrix.iq4_nl("w", rows, cols, packed);
            default -> Int8PanelMatrix.iq4_xs("w", rows, cols, packed);
        };
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            public float weight(int row, int col) {
                return q[row * cols + col] * d[row * blocks + col / unit];
            }

            public float dot(int row, float[] x, int xo) {
                float acc = 0f;
                for (int b = 0; b < blocks; b++) {
                    float s = 0f;
                    for (int c = b * unit; c < b * unit + unit; c++) {
                        s = Math.fma(q[row * cols + c], x[xo + c], s);
                    }
                    acc = Math.fma(s, d[row * blocks + b], acc);
                }
                return acc;
            }
        };
    }

    /**
     * IQ4_NL or IQ4_XS kept as 4-bit indices ({@link Iq4PanelMatrix}): the int8 types' reference over the 16 values,
     * so the same bits as their int8 panels.
     */
    private static Case iq4Nibbles(String type, int rows, int cols, SplittableRandom r) {
        assumeTrue(Iq4PanelMatrix.AVAILABLE, "IQ4 nibble panels need 512-bit vectors and JDK 24 or later: not run here");
        int blocks = cols / 32;
        byte[] q = new byte[rows * cols];
        float[] d = new float[rows * blocks];
        for (int i = 0; i < q.length; i++) {
            q[i] = Int8Blocks.KVALUES[r.nextInt(16)];
        }
        for (int i = 0; i < d.length; i++) {
            d[i] = (float) (r.nextDouble() * 0.02);
        }
        WeightMatrix m = new Iq4PanelMatrix("w", rows, cols,
                type.endsWith("XS") ? GgmlType.IQ4_XS : GgmlType.IQ4_NL, new PackedBlocks(q.clone(), d.clone()));
        assertEquals(type.endsWith("XS") ? GgmlType.IQ4_XS : GgmlType.IQ4_NL, m.type());
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            public float weight(int row, int col) {
                return q[row * cols + col] * d[row * blocks + col / 32];
            }

            public float dot(int row, float[] x, int xo) {
                float acc = 0f;
                for (int b = 0; b < blocks; b++) {
                    float s = 0f;
                    for (int c = b * 32; c < b * 32 + 32; c++) {
                        s = Math.fma(q[row * cols + c], x[xo + c], s);
                    }
                    acc = Math.fma(s, d[row * blocks + b], acc);
                }
                return acc;
            }
        };
    }

    /**
     * Q4_0's and Q5_0's order: per block of 32, x rounded to {@code xq = rint(x * 127 / amax)}, the integer sum of
     * {@code q(row, c) * xq}, then {@code acc = fma((float) isum, scale * (amax / 127), acc)} over the blocks in order.
     */
    private static float int8ActivationsDot(int cols, IntBinaryOperator q, float[] d, int row, float[] x, int xo) {
        int blocks = cols / 32;
        float acc = 0f;
        for (int b = 0; b < blocks; b++) {
            float amax = 0f;
            for (int c = b * 32; c < b * 32 + 32; c++) {
                amax = Math.max(amax, Math.abs(x[xo + c]));
            }
            float id = amax > 0f ? 127f / amax : 0f;
            int isum = 0;
            for (int c = b * 32; c < b * 32 + 32; c++) {
                isum += q.applyAsInt(row, c) * (int) Math.rint(x[xo + c] * id);
            }
            acc = Math.fma((float) isum, d[row * blocks + b] * (amax / 127f), acc);
        }
        return acc;
    }

    private static Case q4_0(int rows, int cols, SplittableRandom r) {
        byte[] packed = new byte[rows * cols / 2]; // block k's 16 bytes: element i low nibble, 16 + i high
        float[] d = new float[rows * (cols / 32)];
        r.nextBytes(packed);
        for (int i = 0; i < d.length; i++) {
            d[i] = (float) (r.nextDouble() * 0.02);
        }
        return q4_0(rows, cols, packed, d);
    }

    private static Case q4_0(int rows, int cols, byte[] packed, float[] d) {
        int blocks = cols / 32;
        WeightMatrix m = new Q4_0Matrix("w", rows, cols, new PackedBlocks(packed.clone(), d.clone()));
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            private int q(int row, int col) {
                int b = packed[(row * blocks + col / 32) * 16 + col % 16];
                return (col % 32 < 16 ? b & 0xF : (b >> 4) & 0xF) - 8;
            }

            public float weight(int row, int col) {
                return q(row, col) * d[row * blocks + col / 32];
            }

            public float dot(int row, float[] x, int xo) {
                return int8ActivationsDot(cols, this::q, d, row, x, xo);
            }
        };
    }

    private static Case q5_0(int rows, int cols, SplittableRandom r) {
        byte[] v = new byte[rows * cols]; // q - 16 per element, as Int8Blocks.q5_0 gives them
        float[] d = new float[rows * (cols / 32)];
        for (int i = 0; i < v.length; i++) {
            v[i] = (byte) r.nextInt(-16, 16);
        }
        for (int i = 0; i < d.length; i++) {
            d[i] = (float) (r.nextDouble() * 0.02);
        }
        return q5_0(rows, cols, v, d);
    }

    /** Q5_0: Q4_0's reference over the values {@code q - 16}. */
    private static Case q5_0(int rows, int cols, byte[] v, float[] d) {
        int blocks = cols / 32;
        WeightMatrix m = new Q5_0Matrix("w", rows, cols, new PackedBlocks(v.clone(), d.clone()));
        assertEquals(GgmlType.Q5_0, m.type());
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            public float weight(int row, int col) {
                return v[row * cols + col] * d[row * blocks + col / 32];
            }

            public float dot(int row, float[] x, int xo) {
                return int8ActivationsDot(cols, (r, c) -> v[r * cols + c], d, row, x, xo);
            }
        };
    }

    /**
     * Q4_K as repacked: per super-block its 8 sc and 8 m (6 bits each), then 128 bytes of nibbles (sub-blocks 2p and
     * 2p + 1 in the low and high halves of 32 bytes); d and dmin per super-block, halves.
     */
    private static Case q4_K(int rows, int cols, SplittableRandom r) {
        int supers = rows * (cols / 256);
        byte[] packed = new byte[supers * 144];
        r.nextBytes(packed);
        float[] d = new float[supers];
        float[] dmin = new float[supers];
        for (int k = 0; k < supers; k++) {
            for (int j = 0; j < 16; j++) {
                packed[k * 144 + j] = (byte) r.nextInt(64);
            }
            d[k] = Float16.toFloat(Float16.fromFloat((float) (r.nextDouble() * 0.0005)));
            dmin[k] = Float16.toFloat(Float16.fromFloat((float) (r.nextDouble() * 0.002)));
        }
        return q4_K(rows, cols, packed, d, dmin);
    }

    private static Case q4_K(int rows, int cols, byte[] packed, float[] d, float[] dmin) {
        int units = cols / 32;
        float[] sc = new float[rows * units]; // the float products the kernels make: d * sc, dmin * m
        float[] mn = new float[rows * units];
        for (int i = 0; i < sc.length; i++) {
            sc[i] = d[i / 8] * packed[i / 8 * 144 + i % 8];
            mn[i] = dmin[i / 8] * packed[i / 8 * 144 + 8 + i % 8];
        }
        WeightMatrix m = new Q4KMatrix("w", rows, cols, new PackedBlocks(packed.clone(), d.clone(), dmin.clone()));
        return new Case() {
            public WeightMatrix matrix() {
                return m;
            }

            private int q(int row, int col) {
                int b = packed[(row * (cols / 256) + col / 256) * 144 + 16 + (col % 256 / 64) * 32 + col % 32];
                return (col / 32) % 2 == 0 ? b & 0xF : (b >> 4) & 0xF;
            }

            public float weight(int row, int col) {
                return q(row, col) * sc[row * units + col / 32] - mn[row * units + col / 32];
            }

            public float dot(int row, float[] x, int xo) {
                float acc = 0f;
                for (int u = 0; u < units; u++) {
                    float amax = 0f;
                    float sx = 0f;
                    for (int c = u * 32; c < u * 32 + 32; c++) {
                        amax = Math.max(amax, Math.abs(x[xo + c]));
                        sx += x[xo + c];
                    }
                    float id = amax > 0f ? 127f / amax : 0f;
                    int isum = 0;
                    for (int c = u * 32; c < u * 32 + 32; c++) {
                        isum += (q(row, c) - 8) * (int) Math.rint(x[xo + c] * id);
                    }
                    acc = Math.fma((float) isum, sc[row * units + u] * (amax / 127f), acc);
                    acc = Math.fma(Math.fma(sc[row * units + u], 8f, -mn[row * units + u]), sx, acc);
                }
                return acc;
            }
        };
    }

    @ParameterizedTest(name = "{0}: {1} rows x {2} cols")
    @CsvSource({
        "F32, 1, 5",          // one partial panel, odd columns
        "F32, 11, 70",        // one partial panel
        "F32, P_9, 33",       // 9 whole panels (two groups of four, one left) and no partial one
        "F32, P_5_3, 96",     // 5 whole panels and a partial one of 3 rows
        "F32, P_4_1, 1",      // one column
        "F32, P_9_5, 600",    // a few tokens: two groups of four panels over three chunks of columns (256, 256, 88)
        "F32, P_4, 513",      // one group of four panels, a last chunk of one column
        "Q8_0, 1, 32",        // one partial panel, one block
        "Q8_0, 11, 96",
        "Q8_0, P_3, 64",      // whole panels only
        "Q8_0, P_2_5, 160",   // 2 whole panels and a partial one of 5 rows
        "Q8_0, P_8, 32",      // Q8_0 and Q6_K stack 4 panels: 2 whole ones of 4P rows
        "Q8_0, P_9_7, 64",    // 2 whole ones of 4P rows and a partial one
        "Q8_0, P_9_7, 608",   // a prefill widens whole panels in chunks of 256, 256 and 96 columns
        "Q6_K, P_8_3, 784",   // chunks of 256, 256, 256 and one unit of 16
        "Q6_K, 1, 256",
        "Q6_K, P_2_5, 512",
        "Q6_K, P_5_3, 256",
        "Q5_0, 1, 32",        // one partial panel, one block
        "Q5_0, 11, 96",
        "Q5_0, P_2_5, 96",    // 2 whole panels and a partial one of 5 rows
        "Q5_0, P_1_17, 64",   // a partial panel with high-nibble rows
        "Q5_0, P_9_7, 608",   // a prefill widens whole panels in chunks of 256, 256 and 96 columns
        "IQ4_NL, 11, 64",
        "IQ4_XS, P_5_3, 256",
        "IQ4_NL nibbles, 11, 64",      // one partial panel
        "IQ4_NL nibbles, P_4, 96",     // whole panels of 4L rows only
        "IQ4_NL nibbles, P_9_7, 608",  // a prefill widens whole panels in chunks of 256, 256 and 96 columns
        "IQ4_XS nibbles, P_5_3, 256",
        "BF16, 1, 5",         // one partial panel, odd columns
        "BF16, 11, 70",
        "BF16, P_9, 33",      // 9 whole panels (two groups of four, one left), an odd last column
        "BF16, P_5_3, 96",
        "BF16, P_4_1, 1",     // one column: only the low half of one pair
        "Q4_K, 1, 256",
        "Q4_K, 11, 256",
        "Q4_K, P_2_17, 512",
        "Q4_0, 1, 32",
        "Q4_0, 11, 96",
        "Q4_0, P_3, 64",
        "Q4_0, P_2_5, 160",
        "Q4_0, P_1_17, 32",   // a partial panel with high-nibble rows
        "Q4_0, P_9_1, 64",    // more chunks than parts in a row split
        "Q8_0, P_17_3, 64",   // five panels of 4P rows: chunks of single panels, through the widened path too
    })
    void everyRowAndTokenIsTheScalarReferenceInTheTypesOrder(String type, String rowsSpec, int cols) {
        int rows = rows(rowsSpec);
        SplittableRandom r = new SplittableRandom(rows * 31L + cols);
        Case k = switch (type) {
            case "F32" -> f32(rows, cols, r);
            case "BF16" -> bf16(rows, cols, r);
            case "Q8_0", "Q6_K", "IQ4_NL", "IQ4_XS" -> int8(type, rows, cols, r);
            case "Q5_0" -> q5_0(rows, cols, r);
            case "IQ4_NL nibbles", "IQ4_XS nibbles" -> iq4Nibbles(type, rows, cols, r);
            case "Q4_K" -> q4_K(rows, cols, r);
            default -> q4_0(rows, cols, r);
        };
        WeightMatrix m = k.matrix();
        int maxTokens = 37; // 19: two whole groups of 8 and 3 left over (F32), four of 4 and 3 (Q8_0); 33 and 37 widen int8 panels
        float[] x = new float[maxTokens * cols + 3];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) r.nextGaussian();
        }
        float[] row = new float[cols];
        float[] want = new float[cols];
        for (int i = 0; i < rows; i++) {
            m.readRow(i, row, 0);
            for (int c = 0; c < cols; c++) {
                want[c] = k.weight(i, c);
            }
            assertArrayEquals(want, row, 0f, type + " row " + i + " reads back");
        }
        for (int call = 0; call < 24; call++) { // each panel read first or not, as a matrix chooses per call
            int n = new int[] {1, 2, 3, 4, 5, 7, 8, 9, 16, 19, 33, 37}[call % 12];
            ((PanelMatrix) m).fixTouch(call >= 12);
            int xOff = 3; // offsets on both sides
            int outOff = 5;
            float[] out = new float[outOff + n * rows + 4];
            Arrays.fill(out, Float.NaN);
            m.matmul(x, xOff, n, out, outOff);
            String how = call >= 12 ? " (panels read first)" : "";
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < rows; i++) {
                    float ref = k.dot(i, x, xOff + t * cols);
                    float got = out[outOff + t * rows + i];
                    assertEquals(Float.floatToIntBits(ref), Float.floatToIntBits(got),
                            type + ", " + n + " tokens" + how + ": token " + t + " row " + i + ": " + got + " vs " + ref);
                }
            }
            for (int i = 0; i < outOff; i++) {
                assertEquals(Float.NaN, out[i], "out[" + i + "] before the output written");
            }
            for (int i = outOff + n * rows; i < out.length; i++) {
                assertEquals(Float.NaN, out[i], "out[" + i + "] past the output written");
            }
        }
        for (int parts : new int[] {2, 3}) { // a row split: every part on its own, last first, gives the same bits
            RowParts split = RowParts.of(m, parts);
            assertEquals(parts, split.parts(), type + " splits");
            for (int n : new int[] {1, 2, 5, 16, 37}) {
                int xOff = 3;
                int outOff = 5;
                float[] out = new float[outOff + n * rows + 4];
                Arrays.fill(out, Float.NaN);
                for (int part = parts - 1; part >= 0; part--) {
                    split.run(part, x, xOff, n, out, outOff);
                    for (int t = 0; t < n; t++) {
                        for (int i = split.firstRow(part); i < split.firstRow(part + 1); i++) {
                            float ref = k.dot(i, x, xOff + t * cols);
                            float got = out[outOff + t * rows + i];
                            assertEquals(Float.floatToIntBits(ref), Float.floatToIntBits(got), type + ", " + n
                                    + " tokens, part " + part + " of " + parts + ": token " + t + " row " + i);
                        }
                        for (int i = 0; i < split.firstRow(part); i++) { // the parts before it not yet run
                            assertEquals(Float.NaN, out[outOff + t * rows + i], "part " + part + " wrote row " + i);
                        }
                    }
                }
                assertEquals(rows, split.firstRow(parts), "the parts cover every row");
                for (int i = 0; i < outOff; i++) {
                    assertEquals(Float.NaN, out[i], "out[" + i + "] before the output written");
                }
                for (int i = outOff + n * rows; i < out.length; i++) {
                    assertEquals(Float.NaN, out[i], "out[" + i + "] past the output written");
                }
            }
            // claimed chunks: each part's view prepared once, the chunks run last first and spread over the parts
            int chunks = split.chunks();
            assertEquals(0, split.chunkRow(0), "the first chunk starts at row 0");
            assertEquals(rows, split.chunkRow(chunks), "the chunks cover every row");
            for (int c = 0; c < chunks; c++) {
                assertTrue(split.chunkRow(c) <= split.chunkRow(c + 1), "chunk " + c + " ends before it starts");
            }
            for (int n : new int[] {1, 2, 5, 16, 37}) {
                int xOff = 3;
                int outOff = 5;
                float[] out = new float[outOff + n * rows + 4];
                Arrays.fill(out, Float.NaN);
                boolean[] begun = new boolean[parts];
                for (int c = chunks - 1; c >= 0; c--) {
                    int view = c % parts;
                    if (!begun[view]) {
                        split.begin(view, x, xOff, n);
                        begun[view] = true;
                    }
                    split.runChunk(view, c, x, xOff, n, out, outOff);
                }
                for (int t = 0; t < n; t++) {
                    for (int i = 0; i < rows; i++) {
                        float ref = k.dot(i, x, xOff + t * cols);
                        float got = out[outOff + t * rows + i];
                        assertEquals(Float.floatToIntBits(ref), Float.floatToIntBits(got), type + ", " + n
                                + " tokens in " + chunks + " chunks over " + parts + " views: token " + t + " row " + i);
                    }
                }
                for (int i = 0; i < outOff; i++) {
                    assertEquals(Float.NaN, out[i], "out[" + i + "] before the output written");
                }
                for (int i = outOff + n * rows; i < out.length; i++) {
                    assertEquals(Float.NaN, out[i], "out[" + i + "] past the output written");
                }
            }
        }
    }

    /**
     * The nibble types' integer sums at their extremes: every nibble 15 against activations all +127 (a block's
     * low-row lanes sum 16 * 15 * 127 = 30480, near the top of 16 bits, while the sums of the whole bytes the
     * one-token kernel adds up on the way wrap past it), every nibble 0 against -127, and the two mixed. Each
     * (row, token) is still the scalar reference's, bit for bit.
     */
    @ParameterizedTest
    @CsvSource({"Q4_0, 255, 1", "Q4_0, 0, -1", "Q4_0, 255, -1", "Q4_0, 15, 1", "Q4_0, 240, 1",
        "Q4_K, 255, 1", "Q4_K, 0, -1", "Q4_K, 255, -1", "Q4_K, 15, 1", "Q4_K, 240, 1"})
    void nibbleSumsAreExactAtTheirExtremes(String type, int nibbleByte, float sign) {
        int rows = P + 3;
        int cols = 512;
        Case k;
        if (type.equals("Q4_0")) {
            byte[] packed = new byte[rows * cols / 2];
            Arrays.fill(packed, (byte) nibbleByte);
            float[] scales = new float[rows * (cols / 32)];
            Arrays.fill(scales, 0.5f);
            k = q4_0(rows, cols, packed, scales);
        } else { // every sc and m 1, d 0.5, dmin 0.25
            int supers = rows * (cols / 256);
            byte[] packed = new byte[supers * 144];
            Arrays.fill(packed, (byte) nibbleByte);
            for (int s = 0; s < supers; s++) {
                Arrays.fill(packed, s * 144, s * 144 + 16, (byte) 1);
            }
            float[] d = new float[supers];
            Arrays.fill(d, 0.5f);
            float[] dmin = new float[supers];
            Arrays.fill(dmin, 0.25f);
            k = q4_K(rows, cols, packed, d, dmin);
        }
        float[] x = new float[37 * cols];
        Arrays.fill(x, sign);
        for (int n : new int[] {1, 2, 3, 4, 37}) { // 37: the widened path's float sums (Q4_0) at their largest
            float[] out = new float[n * rows];
            k.matrix().matmul(x, 0, n, out, 0);
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < rows; i++) {
                    assertEquals(Float.floatToIntBits(k.dot(i, x, t * cols)), Float.floatToIntBits(out[t * rows + i]),
                            type + ", " + n + " tokens: token " + t + " row " + i + ": " + out[t * rows + i]);
                }
            }
        }
    }

    /**
     * Q5_0's sums at their extremes: rows [0, L) of each panel at one value, the rest at another, against activations
     * all +127 or all -127. A row's block sums 32 * 16 * 127 = 65024 at -16 (past 16 bits: its two column parities
     * are added as ints), and the partial sums of {@code q} (up to 31 * 127 per product) wrap on the way.
     */
    @ParameterizedTest
    @CsvSource({"-16, -16, 1", "-16, -16, -1", "15, 15, 1", "15, 15, -1", "-16, 15, 1", "15, -16, -1", "0, -1, 1"})
    void q5_0SumsAreExactAtTheirExtremes(int lowRows, int highRows, float sign) {
        int rows = P + 3;
        int cols = 512;
        byte[] v = new byte[rows * cols];
        for (int i = 0; i < rows; i++) {
            Arrays.fill(v, i * cols, (i + 1) * cols, (byte) (i % P < P / 2 ? lowRows : highRows));
        }
        float[] scales = new float[rows * (cols / 32)];
        Arrays.fill(scales, 0.5f);
        Case k = q5_0(rows, cols, v, scales);
        float[] x = new float[37 * cols];
        Arrays.fill(x, sign);
        for (int n : new int[] {1, 2, 3, 4, 37}) { // 37: the widened path's float sums
            float[] out = new float[n * rows];
            k.matrix().matmul(x, 0, n, out, 0);
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < rows; i++) {
                    assertEquals(Float.floatToIntBits(k.dot(i, x, t * cols)), Float.floatToIntBits(out[t * rows + i]),
                            "Q5_0, " + n + " tokens: token " + t + " row " + i + ": " + out[t * rows + i]);
                }
            }
        }
    }

    /** "P_a_b" = a whole panels and b rows more; a plain number is itself. */
    private static int rows(String spec) {
        if (!spec.startsWith("P_")) {
            return Integer.parseInt(spec);
        }
        String[] parts = spec.split("_");
        return Integer.parseInt(parts[1]) * P + (parts.length > 2 ? Integer.parseInt(parts[2]) : 0);
    }
}
