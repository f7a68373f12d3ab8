package io.tnsr.engine.synth;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.tnsr.engine.gguf.GgmlType;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** The synthetic writer: the same spec and seed give the same bytes, release after release. */
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
            "Q4_0, 758b755fd6b96e682edd9e6e950fc18ef1996553ecf6f1265a8192c82cfc24ba"})
    void existingTypesWriteTheSameBytesAsBefore(GgmlType type, String sha) throws Exception {
        Path p = tmp.resolve("tiny.gguf");
        SyntheticModel.write(ModelSpec.tiny().withType(type), p);
        assertEquals(sha, sha256(p), type + ": the tiny synthetic model's bytes changed");
    }
}
