package io.tnsr.engine.loadgen;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.SplittableRandom;

/**
 * The prompt of each request: taken round-robin from a file, or generated. A generated prompt is a string of common
 * English words, each one token in the Llama 2 and Llama 3 vocabularies when preceded by a space, so that a prompt of
 * T words is about T tokens (a small vocabulary splits words into several: the server's {@code usage.prompt_tokens}
 * says how many there were). Each request's words differ from the first one on, so a server's prompt cache cannot
 * answer for it.
 */
public final class PromptSource {
    private static final String[] WORDS = ("the of and to in is was for on with as at by from his her they we you it that "
            + "this but not are be have had one all there when which their said each time day man old new way long little "
            + "good great small house water world light night hand place year work home life story girl boy tree sun cat dog "
            + "big happy friend run play look came went saw made could would then again very after before under over away "
            + "back down out up what where who how why").split(" ");

    private final List<String> prompts;
    private final int words;
    private final long seed;
    private final String description;

    private PromptSource(List<String> prompts, int words, long seed, String description) {
        this.prompts = prompts;
        this.words = words;
        this.seed = seed;
        this.description = description;
    }

    /**
     * One prompt per non-empty line; a line that starts with {@code &#123;} is a JSON object whose {@code "prompt"}
     * string is the prompt (JSON lines).
     *
     * @throws IllegalArgumentException naming the file and line when it cannot be used
     */
    public static PromptSource fromFile(Path file) {
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (NoSuchFileException e) {
            throw new IllegalArgumentException(file + ": no such file");
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
        List<String> prompts = new ArrayList<>();
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (line.isBlank()) {
                continue;
            }
            prompts.add(line.stripLeading().startsWith("{") ? jsonPrompt(file, i + 1, line) : line);
        }
        if (prompts.isEmpty()) {
            throw new IllegalArgumentException(file + ": no prompts (one per line, or JSON lines with a \"prompt\" field)");
        }
        return new PromptSource(List.copyOf(prompts), 0, 0,
                String.format(Locale.ROOT, "%d from %s, round-robin", prompts.size(), file));
    }

    private static String jsonPrompt(Path file, int lineNumber, String line) {
        JsonNode n;
        try {
            n = Jackson.MAPPER.readTree(line);
        } catch (JsonProcessingException e) {
            throw new IllegalArgumentException(file + " line " + lineNumber + ": not valid JSON: " + Jackson.problemInLine(e));
        }
        JsonNode p = n.get("prompt");
        if (p == null || !p.isTextual()) {
            throw new IllegalArgumentException(file + " line " + lineNumber + ": a JSON line needs a \"prompt\" string");
        }
        return p.asText();
    }

    /** Prompts of {@code tokens} words each (about as many tokens), different for each request index. */
    public static PromptSource generated(int tokens, long seed) {
        if (tokens < 1) {
            throw new IllegalArgumentException("--prompt-tokens must be at least 1, got " + tokens);
        }
        return new PromptSource(null, tokens, seed,
                String.format(Locale.ROOT, "generated, %d words each (about %d tokens)", tokens, tokens));
    }

    /** The prompt of request {@code index} (0 = the first request, warmup included). */
    public String prompt(long index) {
        if (prompts != null) {
            return prompts.get((int) Math.floorMod(index, (long) prompts.size()));
        }
        SplittableRandom r = new SplittableRandom(seed * 0x9E3779B97F4A7C15L + index);
        StringBuilder sb = new StringBuilder(words * 6);
        for (int i = 0; i < words; i++) {
            if (i > 0) {
                sb.append(' ');
            }
            sb.append(WORDS[r.nextInt(WORDS.length)]);
        }
        return sb.toString();
    }

    /**
     * Whether a measured request, one of {@code [warmup, warmup + measured)}, is sent a prompt that a warm-up request
     * was sent already (always false for generated prompts). A server that caches prompts, as llama-server does by
     * default, then skips most of that request's prefill.
     *
     * @param measured measured requests, {@link Long#MAX_VALUE} when unbounded
     */
    public boolean measuredRepeatWarmup(long warmup, long measured) {
        if (prompts == null || warmup <= 0 || measured <= 0) {
            return false;
        }
        long n = prompts.size();
        return warmup >= n || measured > n - warmup;
    }

    /** One line for the report: where the prompts come from. */
    public String describe() {
        return description;
    }
}
