package io.tnsr.engine.cli;

import io.tnsr.engine.chat.ChatTemplate;
import io.tnsr.engine.chat.ChatTemplateException;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.synth.SyntheticModel;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** {@code tools/make-model}: writes a synthetic llama GGUF model with seeded random weights. */
@Command(name = "make-model", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Writes a GGUF file (llama, or qwen2 / qwen3 with --arch) with seeded random weights and a working vocabulary,"
                + " so tests and benchmarks need no downloads. Start from a preset and override any size."})
public final class MakeModelCommand implements Callable<Integer> {

    @Option(names = {"-o", "--out"}, required = true, paramLabel = "FILE", description = "Where to write the .gguf file.")
    Path out;

    @Option(names = "--preset", defaultValue = "tiny", paramLabel = "NAME",
            description = "stories15M, stories110M or tiny (default: ${DEFAULT-VALUE}).")
    String preset;

    @Option(names = "--type", paramLabel = "TYPE", description = {"Weight type: f32, f16, bf16, q8_0, q6_k, q5_k, q5_0, q4_k,"
            + " q4_1, q4_0, iq4_nl, iq4_xs, q3_k or q2_k (default: the preset's, f32).",
            "The K-quants and iq4_xs need --dim and --ffn multiples of 256 (stories110M's are; tiny's and stories15M's"
            + " are not); the other quantized types multiples of 32."})
    String type;

    @Option(names = "--arch", paramLabel = "NAME", defaultValue = "llama",
            description = {"Architecture: llama, qwen2 (Q/K/V biases) or qwen3 (per-head Q/K norms; see --head-dim)"
                    + " (default: ${DEFAULT-VALUE}).", "qwen2 and qwen3 use NEOX RoPE, RoPE base 1e6 and RMS epsilon 1e-6, as llama.cpp's files do."})
    String arch;

    @Option(names = "--head-dim", paramLabel = "N",
            description = "Head size (written as <arch>.attention.key_length; Qwen3 models use 128). Default: dim / heads.")
    Integer headDim;

    @Option(names = "--dim", paramLabel = "N", description = "Embedding length.")
    Integer dim;

    @Option(names = "--layers", paramLabel = "N", description = "Block count.")
    Integer layers;

    @Option(names = "--heads", paramLabel = "N", description = "Attention heads.")
    Integer heads;

    @Option(names = "--kv-heads", paramLabel = "N", description = "KV heads (fewer than heads: grouped-query attention).")
    Integer kvHeads;

    @Option(names = "--ffn", paramLabel = "N", description = "Feed-forward length.")
    Integer ffn;

    @Option(names = "--vocab", paramLabel = "N", description = "Vocabulary size (at least " + ModelSpec.MIN_VOCAB + ").")
    Integer vocab;

    @Option(names = "--context", paramLabel = "N", description = "Context length.")
    Integer context;

    @Option(names = "--tied", negatable = true, description = "Tie the classifier to token_embd (no output.weight).")
    Boolean tied;

    @Option(names = "--rope-factors", description = "Write a rope_freqs.weight tensor (Llama 3.1 style).")
    boolean ropeFactors;

    @Option(names = "--seed", paramLabel = "N", description = "Seed of the random weights.")
    Long seed;

    @Option(names = "--chat-template", paramLabel = "FILE",
            description = "Embed this Jinja chat template (a model's tokenizer.chat_template) in the file; it must parse.")
    Path chatTemplate;

    @Override
    public Integer call() throws Exception {
        ModelSpec p = ModelSpec.preset(preset);
        ModelSpec s = new ModelSpec(p.name(), or(dim, p.dim()), or(layers, p.layers()), or(heads, p.heads()),
                or(kvHeads, heads != null ? heads : p.kvHeads()), or(ffn, p.ffnDim()), or(vocab, p.vocabSize()),
                or(context, p.contextLength()), tied != null ? tied : p.tied(),
                type == null ? p.type() : ModelSpec.parseType(type), seed != null ? seed : p.seed(), ropeFactors || p.ropeFactors(),
                chatTemplate != null ? readChatTemplate(chatTemplate) : p.chatTemplate(), architecture(arch),
                headDim != null ? headDim : 0);
        System.err.println("writing " + s.describe() + " to " + out + " ...");
        long t0 = System.nanoTime();
        SyntheticModel.write(s, out);
        System.err.printf(Locale.ROOT, "done in %.1f s (%d MB)%n", (System.nanoTime() - t0) / 1e9,
                Files.size(out) >> 20);
        return 0;
    }

    /** The template's text, refused in one line if it cannot be read or does not parse. */
    private static String readChatTemplate(Path file) {
        String text;
        try {
            text = Files.readString(file, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read chat template " + file + ": " + e);
        }
        try {
            ChatTemplate.compile(text, "", "");
        } catch (ChatTemplateException e) {
            throw new IllegalArgumentException(file + ": " + e.getMessage());
        }
        return text;
    }

    /** The architecture called {@code name}, or a one-line error naming the supported ones. */
    private static Architecture architecture(String name) {
        Architecture a = Architecture.fromGgufName(name.trim().toLowerCase(Locale.ROOT));
        if (a == null) {
            throw new IllegalArgumentException("unknown architecture '" + name + "' (" + Architecture.supportedList() + ")");
        }
        return a;
    }

    private static <T> T or(T v, T dflt) {
        return v != null ? v : dflt;
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new MakeModelCommand(), args));
    }
}
