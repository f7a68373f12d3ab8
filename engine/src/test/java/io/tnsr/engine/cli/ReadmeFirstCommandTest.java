package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The README's first command, as a newcomer types it (with the test model as {@code --model}): stdout holds the
 * story and nothing else; stderr says the stages are ready and ends with the two-line summary, without the latency
 * table (that is {@code --verbose}'s).
 */
@Timeout(240)
class ReadmeFirstCommandTest {

    /** The first {@code tools/run-pipeline ...} line of the README's code blocks, split into its arguments. */
    static List<String> firstCommand() throws Exception {
        Path readme = Paths.get(System.getenv().getOrDefault("TNSR_REPO_ROOT", "..")).resolve("README.md");
        boolean inCode = false;
        for (String line : Files.readAllLines(readme)) {
            if (line.startsWith("```")) {
                inCode = !inCode;
            } else if (inCode && line.startsWith("tools/run-pipeline ")) {
                List<String> args = new ArrayList<>();
                Matcher m = Pattern.compile("\"([^\"]*)\"|(\\S+)").matcher(line.substring("tools/run-pipeline ".length()));
                while (m.find()) {
                    args.add(m.group(1) != null ? m.group(1) : m.group(2));
                }
                return args;
            }
        }
        throw new AssertionError("no tools/run-pipeline command in a code block of " + readme);
    }

    /** {@code args} with {@code --model} set to the test model (replaced when the README names one). */
    static List<String> withTestModel(List<String> args, String... more) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < args.size(); i++) {
            if (args.get(i).equals("--model")) {
                i++;
            } else {
                out.add(args.get(i));
            }
        }
        out.addAll(List.of("--model", SharedData.path("models/stories260K.gguf").toString()));
        out.addAll(List.of(more));
        return out;
    }

    @Test
    void stdoutHoldsOnlyTheStoryAndStderrTheReadyLineAndASummary() throws Exception {
        List<String> readme = firstCommand();
        assertTrue(readme.contains("--prompt"), "the first command gives a prompt: " + readme);
        String prompt = readme.get(readme.indexOf("--prompt") + 1);
        // Seeded, so that the plain run and the JSON run tell the same story.
        Object[] plain = CliRun.run(new RunPipelineCommand(), withTestModel(readme, "--seed", "7", "--max-tokens", "48")
                .toArray(String[]::new));
        assertEquals(0, plain[0], (String) plain[2]);
        Object[] json = CliRun.run(new RunPipelineCommand(), withTestModel(readme, "--seed", "7", "--max-tokens", "48", "--json")
                .toArray(String[]::new));
        assertEquals(0, json[0], (String) json[2]);
        Map<?, ?> report = (Map<?, ?>) TestJson.parse(((String) json[1]).strip());
        String story = prompt + ((Map<?, ?>) ((List<?>) report.get("sequences")).get(0)).get("text");

        String out = (String) plain[1];
        assertEquals(story, out.stripTrailing(), "stdout is the prompt and the generated text, nothing else");
        assertFalse(out.contains("\n\n\n"), out);

        String err = (String) plain[2];
        List<String> lines = err.lines().filter(l -> !l.isBlank()).toList();
        assertTrue(lines.stream().anyMatch(l -> l.matches("pipeline: \\d+ stages ready in [0-9.]+ s")), err);
        assertTrue(lines.stream().anyMatch(l -> l.matches("run-pipeline: 48 tokens for 1 sequence in .* tokens/s .*time to first token .*")), err);
        assertTrue(lines.stream().anyMatch(l -> l.matches("run-pipeline: \\d+ hops p50 .*, p99 .*")), err);
        assertFalse(err.contains("hop-stage0-stage1"), "no latency table without --verbose:\n" + err);
        assertFalse(err.contains("== run-pipeline summary"), err);
        assertTrue(lines.size() <= 4, "a few lines on stderr by default:\n" + err);
    }

    @Test
    void verboseShowsTheFullSummaryOnStderrNotStdout() throws Exception {
        Object[] r = CliRun.run(new RunPipelineCommand(), withTestModel(firstCommand(), "--seed", "7", "--max-tokens", "8",
                "--verbose").toArray(String[]::new));
        assertEquals(0, r[0], (String) r[2]);
        assertTrue(((String) r[2]).contains("== run-pipeline summary =="), (String) r[2]);
        assertTrue(((String) r[2]).contains("hop-stage0-stage1"), (String) r[2]);
        assertFalse(((String) r[1]).contains("summary"), (String) r[1]);
    }

    @Test
    void latencyFiguresReadInTheUnitOfTheirSize() {
        assertEquals("7.0..23.2 ms", RunPipelineCommand.range(7041, 23167));
        assertEquals("272..462 us", RunPipelineCommand.range(271.9, 461.6));
        assertEquals("12.3 us", RunPipelineCommand.range(12.31, 12.34));
        assertEquals("0.9..1.2 ms", RunPipelineCommand.range(900, 1200));
    }
}
