package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;
import org.openjdk.jmh.annotations.Mode;

/** Reading a fork's figures from JMH's JSON result, as JMH 1.37 writes it. */
class ForkRunnerTest {
    private static final String SAMPLE = """
            [{"jmhVersion":"1.37","benchmark":"io.tnsr.perf.kernels.KernelBenchmark.matmul","mode":"sample","forks":1,
              "primaryMetric":{"score":27.1,"scoreUnit":"us/op",
                "scorePercentiles":{"0.0":25.0,"50.0":26.8,"90.0":28.0,"99.0":31.5,"100.0":90.0},
                "rawDataHistogram":[[[[26.8,100]]]]},
              "secondaryMetrics":{"gc.alloc.rate.norm":{"score":9.5,"scoreUnit":"B/op","rawData":[[9.0,9.5,12.0]]}}}]
            """;
    private static final String AVGT = """
            [{"jmhVersion":"1.37","benchmark":"io.tnsr.perf.wire.CodecBenchmark.decodeActivation16k","mode":"avgt","forks":1,
              "primaryMetric":{"score":30.0,"scoreUnit":"ns/op","rawData":[[31.0,29.0,30.5,28.0,40.0]]},
              "secondaryMetrics":{"gc.alloc.rate.norm":{"score":0.001,"scoreUnit":"B/op","rawData":[[0.001,0.001,0.002,0.001,0.001]]}}}]
            """;

    @Test
    void sampleModeTakesTheMedianAndTheTailOfAllSamples() throws Exception {
        Sample s = ForkRunner.parseJmh(SAMPLE, Mode.SampleTime, 300);
        assertTrue(s.ok());
        assertEquals(26_800, s.time(), 1e-6);
        assertEquals(31_500, s.p99(), 1e-6);
        assertEquals(9.0, s.alloc(), 1e-9, "the least over iterations");
        assertEquals(300e6 / 26_800, s.opsPerIteration(), 1e-6);
    }

    @Test
    void averageTimeTakesTheMedianIteration() throws Exception {
        Sample s = ForkRunner.parseJmh(AVGT, Mode.AverageTime, 300);
        assertEquals(30.5, s.time(), 1e-9, "one slow iteration (40 ns) does not move it");
        assertTrue(Double.isNaN(s.p99()));
        assertEquals(0.001, s.alloc(), 1e-12);
    }

    @Test
    void anEmptyResultIsAFailureNotAFigure() throws Exception {
        assertFalse(ForkRunner.parseJmh("[]", Mode.AverageTime, 300).ok());
    }
}
