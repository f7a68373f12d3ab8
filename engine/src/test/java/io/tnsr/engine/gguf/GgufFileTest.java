package io.tnsr.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestModels;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GgufFileTest {
    @TempDir
    Path tmp;

    @Test
    void readsTheTrainedModelsMetadataAndTensorTable() {
        try (GgufFile f = GgufFile.open(SharedData.path("models/stories260K.gguf"))) {
            assertEquals(3, f.version());
            assertEquals(48, f.tensors().size());
            LlamaConfig c = LlamaConfig.fromGguf(f);
            assertEquals(new LlamaConfig(64, 5, 8, 4, 8, 172, 512, 2048, 1e-5f, 10000f, 8), c);
            assertEquals(GgmlType.F32, f.tensor("blk.0.ffn_down.weight").type());
            assertEquals("[172, 64]", f.tensor("blk.0.ffn_down.weight").shapeString());
            assertEquals(512, f.metadata().getStringArray("tokenizer.ggml.tokens").length);
        }
    }

    @Test
    void aStageMapsOnlyTheWeightsOfItsLayers() {
        Path p = TestModels.get(ModelSpec.tiny().withTied(true));
        try (GgufFile f = GgufFile.open(p)) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            long layerBytes = f.tensors().values().stream().filter(t -> t.name().startsWith("blk.1.")).mapToLong(GgufTensorInfo::byteSize).sum();
            new LayerRange(f, c, 1, 2, new KvCachePool(1, c.kvDim(), c.contextLength(), 16, 64), 8, 2);
            assertEquals(layerBytes, f.mappedBytes(), "a middle stage maps its layer and nothing else");
            assertTrue(f.mappedBytes() < f.tensorBytes() / 4);
        }
    }

    @Test
    void version2FilesLoad() throws IOException {
        Path p = tmp.resolve("v2.gguf");
        new GgufWriter().version(2).putString("general.architecture", "llama")
                .addF32("x", new long[] {2}, new float[] {1f, 2f}).write(p);
        try (GgufFile f = GgufFile.open(p)) {
            assertEquals(2, f.version());
            assertEquals(2f, f.map("x").getFloat(4));
        }
    }

    @Test
    void notAGgufFileSaysSo() throws IOException {
        Path p = Files.writeString(tmp.resolve("hello.gguf"), "hello, this is text");
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(p));
        assertTrue(e.getMessage().contains("hello.gguf") && e.getMessage().contains("not a GGUF file"), e.getMessage());
    }

    @Test
    void missingFileSaysSo() {
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(tmp.resolve("nope.gguf")));
        assertTrue(e.getMessage().contains("nope.gguf") && e.getMessage().contains("no such file"), e.getMessage());
    }

    @Test
    void truncatedFilesNameWhatIsCut() throws IOException {
        byte[] whole = Files.readAllBytes(TestModels.get(ModelSpec.tiny()));
        Path inData = tmp.resolve("cut-data.gguf");
        Files.write(inData, Arrays.copyOf(whole, whole.length - 100));
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(inData));
        assertTrue(e.getMessage().contains("truncated") && e.getMessage().contains("output.weight"), e.getMessage());

        Path inHeader = tmp.resolve("cut-header.gguf");
        Files.write(inHeader, Arrays.copyOf(whole, 200));
        e = assertThrows(GgufException.class, () -> GgufFile.open(inHeader));
        assertTrue(e.getMessage().contains("truncated") && e.getMessage().contains("cut-header.gguf"), e.getMessage());
    }

    @Test
    void unsupportedVersionIsNamed() throws IOException {
        Path p = tmp.resolve("v9.gguf");
        new GgufWriter().version(9).write(p);
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(p));
        assertTrue(e.getMessage().contains("version 9"), e.getMessage());
    }

    @Test
    void unsupportedTensorTypeNamesTheTensorAndTheType() throws IOException {
        Path p = tmp.resolve("q41.gguf");
        new GgufWriter().addTensor("blk.0.attn_q.weight", GgmlType.Q4_1, new long[] {32, 2}, b -> b.put(new byte[b.remaining()])).write(p);
        try (GgufFile f = GgufFile.open(p)) {
            GgufException e = assertThrows(GgufException.class, () -> WeightMatrix.load(f, "blk.0.attn_q.weight", 2, 32));
            assertTrue(e.getMessage().contains("blk.0.attn_q.weight") && e.getMessage().contains("Q4_1"), e.getMessage());
        }
    }

    @Test
    void shapeDisagreeingWithTheMetadataIsNamed() throws IOException {
        Path p = tmp.resolve("shape.gguf");
        new GgufWriter().addF32("blk.0.attn_q.weight", new long[] {4, 2}, new float[8]).write(p);
        try (GgufFile f = GgufFile.open(p)) {
            GgufException e = assertThrows(GgufException.class, () -> WeightMatrix.load(f, "blk.0.attn_q.weight", 4, 4));
            assertTrue(e.getMessage().contains("blk.0.attn_q.weight") && e.getMessage().contains("[4, 2]")
                    && e.getMessage().contains("[4, 4]"), e.getMessage());
        }
    }

    @Test
    void missingTensorAndMissingKeyAreNamed() throws IOException {
        Path p = tmp.resolve("empty.gguf");
        new GgufWriter().putString("general.architecture", "llama").write(p);
        try (GgufFile f = GgufFile.open(p)) {
            GgufException e = assertThrows(GgufException.class, () -> f.tensor("token_embd.weight"));
            assertTrue(e.getMessage().contains("'token_embd.weight' is missing"), e.getMessage());
            e = assertThrows(GgufException.class, () -> LlamaConfig.fromGguf(f));
            assertTrue(e.getMessage().contains("llama.embedding_length"), e.getMessage());
            assertFalse(f.hasTensor("x"));
        }
    }

    @Test
    void otherArchitecturesAreRefusedByName() throws IOException {
        Path p = tmp.resolve("gpt2.gguf");
        new GgufWriter().putString("general.architecture", "gpt2").write(p);
        try (GgufFile f = GgufFile.open(p)) {
            GgufException e = assertThrows(GgufException.class, () -> LlamaConfig.fromGguf(f));
            assertTrue(e.getMessage().contains("'gpt2'"), e.getMessage());
        }
    }
}
