package io.tnsr.engine.cli;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.kvcache.SequenceException;
import java.io.IOException;
import java.io.UncheckedIOException;
import picocli.CommandLine;

/**
 * Runs a picocli command the way every tool here behaves: usage errors print the problem and the usage
 * (exit 2), expected failures (a bad file, a bad value) print one line without a stack trace (exit 2 for bad
 * input, 1 otherwise); set TNSR_DEBUG=1 to see the stack trace.
 */
public final class Cli {
    private Cli() {
    }

    public static int run(Object command, String... args) {
        CommandLine cl = new CommandLine(command);
        cl.setExecutionExceptionHandler((e, line, parsed) -> {
            if (System.getenv("TNSR_DEBUG") != null) {
                e.printStackTrace();
            }
            String name = line.getCommandName();
            if (e instanceof GgufException || e instanceof IllegalArgumentException || e instanceof SequenceException
                    || e instanceof io.tnsr.engine.tokenizer.TokenizerException) {
                line.getErr().println(name + ": " + e.getMessage());
                return 2;
            }
            if (e instanceof IOException || e instanceof UncheckedIOException) {
                line.getErr().println(name + ": " + e.getMessage());
                return 1;
            }
            line.getErr().println(name + ": unexpected " + e);
            e.printStackTrace(line.getErr());
            return 1;
        });
        return cl.execute(args);
    }
}
