package io.tnsr.engine.testing;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A child process run to its end within a bound. Its stdout and stderr (a pipe, as a user's shell pipe would be) are
 * read on a thread of their own, so that the child never blocks on a full pipe and the test never blocks reading
 * one; past the bound the child is killed and the test fails naming it, with what it wrote so far.
 *
 * @param exitCode the process's exit code
 * @param output   what it wrote to stdout and stderr, interleaved
 */
public record ChildProcess(int exitCode, String output) {

    /** Runs {@code command} (with {@code what} naming it in a failure) for at most {@code seconds}. */
    public static ChildProcess run(String what, List<String> command, long seconds) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        Thread reader = new Thread(() -> copy(p.getInputStream(), bytes), "output of " + what);
        reader.setDaemon(true);
        reader.start();
        try {
            p.getOutputStream().close();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
                reader.join(TimeUnit.SECONDS.toMillis(5));
                throw new AssertionError(what + " did not end within " + seconds + " s; it wrote: " + text(bytes));
            }
            reader.join(TimeUnit.SECONDS.toMillis(10)); // the pipe closes with the process
            return new ChildProcess(p.exitValue(), text(bytes));
        } finally {
            p.destroyForcibly();
        }
    }

    private static void copy(InputStream in, ByteArrayOutputStream to) {
        byte[] buf = new byte[8192];
        try (in) {
            for (int n; (n = in.read(buf)) >= 0; ) {
                to.write(buf, 0, n); // synchronized, as is toString
            }
        } catch (IOException e) {
            to.writeBytes(("\n(output not read to its end: " + e + ")").getBytes(StandardCharsets.UTF_8));
        }
    }

    private static String text(ByteArrayOutputStream bytes) {
        return bytes.toString(StandardCharsets.UTF_8);
    }
}
