package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The q256 files of llama-quantize against the logits llama.cpp computes on them (golden/llama-cpp-logits): an
 * independent implementation of each type's dequantization and of the forward pass. llama.cpp multiplies quantized
 * weights with activations rounded to 8 bits, so the two differ by a small, type-dependent amount, far below the
 * quantization error itself (QuantizedModelsTest): a misread scale or nibble shows as an error of the order of the
 * logits (0.13 to 0.26 for Q5_0 to Q4_0 against the F32 original). Measure: rms(engine - llama.cpp) / rms(llama.cpp)
 * over every logit of the 28 prompt positions, one token at a time; bounds 1.5x the one measured (printed).
 */
class LlamaCppLogitsTest {

    @ParameterizedTest(name = "{0}")
    @CsvSource({
        // file, max relative rms difference: 1.5x the one measured (F32 1e-6: 1e-3)
        "q256.gguf, 0.001",
        "q256-bf16.gguf, 0.0051",   // 0.0034: llama.cpp rounds activations to BF16 for BF16 weights
        "q256-q8_0.gguf, 0.014",    // 0.0093
        "q256-q6_k.gguf, 0.021",    // 0.0141
        "q256-q5_0.gguf, 0.016",    // 0.0107
        "q256-q4_k_m.gguf, 0.027",  // 0.0176
        "q256-q4_0.gguf, 0.018",    // 0.0119
        "q256-iq4_nl.gguf, 0.016",  // 0.0106
        "q256-iq4_xs.gguf, 0.024",  // 0.0160
    })
    void logitsStayCloseToLlamaCpps(String file, double maxRelRms) throws IOException {
        @SuppressWarnings("unchecked")
        Map<String, Object> index = (Map<String, Object>) TestJson.read(SharedData.path("golden/llama-cpp-logits/index.json"));
        Map<?, ?> entry = (Map<?, ?>) ((Map<?, ?>) index.get("models")).get("quantized/" + file);
        int[] tokens = TestJson.ints(entry.get("prompt_tokens"));
        int vocab = ((Number) entry.get("n_vocab")).intValue();
        float[][] ref = rows(file.replace(".gguf", ".f32"), tokens.length, vocab);
        try (GgufFile f = GgufFile.open(SharedData.path("models/quantized/" + file))) {
            InProcessPipeline p = new InProcessPipeline(f, 16, 1);
            assertEquals(vocab, p.cfg.vocabSize());
            Batch b = new Batch(1, 16);
            double err = 0;
            double norm = 0;
            for (int pos = 0; pos < tokens.length; pos++) {
                float[] got = p.run(b.clear().add(1, pos, 1, true), new int[] {tokens[pos]});
                for (int i = 0; i < vocab; i++) {
                    double d = got[i] - ref[pos][i];
                    err += d * d;
                    norm += (double) ref[pos][i] * ref[pos][i];
                }
            }
            double rel = Math.sqrt(err / norm);
            System.out.printf(Locale.ROOT, "%-18s vs llama.cpp: relative rms difference %.6f over %d positions%n",
                    file, rel, tokens.length);
            assertTrue(rel <= maxRelRms, file + ": relative rms difference " + rel + " > " + maxRelRms);
        }
    }

    private static float[][] rows(String name, int rows, int vocab) {
        try {
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(SharedData.path("golden/llama-cpp-logits/" + name)))
                    .order(ByteOrder.LITTLE_ENDIAN);
            assertEquals((long) rows * vocab * 4, b.capacity(), name + ": rows x vocab floats");
            float[][] out = new float[rows][vocab];
            for (float[] row : out) {
                for (int i = 0; i < vocab; i++) {
                    row[i] = b.getFloat();
                }
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
