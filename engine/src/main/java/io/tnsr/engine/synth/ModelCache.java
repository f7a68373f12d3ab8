package io.tnsr.engine.synth;

import io.tnsr.engine.model.Architecture;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Locale;

/**
 * Synthetic models for tools and benchmarks, generated once into {@code .build/models} of the checkout (the
 * {@code tnsr.home} system property the launchers set; {@code ~/.cache/tnsr/models} otherwise) and reused.
 */
public final class ModelCache {
    private ModelCache() {
    }

    public static Path dir() {
        String home = System.getProperty("tnsr.home");
        return home != null ? Paths.get(home, ".build", "models")
                : Paths.get(System.getProperty("user.home"), ".cache", "tnsr", "models");
    }

    /** The file for {@code spec}, generating it (with a line on stderr) the first time. */
    public static Path get(ModelSpec spec) throws IOException {
        Path dir = dir();
        Files.createDirectories(dir);
        Path p = dir.resolve(String.format(Locale.ROOT, "%s%s-%s%s%s-s%d%s.gguf", spec.name(),
                spec.arch() == Architecture.LLAMA ? "" : "-" + spec.arch().ggufName()
                        + (spec.headDim() > 0 ? "-hd" + spec.headDim() : ""),
                spec.type().name().toLowerCase(Locale.ROOT), spec.kvHeads() != spec.heads() ? "-kv" + spec.kvHeads() : "",
                spec.tied() ? "-tied" : "", spec.seed(),
                spec.chatTemplate() != null ? String.format(Locale.ROOT, "-ct%08x", spec.chatTemplate().hashCode()) : ""));
        if (!Files.exists(p)) {
            System.err.println("generating " + spec.describe() + " into " + p + " (once) ...");
            SyntheticModel.write(spec, p);
        }
        return p;
    }
}
