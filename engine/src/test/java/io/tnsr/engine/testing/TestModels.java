package io.tnsr.engine.testing;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.synth.SyntheticModel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;

/**
 * Synthetic GGUF models for tests, generated once per spec into target/test-models and reused, by every test JVM of
 * the build.
 */
public final class TestModels {
    private TestModels() {
    }

    public static synchronized Path get(ModelSpec spec) {
        String file = String.format("%s%s-d%d-l%d-h%d-kv%d-f%d-v%d-c%d-%s-%s-s%d%s%s.gguf", spec.name(),
                spec.arch() == Architecture.LLAMA ? "" : "-" + spec.arch().ggufName() + "-hd" + spec.headSize(), spec.dim(),
                spec.layers(), spec.heads(), spec.kvHeads(), spec.ffnDim(), spec.vocabSize(), spec.contextLength(),
                spec.type(), spec.tied() ? "tied" : "untied", spec.seed(), spec.ropeFactors() ? "-rf" : "",
                spec.chatTemplate() != null ? String.format("-ct%08x", spec.chatTemplate().hashCode()) : "");
        Path dir = Paths.get("target", "test-models").toAbsolutePath();
        Path p = dir.resolve(file);
        if (!Files.exists(p)) {
            // written aside, then moved into place: test JVMs running side by side may ask for the same model at once,
            // and none must read another's file half written
            try {
                Files.createDirectories(dir);
                Path tmp = Files.createTempFile(dir, "writing", ".gguf");
                try {
                    SyntheticModel.write(spec, tmp);
                    Files.move(tmp, p, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                } finally {
                    Files.deleteIfExists(tmp); // gone after the move; a failed write leaves nothing behind
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return p;
    }

    /**
     * A copy of {@code spec}'s model (an F32 one) whose embedding of {@code token} starts with a NaN: every sequence that
     * feeds that token gets NaN activations from there on, so NaN logits, and no other sequence is touched.
     */
    public static synchronized Path poisoned(ModelSpec spec, int token) {
        Path clean = get(spec);
        Path p = clean.resolveSibling(clean.getFileName().toString().replace(".gguf", "-nan" + token + ".gguf"));
        if (Files.exists(p)) {
            return p;
        }
        long at;
        try (GgufFile f = GgufFile.open(clean)) {
            GgufTensorInfo t = f.tensor("token_embd.weight");
            if (t.type() != GgmlType.F32) {
                throw new IllegalArgumentException("poisoned() patches an F32 embedding, not " + t.type());
            }
            at = t.dataOffset() + (long) token * t.dims()[0] * Float.BYTES;
        }
        try {
            Path tmp = Files.createTempFile(p.getParent(), "poisoning", ".gguf");
            Files.copy(clean, tmp, StandardCopyOption.REPLACE_EXISTING);
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.WRITE)) {
                ByteBuffer nan = ByteBuffer.allocate(Float.BYTES).order(ByteOrder.LITTLE_ENDIAN).putFloat(0, Float.NaN);
                ch.write(nan, at);
            }
            Files.move(tmp, p, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return p;
    }
}
