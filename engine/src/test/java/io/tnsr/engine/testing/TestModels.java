package io.tnsr.engine.testing;

import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.synth.SyntheticModel;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;

/** Synthetic GGUF models for tests, generated once per spec into target/test-models and reused. */
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
            try {
                Files.createDirectories(dir);
                SyntheticModel.write(spec, p);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
        return p;
    }
}
