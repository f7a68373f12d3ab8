package io.tnsr.engine.util;

/**
 * What a command says on stderr besides its result. Routine lines (a stage loaded its layers, a session started,
 * the details of a handshake) are {@link #info}: shown with {@code --verbose}, or by a stand-alone {@code tools/stage}
 * whose operator watches it; what the user must see (ready, a warning, a failure) is {@link #show}n always. stdout carries only what the user
 * asked for (the generated text, a JSON report), so that {@code > file} captures it alone.
 *
 * <p>Each line is written with one {@code println} of a whole string: several processes (the stages a coordinator
 * starts share its stderr) then never interleave within a line.
 */
public final class ConsoleLog {
    private static volatile boolean verbose = true;
    /** Where lines go: stderr, or above a progress bar while one is drawn ({@link TaskProgress}). */
    private static volatile java.util.function.Consumer<String> printer = ConsoleLog::stderr;

    private ConsoleLog() {
    }

    /** Whether routine lines are shown: true unless a command was asked to be quiet. */
    public static boolean verbose() {
        return verbose;
    }

    /** Shows routine lines (true) or only warnings and failures (false), for this process. */
    public static void setVerbose(boolean on) {
        verbose = on;
    }

    /** A routine line, shown only when {@link #verbose()}. */
    public static void info(String line) {
        if (verbose) {
            printer.accept(line);
        }
    }

    /** A line the user must see (the pipeline is ready, a warning, a failure): always shown. */
    public static void show(String line) {
        printer.accept(line);
    }

    /** Lines go to {@code p} from now on (a drawn progress bar prints them above itself); null: to stderr again. */
    static void printTo(java.util.function.Consumer<String> p) {
        printer = p == null ? ConsoleLog::stderr : p;
    }

    private static void stderr(String line) {
        System.err.println(line);
    }
}
