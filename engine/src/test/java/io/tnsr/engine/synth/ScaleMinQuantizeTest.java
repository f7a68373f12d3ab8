package io.tnsr.engine.synth;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.testing.SharedData;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.util.Locale;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The synthetic writer's Q4_1, Q5_K and Q2_K: its quantizers (ports of ggml's reference ones) write the bytes
 * llama-quantize wrote from the same F32 weights, block for block; and models of each type load, hold the F32
 * model's weights of the same seed quantized, and run to logits near the F32 model's.
 */
class ScaleMinQuantizeTest {
    @TempDir
    Path tmp;

    @ParameterizedTest
    @CsvSource({"q256-q4_1.gguf, Q4_1", "q256-q5_k_s.gguf, Q5_K", "q256-q5_k_m.gguf, Q5_K", "q256-q2_k.gguf, Q2_K"})
    void quantizersReproduceLlamaQuantize(String file, GgmlType type) {
        try (GgufFile q = GgufFile.open(SharedData.path("models/quantized/" + file));
             GgufFile f = GgufFile.open(SharedData.path("models/quantized/q256.gguf"))) {
            int checked = 0;
            long blocks = 0;
            long differ = 0;
            for (GgufTensorInfo t : q.tensors().values()) {
                if (t.type() != type) {
                    continue;
                }
                ByteBuffer src = f.map(t.name()).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer want = q.map(t.name()).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer got = ByteBuffer.allocate(want.remaining()).order(ByteOrder.LITTLE_ENDIAN);
                int n = type.blockSize();
                float[] block = new float[n];
                for (int i = 0; i < t.elementCount(); i += n) {
                    for (int j = 0; j < n; j++) {
                        block[j] = src.getFloat((i + j) * 4);
                    }
                    int at = got.position();
                    switch (type) {
                        case Q4_1 -> Quantize.q4_1(block, 0, got);
                        case Q5_K -> Quantize.q5_K(block, 0, got);
                        default -> Quantize.q2_K(block, 0, got);
                    }
                    blocks++;
                    if (!got.slice(at, type.blockBytes()).equals(want.slice(at, type.blockBytes()))) {
                        differ++;
                    }
                }
                checked++;
            }
            System.out.printf(Locale.ROOT, "%-17s %s: %d of %d blocks differ from llama-quantize's%n", file, type, differ, blocks);
            assertTrue(checked > 0, "no " + type + " tensor in " + file);
            assertEquals(0, differ, file + ": blocks that differ from llama-quantize's");
        }
    }

    /**
     * A small model of each type: every matrix of the type, decoded by the engine within the quantizer's reach of
     * the F32 model's weights (relative rms error per matrix, bound 1.5x the worst measured), and logits near the
     * F32 model's (bound 1.5x the measured).
     */
    @ParameterizedTest
    @CsvSource({
        // type, general.file_type, max relative rms error of a matrix, of the logits; measured 0.0610 0.202 (Q4_1),
        // 0.0277 0.100 (Q5_K), 0.234 0.731 (Q2_K: 2-bit weights, far from the F32 model's logits after 2 layers)
        "Q4_1, 3, 0.092, 0.30",
        "Q5_K, 16, 0.042, 0.15",
        "Q2_K, 10, 0.35, 1.1",
    })
    void modelsLoadAndRunNearTheF32Model(GgmlType type, int fileType, double maxWeights, double maxLogits) throws IOException {
        Path qp = tmp.resolve("q.gguf");
        Path fp = tmp.resolve("f32.gguf");
        SyntheticModel.write(SyntheticModelTest.small(type), qp);
        SyntheticModel.write(SyntheticModelTest.small(GgmlType.F32), fp);
        try (GgufFile q = GgufFile.open(qp); GgufFile f = GgufFile.open(fp)) {
            assertEquals(fileType, q.metadata().getInt("general.file_type"));
            double worst = 0;
            int matrices = 0;
            for (GgufTensorInfo t : q.tensors().values()) {
                if (t.dims().length != 2) {
                    assertEquals(GgmlType.F32, t.type(), t.name());
                    continue;
                }
                assertEquals(type, t.type(), t.name());
                assertEquals(type.bytesFor(t.elementCount()), t.byteSize(), t.name());
                int cols = (int) t.dim(0);
                int rows = (int) t.dim(1);
                WeightMatrix wq = WeightMatrix.load(q, t.name(), rows, cols);
                WeightMatrix wf = WeightMatrix.load(f, t.name(), rows, cols);
                float[] a = new float[cols];
                float[] b = new float[cols];
                double err = 0;
                double norm = 0;
                for (int r = 0; r < rows; r++) {
                    wq.readRow(r, a, 0);
                    wf.readRow(r, b, 0);
                    for (int c = 0; c < cols; c++) {
                        err += (a[c] - b[c]) * (double) (a[c] - b[c]);
                        norm += b[c] * (double) b[c];
                    }
                }
                worst = Math.max(worst, Math.sqrt(err / norm));
                matrices++;
            }
            assertEquals(2 + 2 * 7, matrices, "token_embd, output and 7 per layer");
            int[] tokens = {1, 300, 301, 410, 77, 5};
            float[] lq = SyntheticModelTest.logits(q, tokens);
            float[] lf = SyntheticModelTest.logits(f, tokens);
            double err = 0;
            double norm = 0;
            for (int i = 0; i < lf.length; i++) {
                assertTrue(Float.isFinite(lq[i]), "logit " + i);
                err += (lq[i] - lf[i]) * (double) (lq[i] - lf[i]);
                norm += lf[i] * (double) lf[i];
            }
            double rel = Math.sqrt(err / norm);
            System.out.printf(Locale.ROOT, "%s small model: worst matrix relative rms error %.4f, logits %.4f%n", type, worst, rel);
            assertTrue(worst <= maxWeights, type + ": a matrix's relative rms error " + worst);
            assertTrue(rel <= maxLogits, type + ": logits' relative rms error " + rel);
        }
    }
}
