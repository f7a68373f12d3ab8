package io.tnsr.perf.gate;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/** The few git questions the gate asks of the checkout it runs in, each with a time bound. */
final class Git {
    private final Path home;

    Git(Path home) {
        this.home = home;
    }

    /** A failed git command: what was asked and what git said. */
    static final class GitException extends IOException {
        private static final long serialVersionUID = 1L;

        GitException(String message) {
            super(message);
        }
    }

    /** The full id of {@code rev} as a commit, or null when this repository does not have it. */
    String commit(String rev) throws IOException {
        try {
            return run("rev-parse", "--verify", "--quiet", rev + "^{commit}").strip();
        } catch (GitException e) {
            return null;
        }
    }

    /**
     * The files that make up the code whose speed the gate measures and that differ between {@code commit} and
     * the working tree (uncommitted and untracked files included), by {@link #isCode}.
     */
    List<String> codeChangesSince(String commit) throws IOException {
        Set<String> changed = new LinkedHashSet<>(run("diff", "--name-only", "--no-renames", commit, "--").lines().toList());
        changed.addAll(run("ls-files", "--others", "--exclude-standard").lines().toList());
        List<String> code = new ArrayList<>();
        for (String p : changed) {
            if (!p.isBlank() && isCode(p)) {
                code.add(p);
            }
        }
        return code;
    }

    /**
     * Whether a path of the repository can change what the benchmarks measure: the build files, the sources of
     * the modules (not their tests), and the launchers in {@code tools/} (JVM flags). Documentation, tests,
     * example configurations and {@code perf/baseline.json} cannot.
     */
    static boolean isCode(String path) {
        return path.equals("pom.xml") || path.endsWith("/pom.xml") || path.contains("/src/main/") || path.startsWith("tools/");
    }

    /** Writes the tree of {@code commit} as a tar archive to {@code tar}. */
    void archive(String commit, Path tar) throws IOException {
        run("archive", "--format=tar", "-o", tar.toString(), commit);
    }

    /** git's standard output; a {@link GitException} with its message when it fails. */
    String run(String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("git", "-C", home.toString()));
        cmd.addAll(List.of(args));
        Process p;
        try {
            p = new ProcessBuilder(cmd).redirectErrorStream(false).start();
        } catch (IOException e) {
            throw new GitException("cannot run git (" + e.getMessage() + "): perf-gate needs git and a clone of the repository");
        }
        try {
            p.getOutputStream().close();
            CompletableFuture<byte[]> out = CompletableFuture.supplyAsync(() -> readAll(p.getInputStream()));
            CompletableFuture<byte[]> err = CompletableFuture.supplyAsync(() -> readAll(p.getErrorStream()));
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                throw new GitException(String.join(" ", cmd) + ": no answer within 60 s");
            }
            if (p.exitValue() != 0) {
                throw new GitException(String.join(" ", cmd) + " failed: "
                        + new String(err.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8).strip());
            }
            return new String(out.get(10, TimeUnit.SECONDS), StandardCharsets.UTF_8);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            p.destroyForcibly();
            throw new GitException(String.join(" ", cmd) + ": interrupted");
        } catch (ExecutionException | TimeoutException e) {
            throw new GitException(String.join(" ", cmd) + ": its output could not be read (" + e + ")");
        }
    }

    private static byte[] readAll(InputStream in) {
        try (in) {
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
