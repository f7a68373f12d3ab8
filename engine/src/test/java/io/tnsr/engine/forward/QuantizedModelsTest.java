package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.testing.SharedData;
import java.util.Locale;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Files written by llama.cpp's own quantizer load and run, and their logits stay close to the F32 original's
 * on the same tokens: the measured quantization error of each type (printed; the bounds are 1.5x the
 * relative error measured, and about 0.75x the top-1 agreement, see docs/engine-speed.md). The q256 model has
 * random weights, so its logits are small (rms 0.31) and close together: top-1 flips easily there.
 *
 * <p>Error measure, over every logit of every position: rms(quantized - f32) / rms(f32), and the share of
 * positions whose top-1 token is the same.
 */
class QuantizedModelsTest {

    static Stream<Arguments> files() {
        return Stream.of(
                // file, F32 original, max relative rms error, min top-1 agreement
                // measured here: 0.0181 53/57, 0.0608 49/57, 0.208 44/57, 0.263 30/57, 0.263 35/57 (Q4_1 + Q6_K),
                // 0.0967 42/57 (Q5_K_M), 0.107 41/57 (Q5_K_S), 0.0043 57/57, 0.0431 47/57
                Arguments.of("q256-q8_0.gguf", "models/quantized/q256.gguf", 0.027, 0.85),
                Arguments.of("q256-q6_k.gguf", "models/quantized/q256.gguf", 0.09, 0.75),
                Arguments.of("q256-q4_k_m.gguf", "models/quantized/q256.gguf", 0.31, 0.55),
                Arguments.of("q256-q4_0.gguf", "models/quantized/q256.gguf", 0.40, 0.40),
                // measured: 0.0049 56/57, 0.131 33/57, 0.216 15/57, 0.219 17/57
                Arguments.of("q256-bf16.gguf", "models/quantized/q256.gguf", 0.0074, 0.74),
                Arguments.of("q256-q5_0.gguf", "models/quantized/q256.gguf", 0.20, 0.43),
                Arguments.of("q256-iq4_nl.gguf", "models/quantized/q256.gguf", 0.33, 0.20),
                Arguments.of("q256-iq4_xs.gguf", "models/quantized/q256.gguf", 0.33, 0.22),
                Arguments.of("q256-q4_1.gguf", "models/quantized/q256.gguf", 0.40, 0.45),
                Arguments.of("q256-q5_k_m.gguf", "models/quantized/q256.gguf", 0.15, 0.55),
                Arguments.of("q256-q5_k_s.gguf", "models/quantized/q256.gguf", 0.16, 0.50),
                Arguments.of("stories260K-q8_0.gguf", "models/stories260K.gguf", 0.0065, 0.95),
                Arguments.of("stories260K-q4_0.gguf", "models/stories260K.gguf", 0.065, 0.70));
    }

    /** Logits of {@code tokens}: a prefill block of 8, then one token at a time. [positions - 7][vocab] */
    private static float[][] logits(GgufFile f, int[] tokens) {
        InProcessPipeline p = new InProcessPipeline(f, 16, 1);
        Batch b = new Batch(1, 16);
        float[][] out = new float[tokens.length - 7][];
        out[0] = p.run(b.clear().add(1, 0, 8, true), tokens);
        for (int pos = 8; pos < tokens.length; pos++) {
            out[pos - 7] = p.run(b.clear().add(1, pos, 1, true), new int[] {tokens[pos]});
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("files")
    void logitsStayCloseToTheF32Original(String file, String original, double maxRelRms, double minTop1) {
        try (GgufFile q = GgufFile.open(SharedData.path("models/quantized/" + file));
             GgufFile f = GgufFile.open(SharedData.path(original))) {
            int vocab = new InProcessPipeline(f, 1, 1).cfg.vocabSize();
            int[] tokens = new int[64];
            SplittableRandom r = new SplittableRandom(5);
            tokens[0] = 1;
            for (int i = 1; i < tokens.length; i++) {
                tokens[i] = 3 + r.nextInt(vocab - 3);
            }
            float[][] ref = logits(f, tokens);
            float[][] got = logits(q, tokens);
            double err = 0;
            double norm = 0;
            double maxAbs = 0;
            int same = 0;
            for (int p = 0; p < ref.length; p++) {
                for (int i = 0; i < vocab; i++) {
                    double d = got[p][i] - ref[p][i];
                    err += d * d;
                    norm += (double) ref[p][i] * ref[p][i];
                    maxAbs = Math.max(maxAbs, Math.abs(d));
                }
                same += argmax(ref[p]) == argmax(got[p]) ? 1 : 0;
            }
            double rel = Math.sqrt(err / norm);
            double top1 = same / (double) ref.length;
            System.out.printf(Locale.ROOT, "%-22s vs F32: relative rms error %.4f, max |diff| %.4f (rms logit %.3f), top-1 agreement %d/%d%n",
                    file, rel, maxAbs, Math.sqrt(norm / ((double) ref.length * vocab)), same, ref.length);
            assertTrue(rel <= maxRelRms, file + ": relative rms error " + rel + " > " + maxRelRms);
            assertTrue(top1 >= minTop1, file + ": top-1 agreement " + top1 + " < " + minTop1);
        }
    }

    private static int argmax(float[] v) {
        int best = 0;
        for (int i = 1; i < v.length; i++) {
            if (v[i] > v[best]) {
                best = i;
            }
        }
        return best;
    }
}
