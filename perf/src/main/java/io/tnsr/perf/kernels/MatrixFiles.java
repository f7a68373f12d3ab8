package io.tnsr.perf.kernels;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufWriter;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.synth.ModelCache;
import io.tnsr.engine.synth.SyntheticModel;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * Synthetic GGUF files holding one weight matrix of a given type and shape, for the kernel benchmarks: the
 * matrix is loaded through {@link WeightMatrix#load}, exactly as the engine loads a model's weights, so a new
 * tensor type is benchmarked as soon as the engine supports it.
 *
 * <p>Values are seeded uniform in +-sqrt(3 / cols), written by the synthetic model writer
 * ({@link SyntheticModel#fillUniform}: ggml's own quantizers for Q8_0, Q4_0, Q5_0, IQ4_NL, IQ4_XS, Q3_K and BF16,
 * round-to-nearest Q4_K / Q6_K ones in ggml's layouts), so they are valid input for any correct kernel of the type.
 * Columns must be a multiple of the type's block size (256 for Q4_K, Q6_K, Q3_K and IQ4_XS).
 * Files are generated once into {@code .build/models/kernels} and reused.
 */
public final class MatrixFiles {
    /** The tensor's name inside the file. */
    public static final String TENSOR = "w.weight";

    private MatrixFiles() {
    }

    /** Parses "ROWSxCOLS", e.g. "4096x4096". */
    public static int[] shape(String s) {
        String[] p = s.toLowerCase(Locale.ROOT).split("x");
        if (p.length != 2) {
            throw new IllegalArgumentException("shape must be ROWSxCOLS, got '" + s + "'");
        }
        return new int[] {Integer.parseInt(p[0].trim()), Integer.parseInt(p[1].trim())};
    }

    /** The file for a {@code rows x cols} matrix of {@code type}, written the first time. */
    public static Path get(GgmlType type, int rows, int cols) throws IOException {
        Path dir = ModelCache.dir().resolve("kernels");
        Files.createDirectories(dir);
        Path p = dir.resolve(String.format(Locale.ROOT, "matrix-%s-%dx%d.gguf", type.name().toLowerCase(Locale.ROOT), rows, cols));
        if (!Files.exists(p)) {
            GgufWriter w = new GgufWriter();
            w.putString("general.architecture", "llama");
            w.putString("general.name", "kernel benchmark matrix");
            w.addTensor(TENSOR, type, new long[] {cols, rows}, dst -> fill(dst, type, rows, cols));
            w.write(p); // atomic: concurrent writers of the same file are harmless
        }
        return p;
    }

    /**
     * Opens the file for {@code type} and loads its matrix; throws {@link UnsupportedTypeException} (with the
     * engine's reason) when the engine cannot compute with that type yet.
     */
    public static Loaded load(GgmlType type, int rows, int cols) throws IOException {
        GgufFile file = GgufFile.open(get(type, rows, cols));
        try {
            return new Loaded(file, WeightMatrix.load(file, TENSOR, rows, cols));
        } catch (GgufException e) {
            file.close();
            if (e.getMessage() != null && e.getMessage().contains("does not support")) {
                throw new UnsupportedTypeException(type, e.getMessage());
            }
            throw e;
        }
    }

    /** An open file and its matrix; close the file when done. */
    public record Loaded(GgufFile file, WeightMatrix matrix) implements AutoCloseable {
        @Override
        public void close() {
            file.close();
        }
    }

    /** The engine has no kernel for this type (yet). */
    public static final class UnsupportedTypeException extends IllegalStateException {
        private static final long serialVersionUID = 1L;

        UnsupportedTypeException(GgmlType type, String why) {
            super(type + " is not supported by this engine yet, so its kernel benchmarks are skipped (" + why + ")");
        }
    }

    private static void fill(ByteBuffer dst, GgmlType type, int rows, int cols) {
        SplittableRandom r = new SplittableRandom(0x5EEDL * rows + cols);
        SyntheticModel.fillUniform(dst, type, (long) rows * cols, r, Math.sqrt(3.0 / cols));
    }
}
