package io.tnsr.engine.gguf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.RawGguf;
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
        Path p = tmp.resolve("q51.gguf");
        new GgufWriter().addTensor("blk.0.attn_q.weight", GgmlType.Q5_1, new long[] {32, 2}, b -> b.put(new byte[b.remaining()])).write(p);
        try (GgufFile f = GgufFile.open(p)) {
            GgufException e = assertThrows(GgufException.class, () -> WeightMatrix.load(f, "blk.0.attn_q.weight", 2, 32));
            assertTrue(e.getMessage().contains("blk.0.attn_q.weight") && e.getMessage().contains("Q5_1"), e.getMessage());
            assertTrue(e.getMessage().contains("(supported: " + WeightMatrix.SUPPORTED + ")"), "names the supported types: " + e.getMessage());
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
            assertTrue(e.getMessage().contains("'gpt2'") && e.getMessage().contains(p.toString())
                    && e.getMessage().contains("supported: llama, qwen2, qwen3"), e.getMessage());
        }
    }

    /**
     * An array is checked against the bytes left in the file before it is allocated. The first file (109 bytes)
     * claims 2^28 u64 values: allocated first, they would take 2 GiB, more than the tests' whole heap (-Xmx2g),
     * so reaching the error rather than an OutOfMemoryError shows the check came first.
     */
    @Test
    void anArrayLongerThanTheFileIsRefusedBeforeItIsAllocated() throws IOException {
        RawGguf big = new RawGguf().header(0, 1).string("tokenizer.ggml.scores").i32(9).i32(10).u64(1L << 28);
        for (int i = 0; i < 5; i++) {
            big.u64(i);
        }
        Path p = big.write(tmp.resolve("big-array.gguf"));
        assertEquals(109, Files.size(p));
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(p));
        assertTrue(e.getMessage().contains("big-array.gguf")
                && e.getMessage().contains("array 'tokenizer.ggml.scores' claims 268435456 elements")
                && e.getMessage().contains("only 40 bytes are left"), e.getMessage());

        Path strings = new RawGguf().header(0, 1).string("tokenizer.ggml.tokens").i32(9).i32(8).u64(1L << 27)
                .write(tmp.resolve("strings.gguf"));
        e = assertThrows(GgufException.class, () -> GgufFile.open(strings));
        assertTrue(e.getMessage().contains("array 'tokenizer.ggml.tokens' claims 134217728 elements of at least 8 bytes"), e.getMessage());

        Path huge = new RawGguf().header(0, 1).string("x").i32(9).i32(0).u64(-1).write(tmp.resolve("huge.gguf"));
        e = assertThrows(GgufException.class, () -> GgufFile.open(huge));
        assertTrue(e.getMessage().contains("array 'x' claims 18446744073709551615 elements"), e.getMessage());

        Path string = new RawGguf().header(0, 1).string("general.name").i32(8).u64(1L << 40).string("abc")
                .write(tmp.resolve("string.gguf"));
        e = assertThrows(GgufException.class, () -> GgufFile.open(string));
        assertTrue(e.getMessage().contains("'general.name'") && e.getMessage().contains("claims a string of 1099511627776 bytes")
                && e.getMessage().contains("only 11 bytes are left"), e.getMessage());

        Path tensors = new RawGguf().header(1 << 19, 0).write(tmp.resolve("tensors.gguf"));
        e = assertThrows(GgufException.class, () -> GgufFile.open(tensors));
        assertTrue(e.getMessage().contains("claims 524288 tensors") && e.getMessage().contains("only 0 bytes are left"), e.getMessage());
    }

    /** Arrays of arrays nest at most 8 deep: a file of nested array headers is refused by the key, without a deep recursion. */
    @Test
    void arraysNestedTooDeepAreRefusedByKey() throws IOException {
        Path p = new RawGguf().header(0, 1).nestedArrays("deep", 100_000).write(tmp.resolve("deep.gguf"));
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(p));
        assertTrue(e.getMessage().contains("array 'deep' nests arrays more than 8 deep"), e.getMessage());

        Path eight = new RawGguf().header(0, 1).nestedArrays("eight", 8).write(tmp.resolve("eight.gguf"));
        try (GgufFile f = GgufFile.open(eight)) {
            assertTrue(f.metadata().get("eight") instanceof Object[]);
        }
        Path two = new RawGguf().header(0, 1).string("pairs").i32(9).i32(9).u64(2)
                .i32(5).u64(2).i32(1).i32(2).i32(5).u64(1).i32(3).write(tmp.resolve("two.gguf"));
        try (GgufFile f = GgufFile.open(two)) {
            Object[] pairs = (Object[]) f.metadata().get("pairs");
            assertArrayEquals(new long[] {1, 2}, (long[]) pairs[0]);
            assertArrayEquals(new long[] {3}, (long[]) pairs[1]);
        }
    }

    /** A tensor's offset and size are computed without overflow: a negative or huge offset, or a shape too large, is named. */
    @Test
    void tensorOffsetsAndSizesThatOverflowAreRefusedByName() throws IOException {
        assertTensorRefused(new long[] {8}, -32, "tensor 'w' has data offset 18446744073709551584");
        assertTensorRefused(new long[] {1024}, Long.MAX_VALUE & ~31L,
                "tensor 'w' at data offset 9223372036854775776 with 4096 bytes ends beyond 2^63");
        assertTensorRefused(new long[] {1L << 32, 1L << 32}, 0,
                "tensor 'w' of shape [4294967296, 4294967296] has more than 2^63 elements");
        assertTensorRefused(new long[] {1L << 31, 1L << 31}, 0,
                "tensor 'w' of type F32 and shape [2147483648, 2147483648] takes more than 2^63 bytes");
        assertTensorRefused(new long[] {8, -1}, 0, "tensor 'w' has dimension 1 = 18446744073709551615");
    }

    private void assertTensorRefused(long[] dims, long offset, String expected) throws IOException {
        RawGguf r = new RawGguf().header(1, 0).string("w").i32(dims.length);
        for (long d : dims) {
            r.u64(d);
        }
        r.i32(GgmlType.F32.id()).u64(offset);
        r.pad(32).zeros(64);
        Path p = r.write(tmp.resolve("tensor.gguf"));
        GgufException e = assertThrows(GgufException.class, () -> GgufFile.open(p));
        assertTrue(e.getMessage().contains(expected), e.getMessage());
    }
}
