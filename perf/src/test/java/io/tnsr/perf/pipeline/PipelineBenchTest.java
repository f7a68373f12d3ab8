package io.tnsr.perf.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.perf.engine.LlamaCppFigures;
import java.io.PrintWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.io.TempDir;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** pipeline-bench's arguments: a run too short to measure is refused up front, not printed as 0.0 tokens/s. */
class PipelineBenchTest {

    @Test
    void shortRunsLeaveDecodeStepsToMeasure() {
        assertEquals(16, PipelineBench.warmupSteps(64), "the default run leaves out 16 of its 63 decode steps");
        assertEquals(16, PipelineBench.warmupSteps(33));
        assertEquals(7, PipelineBench.warmupSteps(16), "16 tokens: 15 decode steps, 7 warm-up, 8 measured");
        assertEquals(1, PipelineBench.warmupSteps(3));
        for (int tokens = 3; tokens <= 64; tokens++) {
            assertTrue(PipelineBench.warmupSteps(tokens) < tokens - 1, tokens + " tokens");
        }
    }

    @Test
    void tooFewTokensOrRepeatsAreUsageErrors() {
        for (String[] args : new String[][] {{"--tokens", "2"}, {"--repeats", "0"}}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new PipelineBench()).setErr(new PrintWriter(err, true)).execute(args);
            assertEquals(2, status, String.join(" ", args));
            assertTrue(err.toString().contains(args[0] + " must be at least"), err.toString());
        }
    }

    @Test
    void aLayoutThatIsNotSxMxBIsAUsageError() {
        for (String bad : new String[] {"2x2", "0x2x8", "2x2xeight", "pipelinin", "1x1x16x0", "1x1x16x2x2"}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new PipelineBench()).setErr(new PrintWriter(err, true)).execute("--scenarios", bad);
            assertEquals(2, status, bad);
            assertTrue(err.toString().contains("unknown scenario '" + bad + "': expected stages, pipelining, spin or a layout SxMxB"),
                    err.toString());
        }
    }

    @Test
    void aRowComparesWithAsManySequencesOnAsManyThreadsAsThePipelineHasCores() {
        assertEquals(new LlamaCppFigures.Batched(16, 2), PipelineBench.comparable(new PipelineBench.Scenario("2x2x8", 2, 2, 8, false), 2));
        assertEquals(new LlamaCppFigures.Batched(32, 2), PipelineBench.comparable(new PipelineBench.Scenario("4x4x8", 4, 4, 8, false), 2),
                "four stages on two CPUs have two cores");
        assertEquals(new LlamaCppFigures.Batched(1, 1), PipelineBench.comparable(new PipelineBench.Scenario("1x1x1", 1, 1, 1, false), 8));
        assertEquals(new LlamaCppFigures.Batched(16, 2), PipelineBench.comparable(new PipelineBench.Scenario("1x1x16x2", 1, 1, 16, false, 2), 2),
                "one stage of two threads has two cores");
        assertEquals(new LlamaCppFigures.Batched(16, 2), PipelineBench.comparable(new PipelineBench.Scenario("2x2x8x2", 2, 2, 8, false, 2), 2),
                "never more cores than the machine has");
    }

    @Test
    void aLlamaCppFileThatCannotBeComparedIsAUsageErrorBeforeAnythingRuns(@TempDir Path dir) throws Exception {
        Path file = Files.writeString(dir.resolve("bench.jsonl"), "not a record\n");
        StringWriter err = new StringWriter();
        int status = new CommandLine(new PipelineBench()).setErr(new PrintWriter(err, true)).execute("--llama-cpp", file.toString());
        assertEquals(2, status);
        assertTrue(err.toString().contains("--llama-cpp: " + file + " has no llama-batched-bench record"), err.toString());
    }
}
