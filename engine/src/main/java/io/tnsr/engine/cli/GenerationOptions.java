package io.tnsr.engine.cli;

import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.tokenizer.Tokenizer;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import picocli.CommandLine.Option;

/** Prompt and sampling options shared by {@code tools/generate} and {@code tools/run-pipeline}. */
public final class GenerationOptions {
    @Option(names = "--prompt", paramLabel = "TEXT", description = "A prompt; repeat for several sequences.")
    List<String> prompts = new ArrayList<>();

    @Option(names = "--prompts-file", paramLabel = "FILE", description = "More prompts, one per line (blank lines skipped).")
    Path promptsFile;

    @Option(names = "--max-tokens", defaultValue = "256", paramLabel = "N", description = "Most tokens to generate per sequence (default: ${DEFAULT-VALUE}).")
    int maxTokens;

    @Option(names = "--temperature", defaultValue = "0.8", paramLabel = "T", description = "0 = greedy (default: ${DEFAULT-VALUE}).")
    double temperature;

    @Option(names = "--top-p", defaultValue = "0.95", paramLabel = "P", description = "Nucleus sampling threshold, 1 = off (default: ${DEFAULT-VALUE}).")
    double topP;

    @Option(names = "--top-k", defaultValue = "40", paramLabel = "K", description = "Keep the K most likely tokens, 0 = off (default: ${DEFAULT-VALUE}).")
    int topK;

    @Option(names = "--seed", paramLabel = "S", description = "Seed for sampling (default: random, printed in --json output).")
    Long seed;

    @Option(names = "--ignore-eos", description = "Keep generating through EOS/BOS until --max-tokens (for benchmarks).")
    boolean ignoreEos;

    @Option(names = "--json", description = "Print one JSON object on one line at the end (and no streamed text on stdout).")
    boolean json;

    private long resolvedSeed;

    public boolean json() {
        return json;
    }

    public int maxTokens() {
        return maxTokens;
    }

    public long seed() {
        return resolvedSeed;
    }

    /** The sampling settings (the seed is drawn once when not given). */
    public SamplingConfig sampling() {
        if (maxTokens < 0) {
            throw new IllegalArgumentException("--max-tokens must be >= 0, got " + maxTokens);
        }
        resolvedSeed = seed != null ? seed : System.nanoTime() ^ ProcessHandle.current().pid();
        try {
            return SamplingConfig.of(temperature, topK, topP, resolvedSeed);
        } catch (SamplingConfig.InvalidSamplingException e) {
            throw new IllegalArgumentException(e.option() + " " + e.problem(), e);
        }
    }

    /** Every prompt: --prompt ones then the file's; {@code fallback} when there are none (null: error). */
    public List<String> prompts(String fallback) throws IOException {
        List<String> all = new ArrayList<>(prompts);
        if (promptsFile != null) {
            if (!Files.isRegularFile(promptsFile)) {
                throw new IllegalArgumentException("--prompts-file " + promptsFile + ": "
                        + (Files.isDirectory(promptsFile) ? "a directory, not a file of prompts" : "no such file"));
            }
            for (String line : Files.readAllLines(promptsFile, StandardCharsets.UTF_8)) {
                if (!line.isBlank()) {
                    all.add(line);
                }
            }
        }
        if (all.isEmpty()) {
            if (fallback == null) {
                throw new IllegalArgumentException("no prompt: give --prompt TEXT (repeatable) or --prompts-file FILE");
            }
            all.add(fallback);
        }
        return all;
    }

    /** One {@link SequenceState} per prompt, encoded with BOS. */
    public List<SequenceState> sequences(List<String> texts, Tokenizer tok, int contextLength, Sampler sampler) {
        List<SequenceState> seqs = new ArrayList<>();
        for (String p : texts) {
            seqs.add(new SequenceState(seqs.size(), p, tok.encode(p, true), maxTokens, contextLength,
                    ignoreEos ? -1 : tok.bos(), ignoreEos ? t -> false : tok::isEndOfGeneration, sampler));
        }
        return seqs;
    }
}
