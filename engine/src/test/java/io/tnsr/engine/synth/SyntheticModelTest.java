package io.tnsr.engine.synth;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.forward.Batch;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.testing.SharedData;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Locale;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The synthetic writer: the same spec and seed give the same bytes, release after release; K-quant models (at
 * shapes of multiples of 256) load and run, and hold the F32 model's weights of the same seed, quantized; models of
 * the other quantized types and BF16 load and run near the F32 model.
 */
class SyntheticModelTest {
    @TempDir
    Path tmp;

    static String sha256(Path p) throws IOException, NoSuchAlgorithmException {
        return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(p)));
    }

    /**
     * The tiny model's bytes per type, pinned: tools and benchmarks reuse the models cached in .build/models by
     * name (ModelCache), so a writer that changed what a spec produces would leave old and new files side by
     * side under one name, and figures measured on them would not compare. Change these only on purpose.
     */
    @ParameterizedTest
    @CsvSource({
            "F32,  9a43eeb66185b07325cd893a943ac48e125c09fc19c3b4db853bc94f48b24434",
            "F16,  9d4e1c8f77aa3011f5eac57833c73d19450b01112b0b17eddcf7609a1539b9c7",
            "Q8_0, 7680a045ccc4aa72db1a54ad3a3c3e815e40661a72ceee92f5079c425ab4c9db",
            "Q4_0, 758b755fd6b96e682edd9e6e950fc18ef1996553ecf6f1265a8192c82cfc24ba",
            "BF16, e28fd2f57567bd6e4bb4e8006e5f68d2d37691dbee81de0903886eca5e57b7b9",
            "Q5_0, f93a52ad1b644ff447a6546c105b49fe0bd987e244f9aa442b1cc3b662a41b84",
            "IQ4_NL, be9fc55fbab1f937c5c3635caf3f500848d0c6749eb5520dc45006a7aea940f3"})
    void existingTypesWriteTheSameBytesAsBefore(GgmlType type, String sha) throws Exception {
        Path p = tmp.resolve("tiny.gguf");
        SyntheticModel.write(ModelSpec.tiny().withType(type), p);
        assertEquals(sha, sha256(p), type + ": the tiny synthetic model's bytes changed");
    }

    /** A small shape whose rows are multiples of 256: dim 256, 2 layers, 4 heads over 2 KV heads, FFN 512. */
    static ModelSpec small(GgmlType type) {
        return new ModelSpec("synthetic-k", 256, 2, 4, 2, 512, 512, 64, false, type, 11, false);
    }

    static float[] logits(GgufFile f, int[] tokens) {
        LlamaConfig c = LlamaConfig.fromGguf(f);
        LayerRange range = new LayerRange(f, c, 0, c.layers(),
                new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, c.contextLength()), tokens.length, 1);
        Batch b = new Batch(1, tokens.length).add(0, 0, tokens.length, true);
        float[] x = new float[tokens.length * c.dim()];
        float[] out = new float[c.vocabSize()];
        range.prepare(b, tokens, 0);
        range.embed(b, tokens, 0, x);
        range.forward(b, x);
        range.logits(b, x, out);
        return out;
    }

    /**
     * Every matrix is of the type (norms F32), the engine decodes each row exactly as the layout decoders of
     * {@link QuantizeTest} do, every element is within the quantizer's bound of the F32 model's weight of the
     * same seed (the values are drawn in the same order), and the model runs to logits near the F32 model's.
     */
    @ParameterizedTest
    @EnumSource(value = GgmlType.class, names = {"Q4_K", "Q6_K"})
    void kQuantModelsLoadAndHoldTheF32WeightsQuantized(GgmlType type) throws IOException {
        Path qp = tmp.resolve("k.gguf");
        Path fp = tmp.resolve("f32.gguf");
        SyntheticModel.write(small(type), qp);
        SyntheticModel.write(small(GgmlType.F32), fp);
        try (GgufFile q = GgufFile.open(qp); GgufFile f = GgufFile.open(fp)) {
            assertEquals(type == GgmlType.Q4_K ? 14 : 18, q.metadata().getInt("general.file_type"));
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
                ByteBuffer bytes = q.map(t.name());
                ByteBuffer ref = f.map(t.name());
                float[] row = new float[cols];
                float[] x = new float[cols];
                for (int r = 0; r < rows; r++) {
                    wq.readRow(r, row, 0);
                    for (int c = 0; c < cols; c++) {
                        x[c] = ref.getFloat(4 * (r * cols + c));
                    }
                    for (int k = 0; k < cols / Quantize.QK_K; k++) {
                        int block = (r * cols) / Quantize.QK_K + k;
                        float[] want = QuantizeTest.decode(type, bytes, block);
                        double[] bound = type == GgmlType.Q4_K ? QuantizeTest.q4KBound(x, k * Quantize.QK_K)
                                : QuantizeTest.q6KBound(x, k * Quantize.QK_K);
                        for (int i = 0; i < Quantize.QK_K; i++) {
                            int c = k * Quantize.QK_K + i;
                            assertEquals(want[i], row[c], 0f, t.name() + " row " + r + " col " + c + ": engine vs layout decoder");
                            assertTrue(Math.abs(row[c] - x[c]) <= bound[i],
                                    t.name() + " row " + r + " col " + c + ": " + row[c] + " for F32 " + x[c]);
                        }
                    }
                }
                matrices++;
            }
            assertEquals(2 + 2 * 7, matrices, "token_embd, output and 7 per layer");
            int[] tokens = {1, 300, 301, 410, 77, 5};
            float[] lq = logits(q, tokens);
            float[] lf = logits(f, tokens);
            double err = 0;
            double norm = 0;
            for (int i = 0; i < lf.length; i++) {
                assertTrue(Float.isFinite(lq[i]), "logit " + i);
                err += (lq[i] - lf[i]) * (double) (lq[i] - lf[i]);
                norm += lf[i] * (double) lf[i];
            }
            double rel = Math.sqrt(err / norm);
            System.out.printf(Locale.ROOT, "%s small model: logits' relative rms error vs F32 %.4f%n", type, rel);
            // measured 0.19 (Q4_K) and 0.040 (Q6_K); bounds 1.5x
            assertTrue(rel <= (type == GgmlType.Q4_K ? 0.3 : 0.06), type + ": logits' relative rms error " + rel);
        }
    }

    /**
     * The types whose quantizers are ggml's (QuantizedWeightsTest checks their bytes against llama-quantize's): every
     * matrix of the type, the llama ftype in the metadata, and logits near the F32 model's of the same seed.
     */
    @ParameterizedTest
    @CsvSource({
        // type, general.file_type, max relative rms error of the logits: 1.5x the one measured (0.0044, 0.105, 0.199,
        // 0.196, 0.424; Q4_K's 0.19, Q6_K's 0.040)
        "BF16, 32, 0.0066",
        "Q5_0, 8, 0.16",
        "IQ4_NL, 25, 0.30",
        "IQ4_XS, 30, 0.30",
        "Q3_K, 11, 0.64"})
    void ggmlQuantizedModelsLoadAndRunNearTheF32Model(GgmlType type, int fileType, double maxRel) throws IOException {
        Path qp = tmp.resolve("q.gguf");
        Path fp = tmp.resolve("f32.gguf");
        SyntheticModel.write(small(type), qp);
        SyntheticModel.write(small(GgmlType.F32), fp);
        try (GgufFile q = GgufFile.open(qp); GgufFile f = GgufFile.open(fp)) {
            assertEquals(fileType, q.metadata().getInt("general.file_type"));
            for (GgufTensorInfo t : q.tensors().values()) {
                assertEquals(t.dims().length == 2 ? type : GgmlType.F32, t.type(), t.name());
                assertEquals(t.type().bytesFor(t.elementCount()), t.byteSize(), t.name());
            }
            int[] tokens = {1, 300, 301, 410, 77, 5};
            float[] lq = logits(q, tokens);
            float[] lf = logits(f, tokens);
            double err = 0;
            double norm = 0;
            for (int i = 0; i < lf.length; i++) {
                assertTrue(Float.isFinite(lq[i]), "logit " + i);
                err += (lq[i] - lf[i]) * (double) (lq[i] - lf[i]);
                norm += lf[i] * (double) lf[i];
            }
            double rel = Math.sqrt(err / norm);
            System.out.printf(Locale.ROOT, "%s small model: logits' relative rms error vs F32 %.4f%n", type, rel);
            assertTrue(rel <= maxRel, type + ": logits' relative rms error " + rel);
        }
    }

    @Test
    void kQuantsNeedRowsOfMultiplesOf256() {
        for (GgmlType t : new GgmlType[] {GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.Q3_K, GgmlType.IQ4_XS}) {
            assertDoesNotThrow(() -> ModelSpec.stories110M().withType(t), "stories110M (768, 2048) qualifies");
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ModelSpec.tiny().withType(t));
            assertEquals(t + " weights need dim and FFN length multiples of 256, got 64 and 160", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> ModelSpec.stories15M().withType(t));
            assertEquals(t + " weights need dim and FFN length multiples of 256, got 288 and 768", e.getMessage());
        }
    }

    @Test
    void typesTheWriterCannotWriteAreRefusedByName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> ModelSpec.stories110M().withType(GgmlType.Q8_1));
        assertEquals("synthetic weights can be F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q4_K, Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K or Q2_K, not Q8_1",
                e.getMessage());
    }

    /**
     * qwen2 and qwen3 files follow llama.cpp's conventions as the shared files written for llama.cpp do: the same
     * architecture keys (prefixed by the architecture's name) and the same tensors, of the same shapes and types, for
     * the same shape; and the engine reads the same config from both.
     */
    @ParameterizedTest
    @CsvSource({"arch/qwen2-synth.gguf, QWEN2, 0, false", "arch/qwen3-synth.gguf, QWEN3, 128, true"})
    void qwenFilesFollowTheConventionsOfTheSharedOnes(String shared, Architecture arch, int headDim, boolean tied)
            throws IOException {
        Path p = tmp.resolve("q.gguf");
        SyntheticModel.write(new ModelSpec("q", 256, 4, 4, 2, 768, 512, 512, tied, GgmlType.F32, 3, false, null,
                arch, headDim), p);
        try (GgufFile mine = GgufFile.open(p); GgufFile theirs = GgufFile.open(SharedData.path("models/" + shared))) {
            java.util.function.Function<GgufFile, java.util.Set<String>> archKeys = f -> f.metadata().keys().stream()
                    .filter(k -> k.startsWith(arch.ggufName() + ".") || k.equals("general.architecture"))
                    .collect(java.util.stream.Collectors.toCollection(java.util.TreeSet::new));
            assertEquals(archKeys.apply(theirs), archKeys.apply(mine));
            for (String k : archKeys.apply(theirs)) {
                assertEquals(theirs.metadata().get(k), mine.metadata().get(k), k);
            }
            assertEquals(new java.util.TreeSet<>(theirs.tensors().keySet()), new java.util.TreeSet<>(mine.tensors().keySet()));
            for (GgufTensorInfo t : theirs.tensors().values()) {
                GgufTensorInfo m = mine.tensor(t.name());
                assertEquals(t.shapeString() + " " + t.type(), m.shapeString() + " " + m.type(), t.name());
            }
            LlamaConfig c = LlamaConfig.fromGguf(mine);
            assertEquals(LlamaConfig.fromGguf(theirs), c);
            assertEquals(arch, c.arch());
            assertDoesNotThrow(() -> logits(mine, new int[] {1, 300, 400}));
        }
    }
}
