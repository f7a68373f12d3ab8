package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * F32's row panels: every (row, token) equals the scalar chain {@code acc = Math.fma(w[c], x[c], acc)} over the
 * columns in order, bit for bit, for one token and for any number of tokens; rows past the last whole panel and
 * tokens past the last whole group of 8 are computed and stored like the others, and nothing outside the output
 * rows is written.
 */
class F32MatrixTest {
    private static final int P = PanelKernels.P;

    @ParameterizedTest(name = "{0} rows x {1} cols")
    @CsvSource({
        "1, 5",          // one partial panel, one column
        "11, 70",        // one partial panel
        "P_9, 33",       // 9 whole panels (two groups of four, one left) and no partial one
        "P_5_3, 96",     // 5 whole panels and a partial one of 3 rows
        "P_4_1, 1",      // one column
    })
    void everyRowAndTokenIsTheScalarFmaChainInColumnOrder(String rowsSpec, int cols) {
        int rows = rows(rowsSpec);
        SplittableRandom r = new SplittableRandom(rows * 31L + cols);
        float[] weights = new float[rows * cols];
        ByteBuffer b = ByteBuffer.allocate(weights.length * 4).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < weights.length; i++) {
            weights[i] = (float) r.nextGaussian();
            b.putFloat(i * 4, weights[i]);
        }
        WeightMatrix m = new F32Matrix("w", rows, cols, b);
        int maxTokens = 19; // two whole groups of 8 and 3 left over
        float[] x = new float[maxTokens * cols + 3];
        for (int i = 0; i < x.length; i++) {
            x[i] = (float) r.nextGaussian();
        }
        float[] row = new float[cols];
        for (int i = 0; i < rows; i++) {
            m.readRow(i, row, 0);
            assertArrayEquals(Arrays.copyOfRange(weights, i * cols, (i + 1) * cols), row, 0f, "row " + i + " reads back");
        }
        for (int n : new int[] {1, 2, 7, 8, 9, 16, 19}) {
            int xOff = 3; // offsets on both sides
            int outOff = 5;
            float[] out = new float[outOff + n * rows + 4];
            Arrays.fill(out, Float.NaN);
            m.matmul(x, xOff, n, out, outOff);
            for (int t = 0; t < n; t++) {
                for (int i = 0; i < rows; i++) {
                    float acc = 0f;
                    for (int c = 0; c < cols; c++) {
                        acc = Math.fma(weights[i * cols + c], x[xOff + t * cols + c], acc);
                    }
                    assertEquals(Float.floatToIntBits(acc), Float.floatToIntBits(out[outOff + t * rows + i]),
                            n + " tokens: token " + t + " row " + i + ": " + out[outOff + t * rows + i] + " vs " + acc);
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

    /** "P_a_b" = a whole panels and b rows more; a plain number is itself. */
    private static int rows(String spec) {
        if (!spec.startsWith("P_")) {
            return Integer.parseInt(spec);
        }
        String[] parts = spec.split("_");
        return Integer.parseInt(parts[1]) * P + (parts.length > 2 ? Integer.parseInt(parts[2]) : 0);
    }
}
