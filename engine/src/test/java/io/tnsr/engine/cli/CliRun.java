package io.tnsr.engine.cli;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;

/** Runs a command-line tool in-process, the way its launcher would, capturing what it prints. */
public final class CliRun {
    private CliRun() {
    }

    /** {exit status (Integer), stdout, stderr} of {@code Cli.run(command, args)}; System.out/err and the console's verbosity are restored. */
    public static Object[] run(Object command, String... args) {
        return run(command, new ByteArrayOutputStream(), args);
    }

    /** As {@link #run(Object, String...)}, stdout going to {@code out} as it is printed (its size() may be polled). */
    public static Object[] run(Object command, ByteArrayOutputStream out, String... args) {
        PrintStream oldOut = System.out;
        PrintStream oldErr = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        try {
            System.setOut(new PrintStream(out, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
            int status = Cli.run(command, args);
            return new Object[] {status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8)};
        } finally {
            System.setOut(oldOut);
            System.setErr(oldErr);
            io.tnsr.engine.util.ConsoleLog.setVerbose(true); // a command's --verbose (or its absence) ends with it
        }
    }
}
