package io.tnsr.engine.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;

class ChildProcessTest {

    @Test
    void aChildPastItsBoundIsKilledAndNamedWithWhatItWrote() {
        long start = System.nanoTime();
        AssertionError e = assertThrows(AssertionError.class,
                () -> ChildProcess.run("the sleeper", List.of("sh", "-c", "echo started; exec sleep 60"), 1));
        assertTrue(e.getMessage().startsWith("the sleeper did not end within 1 s; it wrote: started"), e.getMessage());
        assertTrue(System.nanoTime() - start < 30_000_000_000L, "killed, not waited for");
    }

    @Test
    void moreOutputThanAPipeHoldsIsReadWhileTheChildRuns() throws Exception {
        ChildProcess p = ChildProcess.run("the writer", List.of("sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo; echo err >&2; exit 3"), 30);
        assertEquals(3, p.exitCode());
        assertEquals(300000 + "\nerr\n".length(), p.output().length());
        assertTrue(p.output().endsWith("x\nerr\n"), "stderr follows stdout");
    }
}
