package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.testing.Golden;
import io.tnsr.engine.testing.RawGguf;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code tools/generate --temperature 0 --json} reproduces every golden case, JSON shape included. */
class GenerateCommandTest {

    /** Runs the command in-process; returns {exit status, stdout, stderr}. */
    static Object[] run(String... args) {
        return CliRun.run(new GenerateCommand(), args);
    }

    @Test
    void aSamplingSettingOutOfRangeIsNamedByItsOptionBeforeTheModelLoads() {
        for (String[] c : List.of(new String[] {"--top-p", "1.5", "--top-p must be in (0, 1], got 1.5"},
                new String[] {"--temperature", "-1", "--temperature must be a finite number >= 0, got -1.0"},
                new String[] {"--temperature", "1e39", "--temperature must be a finite number >= 0, got 1.0E39"},
                new String[] {"--top-k", "-3", "--top-k must be >= 0 (0 = off), got -3"})) {
            Object[] r = run("--model", "/nonexistent/model.gguf", "--prompt", "x", c[0], c[1]);
            assertEquals(2, r[0], (String) r[2]);
            assertTrue(((String) r[2]).startsWith("generate: " + c[2]), (String) r[2]);
        }
    }

    @Test
    void reproducesEveryGoldenCase() {
        String model = SharedData.path("models/stories260K.gguf").toString();
        for (Golden.Case c : Golden.greedyCases()) {
            Object[] r = run("--model", model, "--prompt", c.prompt(), "--temperature", "0", "--json",
                    "--max-tokens", String.valueOf(c.maxNewTokens()));
            assertEquals(0, r[0], (String) r[2]);
            String[] lines = ((String) r[1]).strip().split("\n");
            assertEquals(1, lines.length, "one JSON line on stdout");
            Map<?, ?> json = (Map<?, ?>) TestJson.parse(lines[0]);
            assertEquals(1L, json.get("stages"));
            assertTrue(((Number) json.get("tokens_per_second")).doubleValue() > 0);
            Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
            assertEquals(c.prompt(), seq.get("prompt"));
            assertArrayEquals(c.promptTokens(), TestJson.ints(seq.get("prompt_tokens")));
            assertArrayEquals(c.generatedTokens(), TestJson.ints(seq.get("generated_tokens")), c.prompt());
            assertEquals(c.stoppedBy(), seq.get("stopped_by"));
            assertEquals(c.text(), c.prompt().isEmpty() ? seq.get("text") : c.prompt() + seq.get("text"));
        }
    }

    /** Without --json: stdout is the prompt and its story alone, stderr one summary line with the time to first token. */
    @Test
    void plainOutputIsTheTextAloneWithTheSummaryOnStderr() {
        String model = SharedData.path("models/stories260K.gguf").toString();
        Golden.Case c = Golden.greedyCases().stream().filter(g -> !g.prompt().isEmpty()).findFirst().orElseThrow();
        Object[] r = run("--model", model, "--prompt", c.prompt(), "--temperature", "0",
                "--max-tokens", String.valueOf(c.maxNewTokens()));
        String err = (String) r[2];
        assertEquals(0, r[0], err);
        assertEquals(c.text() + "\n", r[1], "stdout: the generated text alone");
        List<String> lines = err.lines().toList();
        assertEquals(1, lines.size(), "stderr: the summary alone:\n" + err);
        int cpus = Math.min(256, Runtime.getRuntime().availableProcessors());
        assertTrue(lines.get(0).matches("generate: " + c.generatedTokens().length + " tokens for 1 sequence on " + cpus
                + (cpus == 1 ? " thread" : " threads") + " in [0-9.]+ s: [0-9.]+ tokens/s"
                + " \\(prefill [0-9.]+ tokens/s, decode [0-9.]+ tokens/s\\), time to first token [0-9]+ ms"), lines.get(0));
    }

    /**
     * By default every CPU shares the matmuls; one thread or three give the same tokens, and more threads than CPUs get
     * one line of advice.
     */
    @Test
    void anyNumberOfThreadsTellsTheGoldenStory() {
        String model = SharedData.path("models/stories260K.gguf").toString();
        Golden.Case c = Golden.greedyCases().get(1);
        for (String threads : new String[] {null, "1", "3"}) {
            List<String> args = new java.util.ArrayList<>(List.of("--model", model, "--prompt", c.prompt(), "--temperature", "0",
                    "--json", "--max-tokens", String.valueOf(c.maxNewTokens())));
            if (threads != null) {
                args.addAll(List.of("--threads", threads));
            }
            Object[] r = run(args.toArray(String[]::new));
            assertEquals(0, r[0], (String) r[2]);
            Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
            int cpus = Runtime.getRuntime().availableProcessors();
            long expected = threads == null ? Math.min(256, cpus) : Long.parseLong(threads);
            // more threads than CPUs wait on each other at every matmul: one line says so, and what fits
            assertEquals(expected > cpus, ((String) r[2]).contains("generate: " + expected + " threads on " + cpus
                    + " CPUs: every matmul's threads wait for one that is off its core; --threads " + cpus), (String) r[2]);
            assertEquals(expected, json.get("threads"), "threads: " + threads);
            Map<?, ?> seq = (Map<?, ?>) ((List<?>) json.get("sequences")).get(0);
            assertArrayEquals(c.generatedTokens(), TestJson.ints(seq.get("generated_tokens")), "threads: " + threads);
        }
        Object[] bad = run("--model", model, "--prompt", "x", "--threads", "many");
        assertEquals(2, bad[0]);
        assertTrue(((String) bad[2]).contains("--threads: must be auto (or 0, the same) or a number of threads from 1 to 256, got 'many'"),
                (String) bad[2]);
    }

    @Test
    void badInputGivesOneClearLineAndStatus2() {
        Object[] r = run("--model", "/nonexistent/model.gguf", "--prompt", "x");
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("/nonexistent/model.gguf: no such file"), (String) r[2]);
        r = run("--model", SharedData.path("models/stories260K.gguf").toString());
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("no prompt"), (String) r[2]);
        r = run("--model", SharedData.path("models/stories260K.gguf").toString(), "--prompt", "x", "--top-p", "0");
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("top-p"), (String) r[2]);
    }

    /** A crafted GGUF file (lengths beyond the file, arrays nested 100000 deep) is one line naming the key, status 2. */
    @Test
    void aCraftedModelFileIsOneLineAndStatus2(@TempDir Path tmp) throws Exception {
        Path deep = new RawGguf().header(0, 1).nestedArrays("deep", 100_000).write(tmp.resolve("deep.gguf"));
        Path big = new RawGguf().header(0, 1).string("tokenizer.ggml.scores").i32(9).i32(10).u64(1L << 28)
                .write(tmp.resolve("big.gguf"));
        for (Object[] c : new Object[][] {{deep, "array 'deep' nests arrays more than 8 deep"},
                {big, "array 'tokenizer.ggml.scores' claims 268435456 elements"}}) {
            Object[] r = run("--model", c[0].toString(), "--prompt", "x");
            String err = (String) r[2];
            assertEquals(2, r[0], err);
            assertEquals(1, err.strip().lines().count(), err);
            assertTrue(err.startsWith("generate: " + c[0] + ": ") && err.contains((String) c[1]), err);
        }
    }

    @Test
    void aPromptLongerThanTheContextFailsThatSequenceOnly() {
        String model = SharedData.path("models/stories260K.gguf").toString();
        String longPrompt = "Once upon a time ".repeat(700);
        Object[] r = run("--model", model, "--prompt", longPrompt, "--prompt", "Once upon a time", "--temperature", "0",
                "--json", "--max-tokens", "5");
        assertEquals(1, r[0], "a failed sequence makes the exit status 1");
        Map<?, ?> json = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        List<?> seqs = (List<?>) json.get("sequences");
        Map<?, ?> bad = (Map<?, ?>) seqs.get(0);
        assertEquals("error", bad.get("stopped_by"));
        assertTrue(((String) bad.get("error")).contains("context"), (String) bad.get("error"));
        Map<?, ?> good = (Map<?, ?>) seqs.get(1);
        assertEquals("limit", good.get("stopped_by"));
        assertEquals(5, ((List<?>) good.get("generated_tokens")).size());
        assertTrue(((String) r[2]).contains("(1 failed: " + bad.get("error") + ")"), "stderr says why too: " + r[2]);
    }

    /**
     * Q8_0 weights are repacked onto the heap at load: a heap too small for them must be a one-line error naming
     * the tensor and how to raise the limit (exit status 2), not an OutOfMemoryError's stack trace. A separate JVM
     * with a 24 MiB heap loads a model whose embedding and classifier take 18 MiB each once repacked.
     */
    @Test
    void aHeapTooSmallForTheRepackedWeightsIsAClearError() throws Exception {
        java.nio.file.Path model = io.tnsr.engine.testing.TestModels.get(new io.tnsr.engine.synth.ModelSpec(
                "big-vocab", 256, 1, 4, 4, 256, 65536, 64, false, io.tnsr.engine.gguf.GgmlType.Q8_0, 3, false));
        List<String> cmd = new java.util.ArrayList<>();
        cmd.add(java.nio.file.Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!a.startsWith("-Xmx") && !a.startsWith("-agent") && !a.startsWith("-javaagent")) {
                cmd.add(a);
            }
        }
        cmd.addAll(List.of("-Xmx24m", "-cp", System.getProperty("java.class.path"), GenerateCommand.class.getName(),
                "--model", model.toString(), "--prompt", "x", "--max-tokens", "1"));
        Process p = new ProcessBuilder(cmd).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
        String err = new String(p.getErrorStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
        assertTrue(p.waitFor(60, java.util.concurrent.TimeUnit.SECONDS), "the JVM ended");
        assertEquals(2, p.exitValue(), err);
        assertTrue(err.matches("(?s).*tensor '(token_embd|output)\\.weight' \\(Q8_0, 18\\.0 MiB once repacked\\) does not fit in the Java heap.*"), err);
        assertTrue(err.contains("TNSR_JAVA_OPTS=-Xmx<size>"), err);
        assertTrue(!err.contains("OutOfMemoryError") && !err.contains("\tat "), "no stack trace: " + err);
    }
}
