package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.sun.management.HotSpotDiagnosticMXBean;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/** Which token groups a call runs in, and that the choice follows the host's vector registers. */
class TokenGroupsTest {
    /** The groups of an n-token call, as widths. */
    private static String groups(int n) {
        StringBuilder b = new StringBuilder();
        for (int t0 = 0, w; t0 < n; t0 += w) {
            w = TokenGroups.width(n, t0);
            b.append(b.length() == 0 ? "" : "+").append(w);
        }
        return b.toString();
    }

    @Test
    void groupsAsWideAsTheRegistersHoldTheirSums() {
        if (PanelKernels.SIXTEEN_REGISTERS) { // six tokens' sums, two weights and a broadcast: 15 of 16; four at the end
            assertEquals("6", groups(5));
            assertEquals("4", groups(1));
            assertEquals("4+4", groups(8)); // a batch of eight: eight lanes, not twelve
            assertEquals("6+4", groups(10));
            assertEquals("6+4+4", groups(13));
            assertEquals("6+6+4", groups(16)); // sixteen lanes, not eighteen
            assertEquals("6+6+6+6+6+6+4", groups(40));
        } else {
            assertEquals("8", groups(5));
            assertEquals("8+8", groups(16));
            assertEquals("12+8", groups(17));
            assertEquals("12+12+12+8", groups(40)); // a last group of at most eight takes eight
            assertEquals("12+12+12+12", groups(48));
        }
    }

    /**
     * 16 registers exactly on x86 without AVX-512 in use: a CPU without avx512f, or a JVM told -XX:UseAVX=2 or less
     * (the 256-bit test run). Derived here from /proc/cpuinfo and the JVM's arguments where they decide it.
     */
    @Test
    void sixteenRegistersExactlyWithoutAvx512() throws IOException {
        Path cpuinfo = Path.of("/proc/cpuinfo");
        String arch = System.getProperty("os.arch");
        assumeTrue(Files.isReadable(cpuinfo) && (arch.equals("amd64") || arch.equals("x86_64")), "x86 Linux only");
        boolean avx512 = Pattern.compile("^flags\\s*:.*\\bavx512f\\b", Pattern.MULTILINE).matcher(Files.readString(cpuinfo)).find();
        int useAvx = 3;
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            Matcher m = Pattern.compile("-XX:UseAVX=(\\d)").matcher(a);
            if (m.matches()) {
                useAvx = Integer.parseInt(m.group(1));
            }
        }
        if (!avx512 || useAvx < 3) {
            assertTrue(PanelKernels.SIXTEEN_REGISTERS, "avx512f " + avx512 + ", -XX:UseAVX=" + useAvx);
        } else { // an AVX-512 CPU: 32 registers unless the JVM itself chose less (it does on some early steppings)
            String chosen = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class).getVMOption("UseAVX").getValue();
            assertEquals(Integer.parseInt(chosen) < 3, PanelKernels.SIXTEEN_REGISTERS, "UseAVX " + chosen);
        }
    }
}
