package io.tnsr.perf.engine;

import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.synth.SyntheticModel;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Locale;

/** Synthetic models for benchmarks, generated once into {@code .build/models} of the checkout and reused. */
public final class BenchModels {
    private BenchModels() {
    }

    public static Path get(ModelSpec spec) throws IOException {
        Path dir = Paths.get(System.getProperty("tnsr.home", ".")).resolve(".build").resolve("models");
        Files.createDirectories(dir);
        Path p = dir.resolve(String.format(Locale.ROOT, "%s-%s%s-s%d.gguf", spec.name(), spec.type().name().toLowerCase(Locale.ROOT),
                spec.kvHeads() != spec.heads() ? "-kv" + spec.kvHeads() : "", spec.seed()));
        if (!Files.exists(p)) {
            System.err.println("generating " + spec.describe() + " into " + p + " (once) ...");
            SyntheticModel.write(spec, p);
        }
        return p;
    }
}
