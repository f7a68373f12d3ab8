package io.tnsr.perf.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.PrintWriter;
import java.io.StringWriter;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** engine-bench's arguments: a long-context row that cannot fit the preset is refused before the probes run. */
class EngineBenchTest {

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
