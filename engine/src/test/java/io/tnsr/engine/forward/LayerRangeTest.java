package io.tnsr.engine.forward;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.kvcache.SequenceException;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestModels;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Splitting a model into layer ranges, batching sequences, and prefilling prompts as blocks must not change
 * the numbers: splits are bit-identical, batches and blocks agree with one token at a time.
 */
class LayerRangeTest {

    static Stream<Arguments> models() {
        ModelSpec tiny = ModelSpec.tiny();
        return Stream.of(
                Arguments.of("stories260K (trained, GQA 8/4)", SharedData.path("models/stories260K.gguf")),
                Arguments.of("synthetic GQA, untied, F32", TestModels.get(tiny)),
                Arguments.of("synthetic MHA, untied, F32", TestModels.get(tiny.withKvHeads(4))),
                Arguments.of("synthetic GQA, tied, F32", TestModels.get(tiny.withTied(true))),
                Arguments.of("synthetic GQA, untied, F16", TestModels.get(tiny.withType(GgmlType.F16))),
                Arguments.of("synthetic MHA, tied, F16", TestModels.get(tiny.withKvHeads(4).withTied(true).withType(GgmlType.F16))),
                Arguments.of("synthetic with RoPE frequency factors", TestModels.get(tiny.withRopeFactors(true))),
                Arguments.of("synthetic GQA, untied, Q8_0", TestModels.get(tiny.withType(GgmlType.Q8_0))),
                Arguments.of("synthetic MHA, tied, Q4_0", TestModels.get(tiny.withKvHeads(4).withTied(true).withType(GgmlType.Q4_0))),
                Arguments.of("synthetic qwen2 (Q/K/V biases, NEOX RoPE), F32", TestModels.get(tiny.withArch(Architecture.QWEN2, 0))),
                Arguments.of("synthetic qwen3 (head 32 x 4 > dim 64, Q/K norms), tied, Q8_0",
                        TestModels.get(tiny.withArch(Architecture.QWEN3, 32).withTied(true).withType(GgmlType.Q8_0))),
                Arguments.of("synthetic qwen3, Q4_0", TestModels.get(tiny.withArch(Architecture.QWEN3, 32).withType(GgmlType.Q4_0))),
                Arguments.of("llama.cpp Q4_K_M (Q4_K + Q6_K)", SharedData.path("models/quantized/q256-q4_k_m.gguf")),
                Arguments.of("llama.cpp Q4_0 (F16 ffn_down, Q8_0 output)", SharedData.path("models/quantized/stories260K-q4_0.gguf")));
    }

    private static int[] randomTokens(int n, int vocab, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = 3 + r.nextInt(vocab - 3);
        }
        return t;
    }

    /** Prefill of 6 tokens as one block, then 5 decode steps; the logits of every call, concatenated. */
    private static List<float[]> runSequence(InProcessPipeline p, int[] tokens) {
        List<float[]> out = new ArrayList<>();
        Batch b = new Batch(4, 32);
        out.add(p.run(b.clear().add(3, 0, 6, true), tokens));
        for (int pos = 6; pos < tokens.length; pos++) {
            out.add(p.run(b.clear().add(3, pos, 1, true), new int[] {tokens[pos]}));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void splitsAreBitIdenticalToTheWholeModel(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            int layers = new InProcessPipeline(f, 32, 4).cfg.layers();
            int[] tokens = randomTokens(11, new InProcessPipeline(f, 32, 4).cfg.vocabSize(), 1);
            List<float[]> whole = runSequence(new InProcessPipeline(f, 32, 4), tokens);
            int[][] splits = layers >= 5
                    ? new int[][] {{2, 3}, {1}, {1, 2, 3, 4}, {4}}
                    : new int[][] {{1}, {2}, {1, 2, 3}, {3}};
            for (int[] bounds : splits) {
                List<float[]> split = runSequence(new InProcessPipeline(f, 32, 4, bounds), tokens);
                for (int i = 0; i < whole.size(); i++) {
                    assertArrayEquals(whole.get(i), split.get(i), 0f,
                            label + ": split " + java.util.Arrays.toString(bounds) + ", call " + i);
                }
            }
        }
    }

    /** A model of each kind of matrix a row split treats its own way: F32's four-panel groups, F16 (not split), int8, Q4. */
    static Stream<Arguments> threadModels() {
        ModelSpec tiny = ModelSpec.tiny();
        return Stream.of(
                Arguments.of("stories260K (trained, GQA 8/4)", SharedData.path("models/stories260K.gguf")),
                Arguments.of("synthetic GQA, untied, F16", TestModels.get(tiny.withType(GgmlType.F16))),
                Arguments.of("synthetic qwen3, tied, Q8_0", TestModels.get(tiny.withArch(Architecture.QWEN3, 32).withTied(true).withType(GgmlType.Q8_0))),
                Arguments.of("llama.cpp Q4_K_M (Q4_K + Q6_K)", SharedData.path("models/quantized/q256-q4_k_m.gguf")));
    }

    /** Every matmul's rows shared between 2 threads, whole and split in two ranges: the logits of one thread. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("threadModels")
    void matmulsSharedAmongThreadsAreBitIdenticalToOneThread(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            List<float[]> one;
            int[] tokens;
            try (InProcessPipeline p = new InProcessPipeline(f, 32, 4)) {
                tokens = randomTokens(11, p.cfg.vocabSize(), 2);
                one = runSequence(p, tokens);
            }
            for (int threads : new int[] {2}) { // more threads than cores would only wait on each other (3 parts: PanelMatricesTest)
                for (int[] bounds : new int[][] {{}, {1}}) {
                    try (InProcessPipeline p = new InProcessPipeline(threads, f, 32, 4, bounds)) {
                        List<float[]> shared = runSequence(p, tokens);
                        for (int i = 0; i < one.size(); i++) {
                            assertArrayEquals(one.get(i), shared.get(i), 0f, label + ": " + threads + " threads, split "
                                    + java.util.Arrays.toString(bounds) + ", call " + i);
                        }
                    }
                }
            }
        }
    }

    /**
     * Three sequences' prompts as one call, then decode steps of all three: with 2 threads (attention's (token, head)
     * items and every matmul's rows shared), every call's logits have the bits of one thread.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("threadModels")
    void batchedSequencesSharedAmongThreadsAreBitIdenticalToOneThread(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            int[] promptLen = {7, 1, 12};
            List<float[]> one;
            int[][] tokens = new int[promptLen.length][];
            try (InProcessPipeline p = new InProcessPipeline(1, f, 32, 8, new int[0])) {
                for (int s = 0; s < tokens.length; s++) {
                    tokens[s] = randomTokens(promptLen[s] + 3, p.cfg.vocabSize(), 20 + s);
                }
                one = runBatch(p, tokens, promptLen);
            }
            for (int[] bounds : new int[][] {{}, {1}}) {
                try (InProcessPipeline p = new InProcessPipeline(2, f, 32, 8, bounds)) {
                    List<float[]> shared = runBatch(p, tokens, promptLen);
                    for (int i = 0; i < one.size(); i++) {
                        assertArrayEquals(one.get(i), shared.get(i), 0f,
                                label + ": 2 threads, split " + java.util.Arrays.toString(bounds) + ", call " + i);
                    }
                }
            }
        }
    }

    /** The prompts of {@code tokens} as one call, then 3 decode steps of every sequence together; each call's logits. */
    private static List<float[]> runBatch(InProcessPipeline p, int[][] tokens, int[] promptLen) {
        List<float[]> out = new ArrayList<>();
        Batch b = new Batch(8, 32);
        int[] flat = new int[32];
        int n = 0;
        for (int s = 0; s < tokens.length; s++) {
            b.add(s, 0, promptLen[s], true);
            System.arraycopy(tokens[s], 0, flat, n, promptLen[s]);
            n += promptLen[s];
        }
        out.add(p.run(b, flat));
        for (int step = 0; step < 3; step++) {
            b.clear();
            for (int s = 0; s < tokens.length; s++) {
                b.add(s, promptLen[s] + step, 1, true);
                flat[s] = tokens[s][promptLen[s] + step];
            }
            out.add(p.run(b, flat));
        }
        return out;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void batchesAndBlocksAgreeWithOneTokenAtATime(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            InProcessPipeline single = new InProcessPipeline(f, 32, 8, 1);
            InProcessPipeline batched = new InProcessPipeline(f, 32, 8, 1);
            int vocab = single.cfg.vocabSize();
            int seqs = 3;
            int[][] tokens = new int[seqs][];
            int[] promptLen = {5, 1, 9};
            for (int s = 0; s < seqs; s++) {
                tokens[s] = randomTokens(promptLen[s] + 4, vocab, 10 + s);
            }
            // Reference: every token of every sequence on its own.
            float[][][] ref = new float[seqs][][];
            Batch b = new Batch(8, 32);
            for (int s = 0; s < seqs; s++) {
                ref[s] = new float[tokens[s].length][];
                for (int pos = 0; pos < tokens[s].length; pos++) {
                    ref[s][pos] = single.run(b.clear().add(s, pos, 1, true), new int[] {tokens[s][pos]});
                }
            }
            // Prompts as blocks (all three in one call), then decode steps with the three sequences batched.
            int[] flat = new int[32];
            int n = 0;
            b.clear();
            for (int s = 0; s < seqs; s++) {
                b.add(s, 0, promptLen[s], true);
                System.arraycopy(tokens[s], 0, flat, n, promptLen[s]);
                n += promptLen[s];
            }
            float[] logits = batched.run(b, flat);
            for (int s = 0; s < seqs; s++) {
                assertClose(ref[s][promptLen[s] - 1], logits, s * vocab, vocab, label + ": prefill seq " + s);
            }
            for (int step = 0; step < 4; step++) {
                b.clear();
                for (int s = 0; s < seqs; s++) {
                    b.add(s, promptLen[s] + step, 1, true);
                    flat[s] = tokens[s][promptLen[s] + step];
                }
                logits = batched.run(b, flat);
                for (int s = 0; s < seqs; s++) {
                    assertClose(ref[s][promptLen[s] + step], logits, s * vocab, vocab, label + ": step " + step + " seq " + s);
                }
            }
        }
    }

    /**
     * A cache of halves: splits, a second thread and batches give the bits of the whole model on one thread, as with
     * floats (the kernels widen the same halves the same way wherever a sequence runs); and the logits stay close to the
     * float cache's: each key and value is rounded once, by at most 2^-11 of itself, which moved these models' logits
     * by 1.5e-4 to 5.7e-4 relative rms (0.2% allowed), the Q4_K_M file's by 1.0e-2 (see below).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("threadModels")
    void aCacheOfHalvesKeepsEveryBitIdentityAndStaysCloseToFloats(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            List<float[]> floats;
            List<float[]> whole;
            int[] tokens;
            try (InProcessPipeline p = new InProcessPipeline(f, 32, 4)) {
                tokens = randomTokens(11, p.cfg.vocabSize(), 5);
                floats = runSequence(p, tokens);
            }
            try (InProcessPipeline p = new InProcessPipeline(KvCacheType.F16, 1, f, 32, 4)) {
                whole = runSequence(p, tokens);
            }
            for (int[] bounds : new int[][] {{1}, {}}) {
                for (int threads : new int[] {1, 2}) {
                    try (InProcessPipeline p = new InProcessPipeline(KvCacheType.F16, threads, f, 32, 4, bounds)) {
                        List<float[]> other = runSequence(p, tokens);
                        for (int i = 0; i < whole.size(); i++) {
                            assertArrayEquals(whole.get(i), other.get(i), 0f, label + ": " + threads + " threads, split "
                                    + java.util.Arrays.toString(bounds) + ", call " + i);
                        }
                    }
                }
            }
            double worst = 0;
            for (int i = 0; i < whole.size(); i++) {
                double d2 = 0;
                double r2 = 0;
                for (int j = 0; j < whole.get(i).length; j++) {
                    double d = whole.get(i)[j] - floats.get(i)[j];
                    d2 += d * d;
                    r2 += (double) floats.get(i)[j] * floats.get(i)[j];
                }
                worst = Math.max(worst, Math.sqrt(d2 / r2));
            }
            // Where activations are quantized to 8 bits (Q4_K here), a rounded key can move an activation across a
            // rounding step: the difference is then that of the 8-bit activations, LlamaCppLogitsTest's tolerance.
            double tolerance = label.contains("Q4_K") ? 0.035 : 2e-3;
            assertTrue(worst > 0 && worst < tolerance, label + ": relative rms difference to the float cache " + worst);
        }
    }

    private static void assertClose(float[] expected, float[] actual, int off, int n, String what) {
        for (int i = 0; i < n; i++) {
            float e = expected[i];
            float a = actual[off + i];
            float tol = 1e-5f * Math.max(1f, Math.abs(e));
            assertTrue(Math.abs(e - a) <= tol, what + ": logit " + i + " expected " + e + " got " + a);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void continuingAnUnknownSequenceIsAnErrorForThatSequenceOnly(String label, Path model) {
        try (GgufFile f = GgufFile.open(model)) {
            InProcessPipeline p = new InProcessPipeline(f, 32, 4);
            int ctx = p.cfg.contextLength();
            Batch b = new Batch(4, 32);
            SequenceException e = assertThrows(SequenceException.class,
                    () -> p.ranges[0].prepare(b.clear().add(9, ctx - 2, 3, true)));
            assertEquals(SequenceException.Kind.UNKNOWN_SEQUENCE, e.kind());
            p.run(b.clear().add(1, 0, 1, true), new int[] {5});
            assertEquals(1, p.ranges[0].cache().liveSequences());
        }
    }
}
