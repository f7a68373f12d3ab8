package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.BindException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/** How every tool reports what went wrong: one line, the path or flag concerned, the exit status. */
class CliTest {
    @TempDir
    Path tmp;

    @Command(name = "demo", mixinStandardHelpOptions = true)
    static final class Demo implements Callable<Integer> {
        @Option(names = "--count")
        int count;

        final Callable<Integer> body;

        Demo(Callable<Integer> body) {
            this.body = body;
        }

        @Override
        public Integer call() throws Exception {
            return body.call();
        }
    }

    @Test
    void aFileSystemErrorNamesThePathAndWhatIsWrongWithItAndIsBadInput() {
        Object[] r = CliRun.run(new Demo(() -> {
            Files.readAllBytes(tmp.resolve("missing.gguf"));
            return 0;
        }));
        assertEquals(2, r[0]);
        assertEquals("demo: " + tmp.resolve("missing.gguf") + ": no such file or directory", ((String) r[2]).strip());
        assertEquals("/x: permission denied", Cli.describe(new AccessDeniedException("/x")));
        assertEquals("/a -> /b: Is a directory", Cli.describe(new FileSystemException("/a", "/b", "Is a directory")));
    }

    @Test
    void aNameTakenByAFileOrADirectorySaysWhichHoldsIt() throws IOException {
        Path file = Files.writeString(tmp.resolve("f"), "x");
        assertEquals(file + ": already exists (a file)", Cli.describe(new FileAlreadyExistsException(file.toString())));
        assertEquals(tmp + ": already exists (a directory)", Cli.describe(new FileAlreadyExistsException(tmp.toString())));
        Object[] r = CliRun.run(new Demo(() -> {
            Files.createDirectories(file);
            return 0;
        }));
        assertEquals(2, r[0]);
        assertEquals("demo: " + file + ": already exists (a file)", ((String) r[2]).strip());
    }

    @Test
    void anOtherIoErrorKeepsWhatItsCausesAddAndExitsOne() {
        IOException bind = new IOException("Failed to bind to /127.0.0.1:8080", new BindException("Address already in use"));
        assertEquals("Failed to bind to /127.0.0.1:8080: Address already in use", Cli.withCauses(bind));
        assertEquals("closed", Cli.withCauses(new IOException("closed", new IOException("closed"))));
        Object[] r = CliRun.run(new Demo(() -> {
            throw bind;
        }));
        assertEquals(1, r[0]);
        assertEquals("demo: Failed to bind to /127.0.0.1:8080: Address already in use", ((String) r[2]).strip());
    }

    @Test
    void aUsageErrorIsOneLineThatSaysWhereTheHelpIs() {
        Object[] r = CliRun.run(new Demo(() -> 0), "--count", "abc");
        assertEquals(2, r[0]);
        String err = ((String) r[2]).strip();
        assertEquals("demo: Invalid value for option '--count': 'abc' is not an int (demo --help lists the options)", err);
        assertFalse(err.contains("Usage:"), err);
    }

    @Test
    void versionNamesTheProductAndTheJvm() {
        Object[] r = CliRun.run(new Demo(() -> 0), "--version");
        assertEquals(0, r[0]);
        String out = (String) r[1];
        assertTrue(out.startsWith("demo (tnsr-pipeline "), out);
        assertFalse(out.contains("version unknown"), "the build wrote the version: " + out);
        assertTrue(out.contains("JVM: ") && out.contains(Runtime.version().toString()), out);
    }

    @Test
    void noSuchFileWithoutAReasonIsNamedByItsKind() {
        assertEquals("/m.gguf: no such file or directory", Cli.describe(new NoSuchFileException("/m.gguf")));
    }
}
