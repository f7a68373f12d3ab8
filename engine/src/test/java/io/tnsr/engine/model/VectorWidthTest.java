package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import org.junit.jupiter.api.Test;

/**
 * The engine's kernels run at the JVM's preferred vector width, and the width executions of engine/pom.xml
 * (-XX:UseAVX=2, -XX:MaxVectorSize=16) really test the widths they are named after: they pass
 * -Dtnsr.test.lanes, and on x86 the kernels must then have that many float lanes.
 */
class VectorWidthTest {

    @Test
    void theKernelsUseTheWidthThisTestRunAskedFor() {
        int lanes = TileKernels.L;
        System.out.println("kernels: " + lanes + " float lanes (" + lanes * Float.SIZE + "-bit vectors), byte loads of "
                + Blocks.B.length() + " lanes");
        assertTrue(lanes == 4 || lanes == 8 || lanes == 16, "the kernels are written for 128-, 256- and 512-bit vectors, not "
                + lanes + " float lanes");
        assertEquals(Math.max(8, lanes), Blocks.B.length(), "byte vectors: L lanes, at least the 64-bit shape");
        Integer expected = Integer.getInteger("tnsr.test.lanes");
        assumeTrue(expected != null, "the default execution runs at the width this machine prefers: " + lanes + " lanes");
        String arch = System.getProperty("os.arch");
        assumeTrue(arch.equals("amd64") || arch.equals("x86_64"),
                "-XX:UseAVX sets the width on x86 only; this is " + arch + " at " + lanes + " lanes");
        assertEquals(expected.intValue(), lanes, "the JVM flags of this execution did not give the width it tests");
    }
}
