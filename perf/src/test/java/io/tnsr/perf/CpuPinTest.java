package io.tnsr.perf;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class CpuPinTest {
    @Test
    void aListReadsAsTasksetWritesIt() {
        assertEquals(List.of(0, 1, 2, 5), CpuPin.parseList("0-2,5"));
        assertEquals(List.of(1, 3), CpuPin.parseList("3,1,3"));
        assertEquals(List.of(7), CpuPin.parseList("7"));
        for (String bad : new String[] {"", "a", "1,", "2-1", "-1", "1 2"}) {
            assertThrows(IllegalArgumentException.class, () -> CpuPin.parseList(bad), bad);
        }
    }

    @Test
    void lastNamesTheLastCpusThisProcessMayUse() {
        List<Integer> allowed = CpuPin.allowed();
        assertTrue(!allowed.isEmpty());
        assertEquals(String.valueOf(allowed.get(allowed.size() - 1)), CpuPin.resolve("last", 1));
        assertEquals(CpuPin.join(allowed), CpuPin.resolve("LAST", allowed.size() + 3));
        assertNull(CpuPin.resolve("none", 1));
    }

    @Test
    void aCpuThisProcessMayNotUseIsRefusedByNumber() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> CpuPin.resolve("4095", 1));
        assertTrue(e.getMessage().contains("CPU 4095") && e.getMessage().contains(CpuPin.join(CpuPin.allowed())),
                e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> CpuPin.resolve("fast", 1));
        assertTrue(e.getMessage().contains("'fast'"), e.getMessage());
    }

    @Test
    void aPinnedProcessRunsOnlyOnItsCpuWithEveryThread() throws Exception {
        assumeTrue(CpuPin.available(), "no taskset or /proc here");
        int cpu = CpuPin.allowed().get(0);
        Process p = new ProcessBuilder("sleep", "30").start();
        try {
            CpuPin.pin(p.pid(), Integer.toString(cpu));
            String status = Files.readString(Path.of("/proc/" + p.pid() + "/status"));
            assertTrue(status.contains("Cpus_allowed_list:\t" + cpu + "\n"), status);
        } finally {
            p.destroyForcibly();
            p.waitFor(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void pinningAProcessThatIsGoneFailsNamingIt() throws Exception {
        assumeTrue(CpuPin.available(), "no taskset or /proc here");
        Process p = new ProcessBuilder("true").start();
        p.waitFor(10, TimeUnit.SECONDS);
        IOException e = assertThrows(IOException.class, () -> CpuPin.pin(p.pid(), "0"));
        assertTrue(e.getMessage().contains("process " + p.pid()), e.getMessage());
    }
}
