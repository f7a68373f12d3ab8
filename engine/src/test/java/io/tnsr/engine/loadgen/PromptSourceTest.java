package io.tnsr.engine.loadgen;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** A prompts file: plain lines and JSON lines, round-robin; what is wrong with one, by file, line and column. */
class PromptSourceTest {
    @Test
    void plainAndJsonLinesAreTakenInTurn(@TempDir Path dir) throws IOException {
        Path f = Files.writeString(dir.resolve("p.txt"), "Once upon a time\n\n  {\"prompt\": \"Hi {there}\", \"id\": 7}\n");
        PromptSource s = PromptSource.fromFile(f);
        assertEquals("Once upon a time", s.prompt(0));
        assertEquals("Hi {there}", s.prompt(1));
        assertEquals("Once upon a time", s.prompt(2));
    }

    @Test
    void aFileThatCannotBeUsedIsNamedWithItsLineAndWhatIsWrong(@TempDir Path dir) throws IOException {
        assertEquals(dir.resolve("p.txt") + " line 2: not valid JSON: unexpected end of input at column 15",
                refused(dir, "Hello\n{\"prompt\": \"x\"\n"));
        assertEquals(dir.resolve("p.txt") + " line 1: not valid JSON: more data after the JSON value at column 17",
                refused(dir, "{\"prompt\": \"x\"} {\"prompt\": \"y\"}\n"));
        assertEquals(dir.resolve("p.txt") + " line 1: a JSON line needs a \"prompt\" string", refused(dir, "{\"text\": \"x\"}\n"));
        assertEquals(dir.resolve("p.txt") + ": no prompts (one per line, or JSON lines with a \"prompt\" field)",
                refused(dir, "\n  \n"));
        Path missing = dir.resolve("missing.txt");
        assertEquals(missing + ": no such file",
                assertThrows(IllegalArgumentException.class, () -> PromptSource.fromFile(missing)).getMessage());
    }

    private static String refused(Path dir, String text) throws IOException {
        Path f = Files.writeString(dir.resolve("p.txt"), text);
        return assertThrows(IllegalArgumentException.class, () -> PromptSource.fromFile(f)).getMessage();
    }
}
