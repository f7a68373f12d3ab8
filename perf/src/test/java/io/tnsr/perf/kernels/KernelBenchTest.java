package io.tnsr.perf.kernels;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

class KernelBenchTest {

    @Test
    void aFailedForkIsReportedByItsExceptionAndTheFirstEngineFrame() {
        String printed = """
                # Warmup Iteration   1: <failure>

                java.lang.IllegalArgumentException: Index -113 must be zero or positive, and less than 16
                \tat jdk.incubator.vector/jdk.incubator.vector.Int512Vector.lane(Int512Vector.java:473)
                \tat io.tnsr.engine.model.Iq4PanelMatrix.m1(Iq4PanelMatrix.java:197)
                \tat io.tnsr.engine.model.Iq4PanelMatrix.wholePanels(Iq4PanelMatrix.java:176)
                """;
        assertEquals("java.lang.IllegalArgumentException: Index -113 must be zero or positive, and less than 16"
                + " (at io.tnsr.engine.model.Iq4PanelMatrix.m1(Iq4PanelMatrix.java:197))", KernelBench.cause(printed));
    }

    @Test
    void aFailureWithoutAnEngineFrameKeepsItsExceptionAndOtherTextIsKeptWhole() {
        assertEquals("java.lang.OutOfMemoryError: Java heap space",
                KernelBench.cause("# Fork: 1 of 1\n# Warmup Iteration   1: <failure>\n\njava.lang.OutOfMemoryError: Java heap space\n"));
        assertEquals("<failure>", KernelBench.cause("<failure>\n"));
        assertEquals("WARNING: Forked process returned code: 134", KernelBench.cause("WARNING: Forked process returned code: 134\n"));
    }
}
