package io.tnsr.engine.cli;

import io.tnsr.engine.gguf.GgufWriter;
import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** {@code tools/tokenize}, run in-process. */
class TokenizeCommandTest {

    record Result(int status, String out, String err) { }

    static Result run(String... args) {
        StringWriter out = new StringWriter();
        StringWriter err = new StringWriter();
        int status = TokenizeCommand.run(new PrintWriter(out), new PrintWriter(err), args);
        return new Result(status, out.toString(), err.toString());
    }

    static String stories() {
        return SharedData.path("models/stories260K.gguf").toString();
    }

    @Test
    void plainIdsOneLinePerText() {
        Result r = run("--model", stories(), "Once upon a time", "", "One day, a little boy named Tim");
        assertEquals(0, r.status(), r.err());
        assertEquals(List.of("1 403 407 261 378", "1", "1 385 328 432 261 376 268 414 422 395 326"), r.out().lines().toList());
        assertEquals("", r.err());
    }

    @Test
    void noBos() {
        Result r = run("-m", stories(), "--no-bos", "Once upon a time", "");
        assertEquals(0, r.status(), r.err());
        assertEquals("403 407 261 378\n\n", r.out().replace(System.lineSeparator(), "\n"));
    }

    @Test
    void json() {
        Result r = run("--model", stories(), "--json", "Once upon a time", "say \"hi\"\n’");
        assertEquals(0, r.status(), r.err());
        List<String> lines = r.out().lines().toList();
        assertEquals(2, lines.size());
        assertEquals("{\"text\": \"Once upon a time\", \"ids\": [1, 403, 407, 261, 378]}", lines.get(0));
        Map<?, ?> second = (Map<?, ?>) TestJson.parse(lines.get(1));
        assertEquals("say \"hi\"\n’", second.get("text"));
        assertFalse(((List<?>) second.get("ids")).isEmpty());
    }

    @Test
    void fileInputAndSpecialTokens(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("prompt.txt");
        Files.writeString(f, "Once upon a time", StandardCharsets.UTF_8);
        Result r = run("--model", stories(), "--file", f.toString(), "--special", "<s>Once");
        assertEquals(0, r.status(), r.err());
        assertEquals(List.of("1 1 403", "1 403 407 261 378"), r.out().lines().toList());
    }

    @Test
    void help() {
        Result r = run("--help");
        assertEquals(0, r.status());
        assertTrue(r.out().contains("--model") && r.out().contains("--json") && r.out().contains("1 403 407 261 378"), r.out());
    }

    static void assertOneLineError(Result r, String mustContain) {
        assertEquals(2, r.status(), r.out() + r.err());
        assertEquals("", r.out());
        List<String> lines = r.err().lines().toList();
        assertEquals(1, lines.size(), r.err());
        assertTrue(lines.get(0).startsWith("tokenize: ") && lines.get(0).contains(mustContain), r.err());
        assertFalse(r.err().contains("Exception") || r.err().contains("\tat "), r.err());
    }

    @Test
    void missingFile(@TempDir Path dir) {
        assertOneLineError(run("--model", dir.resolve("nope.gguf").toString(), "hi"), "no such file");
    }

    @Test
    void notGguf(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("text.gguf");
        Files.writeString(f, "this is not a model, just some text");
        assertOneLineError(run("--model", f.toString(), "hi"), "not a GGUF file");
    }

    @Test
    void noTokenizer(@TempDir Path dir) throws IOException {
        Path f = dir.resolve("bare.gguf");
        new GgufWriter().putString("general.architecture", "llama").write(f);
        assertOneLineError(run("--model", f.toString(), "hi"), "no tokenizer");
    }

    @Test
    void usageErrors() {
        assertOneLineError(run("hi"), "--model");
        assertOneLineError(run("--model", "x.gguf"), "TEXT");
        assertOneLineError(run("--model", "x.gguf", "--bogus", "hi"), "--bogus");
    }
}
