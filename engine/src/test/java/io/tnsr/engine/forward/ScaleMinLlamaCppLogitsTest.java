package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.testing.SharedData;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.Locale;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The files of the scale-and-min types (Q4_1, Q5_K; with their Q6_K output) give logits close to llama.cpp's on
 * the same prompt (shared/golden/llama-cpp-logits: every position of the prompt, here fed one token at a time).
 * Both multiply these types against 8-bit activations, llama.cpp per 32 (q8_1) or per 256 (q8_K), the engine per
 * 32, so the logits differ by a little rounding, far less than the types' quantization error (the distance of
 * the same file's logits from the F32 original's, printed beside). Measure: rms(engine - llama.cpp) / rms(llama.cpp)
 * over every logit; bound 1.5x the measured (Q4_K_M, on the same path since before, printed for comparison).
 */
class ScaleMinLlamaCppLogitsTest {
    @ParameterizedTest(name = "{0}")
    @CsvSource({
        // file, max relative rms difference; measured 0.0146, 0.0173, 0.0178, 0.0176 (quantization error of the
        // files, llama.cpp's logits vs its F32 ones: 0.221, 0.073, 0.078, 0.149)
        "q256-q4_1.gguf, 0.022",
        "q256-q5_k_m.gguf, 0.026",
        "q256-q5_k_s.gguf, 0.027",
        "q256-q4_k_m.gguf, 0.027",
    })
    void logitsStayCloseToLlamaCpps(String file, double bound) throws IOException {
        String model = "quantized/" + file;
        String stem = file.substring(0, file.length() - ".gguf".length());
        float[] ref = floats(SharedData.path("golden/llama-cpp-logits/" + stem + ".f32"));
        float[] f32 = floats(SharedData.path("golden/llama-cpp-logits/q256.f32"));
        int[] tokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376, 400, 428, 395, 392, 412, 444, 426, 346, 397, 355};
        try (GgufFile f = GgufFile.open(SharedData.path("models/" + model))) {
            InProcessPipeline p = new InProcessPipeline(f, 1, 1);
            int vocab = p.cfg.vocabSize();
            Batch b = new Batch(1, 1);
            double err = 0;
            double norm = 0;
            double quant = 0;
            for (int pos = 0; pos < tokens.length; pos++) {
                float[] got = p.run(b.clear().add(1, pos, 1, true), new int[] {tokens[pos]});
                for (int i = 0; i < vocab; i++) {
                    double want = ref[pos * vocab + i];
                    err += (got[i] - want) * (got[i] - want);
                    norm += want * want;
                    quant += (want - f32[pos * vocab + i]) * (want - f32[pos * vocab + i]);
                }
            }
            double rel = Math.sqrt(err / norm);
            System.out.printf(Locale.ROOT, "%-18s vs llama.cpp: relative rms difference %.4f (llama.cpp's own vs its F32: %.4f)%n",
                    file, rel, Math.sqrt(quant / norm));
            assertTrue(rel <= bound, file + ": " + rel + " > " + bound);
        }
    }

    private static float[] floats(java.nio.file.Path path) throws IOException {
        ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(path)).order(ByteOrder.LITTLE_ENDIAN);
        float[] v = new float[b.remaining() / 4];
        b.asFloatBuffer().get(v);
        return v;
    }
}
