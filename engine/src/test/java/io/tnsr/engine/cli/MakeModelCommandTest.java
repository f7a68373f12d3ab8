package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.chat.ChatMessage;
import io.tnsr.engine.chat.ChatTemplate;
import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/** {@code tools/make-model}, run in-process: its weight types, an embedded chat template, and the errors of bad ones. */
class MakeModelCommandTest {
    @TempDir
    Path tmp;

    static Object[] run(String... args) {
        return CliRun.run(new MakeModelCommand(), args);
    }

    @ParameterizedTest
    @CsvSource({"q4_k, Q4_K", "Q6_K, Q6_K", "q8_0, Q8_0", "bf16, BF16", "q5_0, Q5_0", "iq4_nl, IQ4_NL", "IQ4_XS, IQ4_XS",
        "q3_k, Q3_K", "q4_1, Q4_1", "Q5_K, Q5_K", "q2_k, Q2_K"})
    void writesEveryMatrixInTheType(String arg, GgmlType type) {
        Path out = tmp.resolve(arg + ".gguf");
        Object[] r = run("--preset", "stories110M", "--dim", "256", "--ffn", "512", "--heads", "4", "--layers", "1",
                "--vocab", "512", "--context", "64", "--type", arg, "--out", out.toString());
        assertEquals(0, r[0], (String) r[2]);
        try (GgufFile f = GgufFile.open(out)) {
            assertEquals(type, f.tensor("blk.0.ffn_down.weight").type());
            assertEquals(type, f.tensor("token_embd.weight").type());
            assertEquals(type, f.tensor("output.weight").type());
            assertEquals(GgmlType.F32, f.tensor("blk.0.attn_norm.weight").type());
        }
    }

    @Test
    void aKQuantOfTheWrongShapeOrAnUnknownTypeIsOneClearLine() {
        Object[] r = run("--preset", "tiny", "--type", "q4_k", "--out", tmp.resolve("x.gguf").toString());
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("Q4_K weights need dim and FFN length multiples of 256, got 64 and 160"), (String) r[2]);
        r = run("--type", "q8_1", "--out", tmp.resolve("y.gguf").toString());
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("unknown weight type 'q8_1' (f32, f16, bf16, q8_0, q6_k, q5_k, q5_0, q4_k, q4_1, q4_0, iq4_nl, iq4_xs, q3_k, q2_k)"), (String) r[2]);
    }

    @Test
    void anOutputThatCannotBeWrittenIsOneLineAndLeavesNoTemporaryFile() throws Exception {
        Path dir = Files.createDirectory(tmp.resolve("models"));
        Object[] r = run("--preset", "tiny", "--out", dir.toString());
        assertEquals(2, r[0], (String) r[2]);
        assertTrue(((String) r[2]).strip().endsWith("\nmake-model: " + dir + ": is a directory, not a file to write"), (String) r[2]);
        Path file = Files.writeString(tmp.resolve("plain"), "x");
        r = run("--preset", "tiny", "--out", file.resolve("x.gguf").toString());
        assertEquals(2, r[0], (String) r[2]);
        assertTrue(((String) r[2]).contains("\nmake-model: " + file), (String) r[2]);
        try (var left = Files.list(tmp)) {
            assertEquals(List.of("models", "plain"), left.map(p -> p.getFileName().toString()).sorted().toList(),
                    "nothing beside them");
        }
        // the file gets the permissions any new file here gets (the umask's), not a temporary file's 0600
        Path out = tmp.resolve("m.gguf");
        assertEquals(0, run("--preset", "tiny", "--out", out.toString())[0]);
        Path plain = Files.createFile(tmp.resolve("new"));
        assertEquals(Files.getPosixFilePermissions(plain), Files.getPosixFilePermissions(out));
    }

    @Test
    void writesQwenModelsOfAnyHeadSizeAndRefusesOtherArchitectures() {
        Path out = tmp.resolve("qwen3.gguf");
        Object[] r = run("--preset", "tiny", "--arch", "qwen3", "--head-dim", "32", "--type", "q8_0", "--out", out.toString());
        assertEquals(0, r[0], (String) r[2]);
        try (GgufFile f = GgufFile.open(out)) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            assertEquals(Architecture.QWEN3, c.arch());
            assertEquals(32, c.headDim());
            assertEquals(128, c.qDim());
            assertEquals(64, c.kvDim());
            assertEquals(GgmlType.F32, f.tensor("blk.0.attn_q_norm.weight").type());
            assertEquals(GgmlType.Q8_0, f.tensor("blk.0.attn_output.weight").type());
        }
        out = tmp.resolve("qwen2.gguf");
        r = run("--preset", "tiny", "--arch", "qwen2", "--out", out.toString());
        assertEquals(0, r[0], (String) r[2]);
        try (GgufFile f = GgufFile.open(out)) {
            assertEquals(Architecture.QWEN2, LlamaConfig.fromGguf(f).arch());
            assertTrue(f.hasTensor("blk.3.attn_v.bias"));
        }
        r = run("--arch", "gpt2", "--out", tmp.resolve("z.gguf").toString());
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).contains("unknown architecture 'gpt2' (llama, qwen2, qwen3)"), (String) r[2]);
    }

    @Test
    void aChatTemplateIsEmbeddedAndReadBack() throws Exception {
        String template = "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}{{ eos_token }}\n{% endfor %}"
                + "{% if add_generation_prompt %}<|assistant|>\n{% endif %}\n";
        Path file = tmp.resolve("chat.jinja");
        Files.writeString(file, template, StandardCharsets.UTF_8);
        Path out = tmp.resolve("chat.gguf");
        Object[] r = run("--preset", "tiny", "--chat-template", file.toString(), "--out", out.toString());
        assertEquals(0, r[0], (String) r[2]);
        try (GgufFile f = GgufFile.open(out)) {
            assertEquals(Optional.of(template), f.metadata().chatTemplate());
            ChatTemplate t = ChatTemplate.fromGguf(f).orElseThrow();
            assertEquals("<s><|user|>\nHi</s>\n<|assistant|>\n", t.render(List.of(new ChatMessage("user", " Hi ")), true));
        }
        try (GgufFile f = GgufFile.open(TestModels.get(ModelSpec.tiny()))) {
            assertEquals(Optional.empty(), f.metadata().chatTemplate());
            assertEquals(Optional.empty(), ChatTemplate.fromGguf(f));
        }
    }

    @Test
    void aChatTemplateThatDoesNotParseIsRefusedInOneLine() throws Exception {
        Path file = tmp.resolve("bad.jinja");
        Files.writeString(file, "{% for m in messages %}{{ m.content }}", StandardCharsets.UTF_8);
        Object[] r = run("--preset", "tiny", "--chat-template", file.toString(), "--out", tmp.resolve("bad.gguf").toString());
        assertEquals(2, r[0]);
        assertTrue(((String) r[2]).startsWith("make-model: " + file + ": chat template syntax error"), (String) r[2]);
        assertEquals(1, ((String) r[2]).strip().lines().count(), (String) r[2]);
    }
}
