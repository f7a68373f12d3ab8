package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** perf/baseline.json: a reference commit and why; bad files are refused with the file and what is wrong. */
class BaselineTest {
    private static final String SHA = "0123456789abcdef0123456789abcdef01234567";

    @Test
    void writesAndReadsBackTheReference(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("baseline.json");
        new Baseline(SHA, "2026-12-01T10:00:00Z", "faster Q4_0 batched kernel").write(f);
        Baseline back = Baseline.read(f);
        assertEquals(SHA, back.reference());
        assertEquals("0123456789", back.shortReference());
        assertEquals("faster Q4_0 batched kernel", back.reason());
        assertTrue(Files.readString(f).contains("\"reference\" : \"" + SHA + "\""), Files.readString(f));
        assertEquals(Files.readString(f), back.toJson(), "a read and rewritten baseline is unchanged");
    }

    @Test
    void refusesWhatIsNotABaseline(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("baseline.json");
        Files.writeString(f, "{\"format\": 1, \"metrics\": {}}");
        IOException old = assertThrows(IOException.class, () -> Baseline.read(f));
        assertTrue(old.getMessage().contains("format 1, expected 2"), old.getMessage());
        Files.writeString(f, "{\"format\": 2, \"reference\": \"HEAD~3\"}");
        IOException notSha = assertThrows(IOException.class, () -> Baseline.read(f));
        assertTrue(notSha.getMessage().startsWith(f + ": reference must be a full commit id"), notSha.getMessage());
        Files.writeString(f, "{\"format\": 2, ");
        IOException broken = assertThrows(IOException.class, () -> Baseline.read(f));
        assertEquals(f + ": not valid JSON: unexpected end of input at line 1, column 15", broken.getMessage());
    }
}
