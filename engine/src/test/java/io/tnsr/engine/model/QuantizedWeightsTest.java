package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import io.tnsr.engine.synth.Quantize;
import io.tnsr.engine.testing.SharedData;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.EnumSet;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Every weight matrix of llama.cpp's quantized q256 files, decoded row by row, against the same tensor of the
 * F32 original it was quantized from: catches a misplaced scale, nibble or sub-block in a decoder on real
 * files. Bound per type: relative rms error of the decoded matrix, 1.5x the worst tensor measured (BF16 0.0017,
 * Q8_0 0.0054, Q6_K 0.018, Q5_0 0.043, Q4_K 0.072, IQ4_NL 0.077, IQ4_XS 0.077, Q4_0 0.087, Q3_K 0.152; printed).
 * Tensors of types this engine does not load are left out (the Q3_K files also hold Q2_K or Q5_K).
 */
class QuantizedWeightsTest {
    private static final Map<GgmlType, Double> BOUND = Map.ofEntries(
            Map.entry(GgmlType.F16, 0.001), Map.entry(GgmlType.Q8_0, 0.008), Map.entry(GgmlType.Q6_K, 0.027),
            Map.entry(GgmlType.Q4_K, 0.11), Map.entry(GgmlType.Q4_0, 0.13),
            Map.entry(GgmlType.BF16, 0.0025), Map.entry(GgmlType.Q5_0, 0.065), Map.entry(GgmlType.IQ4_NL, 0.115),
            Map.entry(GgmlType.IQ4_XS, 0.116), Map.entry(GgmlType.Q3_K, 0.23));

    /**
     * The synthetic writer's quantizers give the bytes llama-quantize wrote, from the same F32 weights, for the types
     * whose quantizers follow ggml's exactly (every tensor of those types in the file).
     */
    @ParameterizedTest
    @ValueSource(strings = {"q256-q8_0.gguf", "q256-q4_0.gguf", "q256-q5_0.gguf", "q256-iq4_nl.gguf", "q256-iq4_xs.gguf",
        "q256-bf16.gguf", "q256-q3_k_m.gguf", "q256-q2_k.gguf"})
    void syntheticQuantizersReproduceLlamaQuantize(String file) {
        Set<GgmlType> exact = EnumSet.of(GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q5_0, GgmlType.IQ4_NL, GgmlType.IQ4_XS,
                GgmlType.BF16, GgmlType.Q3_K);
        try (GgufFile q = GgufFile.open(SharedData.path("models/quantized/" + file));
             GgufFile f = GgufFile.open(SharedData.path("models/quantized/q256.gguf"))) {
            int checked = 0;
            for (GgufTensorInfo t : q.tensors().values()) {
                if (!exact.contains(t.type())) {
                    continue;
                }
                ByteBuffer src = f.map(t.name()).order(ByteOrder.LITTLE_ENDIAN);
                ByteBuffer want = q.map(t.name());
                ByteBuffer got = ByteBuffer.allocate(want.remaining()).order(ByteOrder.LITTLE_ENDIAN);
                int n = Math.max(t.type().blockSize(), Quantize.QK);
                float[] block = new float[n];
                for (int i = 0; i < t.elementCount(); i += n) {
                    for (int j = 0; j < n; j++) {
                        block[j] = src.getFloat((i + j) * 4);
                    }
                    switch (t.type()) {
                        case Q8_0 -> Quantize.q8_0(block, 0, got);
                        case Q4_0 -> Quantize.q4_0(block, 0, got);
                        case Q5_0 -> Quantize.q5_0(block, 0, got);
                        case IQ4_NL -> Quantize.iq4_nl(block, 0, got);
                        case IQ4_XS -> Quantize.iq4_xs(block, 0, got);
                        case Q3_K -> Quantize.q3_K(block, 0, got);
                        default -> {
                            for (float v : block) {
                                got.putShort(Quantize.bf16(v));
                            }
                        }
                    }
                }
                assertTrue(got.flip().equals(want), file + ": " + t.name() + " (" + t.type() + ") differs from llama-quantize's bytes"
                        + " from byte " + firstDifference(got, want));
                checked++;
            }
            assertTrue(checked > 0, "no tensor of " + exact + " in " + file);
        }
    }

    private static int firstDifference(ByteBuffer a, ByteBuffer b) {
        int i = 0;
        while (i < a.remaining() && i < b.remaining() && a.get(a.position() + i) == b.get(b.position() + i)) {
            i++;
        }
        return i;
    }

    @ParameterizedTest
    @ValueSource(strings = {"q256-q8_0.gguf", "q256-q4_0.gguf", "q256-q4_k_m.gguf", "q256-q6_k.gguf", "q256-q5_0.gguf",
        "q256-iq4_nl.gguf", "q256-iq4_xs.gguf", "q256-bf16.gguf", "q256-q3_k_m.gguf", "q256-q2_k.gguf"})
    void decodedWeightsMatchTheF32Original(String file) {
        try (GgufFile q = GgufFile.open(SharedData.path("models/quantized/" + file));
             GgufFile f = GgufFile.open(SharedData.path("models/quantized/q256.gguf"))) {
            Map<GgmlType, double[]> worst = new EnumMap<>(GgmlType.class);
            for (GgufTensorInfo t : q.tensors().values()) {
                if (t.dims().length != 2 || !BOUND.containsKey(t.type())) { // the Q3_K files also hold Q2_K / Q5_K
                    continue;
                }
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
                double rel = Math.sqrt(err / norm);
                worst.computeIfAbsent(t.type(), k -> new double[1])[0] = Math.max(worst.getOrDefault(t.type(), new double[1])[0], rel);
                assertTrue(rel <= BOUND.get(t.type()), file + ": " + t.name() + " (" + t.type() + ") relative rms error " + rel);
            }
            worst.forEach((type, w) -> System.out.printf(Locale.ROOT, "%-17s %-5s worst tensor: relative rms error %.5f%n", file, type, w[0]));
        }
    }
}
