package io.tnsr.perf.engine;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.perf.CpuPin;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
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
        assertEquals(null, child.llamaCppFiles, "no --llama-cpp given: none passed on");
    }

    @Test
    void aForkedTypeGetsItsOwnLlamaCppFiguresOnly() {
        EngineBench parent = new EngineBench();
        new CommandLine(parent).parseArgs("--types", "f32,q8_0", "--llama-cpp", "f32=lc-f32.jsonl", "--llama-cpp", "Q8_0=lc-q8.jsonl");
        for (String[] c : new String[][] {{"f32", "f32", "lc-f32.jsonl"}, {"q8_0", "Q8_0", "lc-q8.jsonl"}}) {
            List<String> cmd = parent.childCommand(c[0], 3e10, 1e11);
            EngineBench child = new EngineBench();
            new CommandLine(child).parseArgs(cmd.subList(cmd.indexOf(EngineBench.class.getName()) + 1, cmd.size()).toArray(String[]::new));
            assertEquals(java.util.Map.of(c[1], Path.of(c[2]).toAbsolutePath()), child.llamaCppFiles);
        }
    }

    @Test
    void rowsCompareAgainstLlamaCppMeasuredHere(@TempDir Path home) throws Exception {
        Path figures = Files.writeString(home.resolve("lc-f32.jsonl"), String.join("\n",
                "{\"n_prompt\": 0, \"n_gen\": 128, \"n_depth\": 0, \"n_threads\": 1, \"avg_ts\": 1.0}",
                "{\"n_prompt\": 0, \"n_gen\": 128, \"n_depth\": 0, \"n_threads\": 1, \"avg_ts\": 3.0}",
                "{\"n_threads\": 1, \"n_threads_batch\": 1, \"pp\": 16, \"tg\": 64, \"pl\": 2, \"speed_tg\": 4.0}"));
        String text = runBench(home, 0, "--preset", "tiny", "--types", "f32", "--decode-tokens", "2", "--prefill", "4",
                "--batches", "2", "--repeats", "1", "--warmup", "0", "--probe-runs", "1", "--llama-cpp", "f32=" + figures);
        assertTrue(text.contains("llama.cpp = measured here, f32 from " + figures), text);
        // the range as the file gave it, the ratio against its middle, and the fixed target where it has one
        // (tiny runs thousands of tokens/s, so every ratio is far above it)
        assertComparison(text, "decode, 1 sequence, F32", "1-3", 2.0, "1.0x");
        assertComparison(text, "decode, 2 sequences batched, F32", "4", 4.0, "-");
        assertComparison(text, "prefill 4 tokens, F32", "-", Double.NaN, "-"); // no prefill 4 in the file
    }

    /** The row's llama.cpp, ratio and target columns (the last four are those and B/tok). */
    private static void assertComparison(String text, String row, String figure, double middle, String target) {
        String line = text.lines().filter(l -> l.startsWith(row)).findFirst().orElseThrow(() -> new AssertionError(row + ":\n" + text));
        String[] f = line.substring(row.length()).trim().split(" +");
        double tokensPerSecond = Double.parseDouble(f[0]);
        assertEquals(figure, f[f.length - 4], line);
        if (Double.isNaN(middle)) {
            assertEquals("-", f[f.length - 3], line);
        } else { // tokens/s is printed rounded to 0.1
            double ratio = Double.parseDouble(f[f.length - 3].replace("x", ""));
            assertEquals(tokensPerSecond / middle, ratio, 0.05 / middle + 0.005, line);
        }
        assertEquals(target, f[f.length - 2], line);
    }

    @Test
    void llamaCppFiguresThatCannotBeUsedAreAUsageError(@TempDir Path home) throws IOException {
        Path twoThreads = Files.writeString(home.resolve("lc.jsonl"),
                "{\"n_prompt\": 0, \"n_gen\": 128, \"n_threads\": 2, \"avg_ts\": 80.0}\n");
        for (String[] c : new String[][] {
                {"--types", "f32", "--llama-cpp", "q8_0=" + twoThreads, "q8_0 is not one of the measured --types f32"},
                {"--types", "f32", "--llama-cpp", "f32=" + twoThreads, "--llama-cpp f32: " + twoThreads + ":1: llama.cpp ran with 2 threads"},
                {"--types", "f32", "--llama-cpp", "f32=" + home.resolve("absent"), "cannot read llama.cpp's figures"},
                {"--types", "f32", "--llama-cpp", "q9=" + twoThreads, "unknown weight type 'q9'"}}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new EngineBench()).setErr(new PrintWriter(err, true))
                    .execute(java.util.Arrays.copyOf(c, c.length - 1));
            assertEquals(2, status, String.join(" ", c));
            assertTrue(err.toString().contains(c[c.length - 1]), c[c.length - 1] + " not in: " + err);
        }
    }

    /**
     * Runs engine-bench with {@code home} as tnsr.home (the tiny models go there), returns its standard output. It pins
     * this JVM (--cpu last by default): the CPUs it had are given back afterwards.
     */
    private static String runBench(Path home, int expectedStatus, String... args) {
        String cpus = CpuPin.join(CpuPin.allowed());
        String before = System.getProperty("tnsr.home");
        PrintStream out = System.out;
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        System.setProperty("tnsr.home", home.toString());
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        int status;
        try {
            status = new CommandLine(new EngineBench()).execute(args);
        } finally {
            System.setOut(out);
            if (CpuPin.available()) {
                try {
                    CpuPin.pin(ProcessHandle.current().pid(), cpus);
                } catch (IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
            if (before == null) {
                System.clearProperty("tnsr.home");
            } else {
                System.setProperty("tnsr.home", before);
            }
        }
        String text = captured.toString(StandardCharsets.UTF_8);
        assertEquals(expectedStatus, status, text);
        return text;
    }

    @Test
    void eachTypeRunsInAJvmOfItsOwn(@TempDir Path home) {
        String text = runBench(home, 0, "--preset", "tiny", "--types", "f32,q8_0", // the children generate their models in home
                "--decode-tokens", "2", "--prefill", "4", "--batches", "2", "--repeats", "1", "--warmup", "0",
                "--probe-runs", "1");
        assertTrue(text.contains("each type in a JVM of its own"), text);
        List<Integer> allowed = CpuPin.allowed();
        assertTrue(text.contains(CpuPin.available() ? "vectors, pinned to CPU " + allowed.get(allowed.size() - 1) + "\n"
                : "not pinned"), "by default on the last CPU:\n" + text);
        for (String row : List.of("decode, 1 sequence, F32", "prefill 4 tokens, F32", "decode, 2 sequences batched, F32",
                "decode, 1 sequence, Q8_0", "prefill 4 tokens, Q8_0", "decode, 2 sequences batched, Q8_0")) {
            assertTrue(text.contains(row), row + " missing from:\n" + text);
        }
        assertEquals(1, text.split("probes \\(", -1).length - 1, "the probes run once, in the parent:\n" + text);
    }

    @Test
    void countsBelowOneAndANegativeWarmUpAreUsageErrorsNamingTheOption() {
        for (String[] args : new String[][] {{"--repeats", "0"}, {"--decode-tokens", "0"}, {"--prefill", "0"},
                {"--probe-runs", "0"}, {"--batches", "8,0"}, {"--warmup", "-1"}}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new EngineBench()).setErr(new PrintWriter(err, true)).execute(args);
            assertEquals(2, status, String.join(" ", args));
            assertTrue(err.toString().startsWith(args[0] + " must be "), err.toString());
        }
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
