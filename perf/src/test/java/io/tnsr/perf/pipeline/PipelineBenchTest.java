package io.tnsr.perf.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
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
        for (String bad : new String[] {"2x2", "0x2x8", "2x2xeight", "pipelinin"}) {
            StringWriter err = new StringWriter();
            int status = new CommandLine(new PipelineBench()).setErr(new PrintWriter(err, true)).execute("--scenarios", bad);
            assertEquals(2, status, bad);
            assertTrue(err.toString().contains("unknown scenario '" + bad + "': expected stages, pipelining, spin or a layout SxMxB"),
                    err.toString());
        }
    }
}
