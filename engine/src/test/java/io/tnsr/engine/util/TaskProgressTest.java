package io.tnsr.engine.util;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.testing.ChildProcess;
import io.tnsr.engine.testing.Prerequisites;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Progress bars appear on a terminal and nowhere else: a child JVM counting through two seconds of work, run under a
 * pseudo-terminal ({@code script}) and with its output piped.
 */
class TaskProgressTest {

    /** The work the child JVM does: 20 steps of 100 ms, then a line on stdout. */
    public static void main(String[] args) throws InterruptedException {
        try (TaskProgress p = TaskProgress.start("counting", 20, TaskProgress.ITEMS)) {
            for (int i = 0; i < 20; i++) {
                Thread.sleep(100);
                p.stepBy(1);
            }
        }
        System.out.println("counted");
    }

    private static List<String> javaCommand() {
        List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-javaagent") && !a.startsWith("-agentlib")).toList());
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), TaskProgressTest.class.getName()));
        return cmd;
    }

    private static String run(List<String> cmd) throws Exception {
        ChildProcess p = ChildProcess.run("the child JVM", cmd, 60);
        assertEquals(0, p.exitCode(), p.output());
        return p.output();
    }

    @Test
    void aPipeGetsNoBar() throws Exception {
        assertFalse(TaskProgress.interactive(), "a test's stdout is a pipe");
        assertFalse(TaskProgress.start("x", 1, TaskProgress.ITEMS).shown());
        String out = run(javaCommand());
        assertEquals("counted", out.lines().filter(l -> !l.startsWith("WARNING: Using incubator")).reduce("", String::concat));
    }

    @Test
    void oneBarAtATime() {
        TaskProgress outer = TaskProgress.start(true, "outer", 10, TaskProgress.ITEMS);
        assertTrue(outer.shown());
        try (TaskProgress inner = TaskProgress.start(true, "inner", 10, TaskProgress.ITEMS)) {
            assertFalse(inner.shown(), "opened while the outer bar is");
        }
        outer.close();
        try (TaskProgress next = TaskProgress.start(true, "next", 10, TaskProgress.ITEMS)) {
            assertTrue(next.shown(), "the outer bar closed");
        }
    }

    @Test
    void linesWrittenAboveTheBarAreTheBytesWritten() {
        java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
        java.io.PrintStream out = new java.io.PrintStream(bytes, true, StandardCharsets.UTF_8);
        try (TaskProgress p = TaskProgress.start(true, "report", 10, TaskProgress.ITEMS)) {
            java.io.PrintStream above = p.above(out);
            above.printf("row %d%n", 1);
            above.print("row 2\nlast, no newline");
            above.close();
        }
        assertEquals("row 1\nrow 2\nlast, no newline", bytes.toString(StandardCharsets.UTF_8));
        assertTrue(TaskProgress.start(false, "silent", 1, TaskProgress.ITEMS).above(out) == out, "silent: the stream itself");
    }

    @Test
    void aTerminalGetsABarThatEndsAtItsTotal() throws Exception {
        Path script = Paths.get("/usr/bin/script");
        if (!Files.isExecutable(script)) {
            Prerequisites.missing("no /usr/bin/script (util-linux) to run the bar under a pseudo-terminal", "a missing script is a failure");
        }
        String line = String.join(" ", javaCommand().stream().map(a -> "'" + a.replace("'", "'\\''") + "'").toList());
        String out = run(List.of(script.toString(), "-qec", line, "/dev/null"));
        assertTrue(out.contains("counting"), out);
        assertTrue(out.contains("100%") && out.contains("20/20"), "the bar ends at its total:\n" + out);
        assertTrue(out.contains("\r"), "redrawn in place");
        assertTrue(out.contains("counted"), out);
    }
}
