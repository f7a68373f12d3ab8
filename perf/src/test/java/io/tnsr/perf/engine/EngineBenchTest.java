package io.tnsr.perf.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/**
 * engine-bench's arguments (a long-context row that cannot fit the preset is refused before the probes run), and
 * its fork per weight type: a child gets the parent's options, and a run of two types prints both types' rows.
 */
class EngineBenchTest {

    @Test
    void aForkedTypeGetsTheParentsOptions() {
        EngineBench parent = new EngineBench();
        new CommandLine(parent).parseArgs("--preset", "tiny", "--types", "f32,q8_0", "--decode-tokens", "5",
                "--prefill", "7", "--batches", "2,3", "--decode-at", "11", "--repeats", "4", "--warmup", "0.5");
        List<String> cmd = parent.childCommand("q8_0", 3.25e10, 1.125e11);
        int main = cmd.indexOf(EngineBench.class.getName());
        assertTrue(main > 0, cmd.toString());
        assertTrue(cmd.get(0).endsWith("java"), cmd.toString());
        EngineBench child = new EngineBench();
        new CommandLine(child).parseArgs(cmd.subList(main + 1, cmd.size()).toArray(String[]::new));
        assertEquals("tiny", child.preset);
        assertEquals(List.of("q8_0"), child.types);
        assertEquals(5, child.decodeSteps);
        assertEquals(7, child.prefill);
        assertEquals(List.of(2, 3), child.batches);
        assertEquals(11, child.decodeAt);
        assertEquals(4, child.repeats);
        assertEquals(0.5, child.warmupSeconds);
        assertArrayEquals(new double[] {3.25e10, 1.125e11}, child.probed);
    }

    @Test
    void eachTypeRunsInAJvmOfItsOwn(@TempDir Path home) {
        String before = System.getProperty("tnsr.home");
        PrintStream out = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setProperty("tnsr.home", home.toString()); // the children generate their tiny models there
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        int status;
        try {
            status = new CommandLine(new EngineBench()).execute("--preset", "tiny", "--types", "f32,q8_0",
                    "--decode-tokens", "2", "--prefill", "4", "--batches", "2", "--repeats", "1", "--warmup", "0",
                    "--probe-runs", "1");
        } finally {
            System.setOut(out);
            if (before == null) {
                System.clearProperty("tnsr.home");
            } else {
                System.setProperty("tnsr.home", before);
            }
        }
        String text = captured.toString(StandardCharsets.UTF_8);
        assertEquals(0, status, text);
        assertTrue(text.contains("each type in a JVM of its own"), text);
        for (String row : List.of("decode, 1 sequence, F32", "prefill 4 tokens, F32", "decode, 2 sequences batched, F32",
                "decode, 1 sequence, Q8_0", "prefill 4 tokens, Q8_0", "decode, 2 sequences batched, Q8_0")) {
            assertTrue(text.contains(row), row + " missing from:\n" + text);
        }
        assertEquals(1, text.split("probes \\(", -1).length - 1, "the probes run once, in the parent:\n" + text);
    }

    @Test
    void aDecodePositionPastTheContextIsAUsageError() {
        for (String[] args : new String[][] {{"--decode-at", "1000"}, {"--decode-at", "-1"},
                {"--preset", "tiny", "--decode-at", "250"}}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new EngineBench()).setErr(new PrintWriter(err, true)).execute(args);
            assertEquals(2, status, String.join(" ", args));
            assertTrue(err.toString().contains("does not fit the"), err.toString());
        }
    }
}
