package io.tnsr.perf.jmh;

import java.util.Arrays;

/**
 * {@code tools/jmh}: JMH's own command line ({@code org.openjdk.jmh.Main}) over the perf module's benchmarks, with
 * {@code --help} understood like every other tool's (JMH itself knows only {@code -h}).
 */
public final class JmhMain {
    private JmhMain() {
    }

    public static void main(String[] args) throws Exception {
        if (Arrays.asList(args).contains("--help")) {
            System.out.println("Usage: tools/jmh [JMH options] [benchmark regexp...]   e.g. tools/jmh -prof gc CodecBenchmark");
            System.out.println("Runs the JMH benchmarks of the perf module; -l lists them. JMH's options:");
            System.out.println();
            args = new String[] {"-h"};
        }
        org.openjdk.jmh.Main.main(args);
    }
}
