package io.tnsr.engine.cli;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.kvcache.SequenceException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import picocli.CommandLine;

/**
 * Runs a picocli command the way every tool here behaves: a usage error prints the problem and where the help is
 * (exit 2); expected failures (a bad file, a bad value) print one line without a stack trace (exit 2 for bad input,
 * a path that is missing, unreadable or of the wrong kind among it; 1 otherwise); set TNSR_DEBUG=1 to see the stack
 * trace. {@code --version} prints the product's version and the JVM's.
 */
public final class Cli {
    private Cli() {
    }

    public static int run(Object command, String... args) {
        CommandLine cl = new CommandLine(command);
        if (cl.getCommandSpec().version().length == 0) {
            cl.getCommandSpec().version(cl.getCommandName() + " (tnsr-pipeline " + ProductVersion.get() + ")",
                    "JVM: " + System.getProperty("java.vm.name") + " " + Runtime.version()
                            + " (" + System.getProperty("java.vendor") + ")");
        }
        cl.setParameterExceptionHandler((e, ignored) -> {
            CommandLine line = e.getCommandLine();
            if (System.getenv("TNSR_DEBUG") != null) {
                e.printStackTrace();
            }
            line.getErr().println(line.getCommandName() + ": " + e.getMessage()
                    + (e.getMessage().contains("--help") ? "" : " (" + line.getCommandName() + " --help lists the options)"));
            return 2;
        });
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
            Throwable io = e instanceof UncheckedIOException u ? u.getCause() : e;
            if (io instanceof FileSystemException f) {
                line.getErr().println(name + ": " + describe(f));
                return 2;
            }
            if (io instanceof IOException) {
                line.getErr().println(name + ": " + withCauses(io));
                return 1;
            }
            line.getErr().println(name + ": unexpected " + e);
            e.printStackTrace(line.getErr());
            return 1;
        });
        return cl.execute(args);
    }

    /**
     * A file-system error in words: Java's own message is often the bare path ({@code NoSuchFileException: /x}), so
     * the kind of failure is named from the exception's type where the system gave no reason.
     */
    static String describe(FileSystemException f) {
        String where = f.getOtherFile() == null ? f.getFile() : f.getFile() + " -> " + f.getOtherFile();
        String reason = f.getReason();
        if (reason == null) {
            if (f instanceof NoSuchFileException) {
                reason = "no such file or directory";
            } else if (f instanceof AccessDeniedException) {
                reason = "permission denied";
            } else if (f instanceof FileAlreadyExistsException) {
                // also what creating a directory says when a file holds its name
                Path p = Path.of(f.getFile());
                reason = "already exists" + (Files.isDirectory(p) ? " (a directory)"
                        : Files.exists(p) ? " (a file)" : "");
            } else if (f instanceof NotDirectoryException) {
                reason = "not a directory";
            } else if (f instanceof DirectoryNotEmptyException) {
                reason = "directory not empty";
            } else {
                reason = "file system error (" + f.getClass().getSimpleName() + ")";
            }
        }
        return where == null ? reason : where + ": " + reason;
    }

    /**
     * The message of {@code e} followed by those of its causes that add something: a server that cannot bind says
     * "Failed to bind to /127.0.0.1:8080: Address already in use", not only the first half.
     */
    static String withCauses(Throwable e) {
        StringBuilder b = new StringBuilder(e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            String m = c.getMessage();
            if (m != null && !m.isBlank() && b.indexOf(m) < 0) {
                b.append(": ").append(m);
            }
        }
        return b.toString();
    }
}
