package io.tnsr.perf.gate;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * The reference commit, exported ({@code git archive}) into {@code .build/perf-gate/reference-SHA/} of the checkout
 * and built there the way {@code tools/} builds a checkout ({@code mvn package} without tests), offline: the local
 * Maven repository already holds what the tree under test was built with. Kept for later runs (a commit never
 * changes) until the JDK does.
 *
 * <p>Both builds read the same generated model and matrix files: the reference's {@code .build/models} is a link to
 * the checkout's, so one copy of each sits in the page cache and a freshly written file cannot favour one build.
 */
final class ReferenceBuild {
    /** Bound on building the reference (a clean build takes well under a minute on 2 cores). */
    private static final long BUILD_SECONDS = 600;

    private ReferenceBuild() {
    }

    /** Whether a build of {@code commit} for this JDK is kept, so that {@link #prepare} builds nothing. */
    static boolean built(Path home, String commit) throws IOException {
        Path marker = dir(home, commit).resolve(".build").resolve("perf-gate-reference");
        return Files.exists(marker) && Files.readString(marker, StandardCharsets.UTF_8).equals(identity(commit));
    }

    private static Path dir(Path home, String commit) {
        return home.resolve(".build").resolve("perf-gate").resolve("reference-" + commit.substring(0, 12));
    }

    /** What the marker file of a kept build holds: the commit and the JDK that built it. */
    private static String identity(String commit) {
        return commit + " " + System.getProperty("java.home") + " " + Runtime.version() + "\n";
    }

    /** A build of {@code commit} ready to run its {@code tools/}; builds it unless a build for this JDK is kept. */
    static ForkRunner.Build prepare(Path home, Git git, String commit, PrintStream out) throws IOException, InterruptedException {
        Path dir = dir(home, commit);
        Path marker = dir.resolve(".build").resolve("perf-gate-reference");
        String identity = identity(commit);
        ForkRunner.Build build = new ForkRunner.Build("reference", dir);
        if (built(home, commit)) {
            out.println("perf-gate: reference " + commit.substring(0, 10) + " already built in " + home.relativize(dir));
            return build;
        }
        long t0 = System.nanoTime();
        deleteTree(dir);
        Files.createDirectories(dir.resolve(".build"));
        Path tar = dir.getParent().resolve("reference-" + commit.substring(0, 12) + ".tar");
        try {
            git.archive(commit, tar);
            run(List.of("tar", "-xf", tar.toString(), "-C", dir.toString()), dir, dir.resolve(".build").resolve("extract.log"), 120);
        } finally {
            Files.deleteIfExists(tar);
        }
        Path models = Files.createDirectories(home.resolve(".build").resolve("models"));
        Files.createSymbolicLink(dir.resolve(".build").resolve("models"), models);
        Path log = dir.resolve(".build").resolve("build.log");
        List<String> mvn = new ArrayList<>(List.of("mvn", "-o", "-q", "-B", "-DskipTests", "-Dmaven.test.skip=true", "package"));
        out.println("perf-gate: building reference " + commit.substring(0, 10) + " offline in " + home.relativize(dir) + " ...");
        if (!run(mvn, dir, log, BUILD_SECONDS)) {
            String why = tail(log);
            if (!why.contains("offline")) {
                throw new IOException("building the reference " + commit + " failed: " + why + " (log: " + log + ")");
            }
            // A dependency of the reference that this tree's build never needed: fetch it once.
            out.println("perf-gate: the local Maven repository lacks something the reference needs; building it online");
            mvn.remove("-o");
            if (!run(mvn, dir, log, BUILD_SECONDS)) {
                throw new IOException("building the reference " + commit + " failed: " + tail(log) + " (log: " + log + ")");
            }
        }
        // What tools/lib/launch.sh checks before it runs anything: sources older than this stamp need no build.
        Files.writeString(dir.resolve(".build").resolve("stamp"), "");
        Files.writeString(marker, identity, StandardCharsets.UTF_8);
        removeOtherReferences(dir);
        out.printf(Locale.ROOT, "perf-gate: reference built in %.0f s%n", (System.nanoTime() - t0) / 1e9);
        return build;
    }

    /** Runs {@code cmd} in {@code dir} with its output in {@code log}, for at most {@code seconds}: true on success. */
    private static boolean run(List<String> cmd, Path dir, Path log, long seconds) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
                .redirectOutput(log.toFile()).start();
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new IOException(String.join(" ", cmd) + " in " + dir + ": not done within " + seconds + " s, killed (log: " + log + ")");
        }
        return p.exitValue() == 0;
    }

    /** The first error line of a Maven log, or its last line. */
    private static String tail(Path log) throws IOException {
        List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8).stream().map(String::strip).filter(l -> !l.isEmpty()).toList();
        return lines.stream().filter(l -> l.startsWith("[ERROR]")).findFirst()
                .orElse(lines.isEmpty() ? "(no output)" : lines.get(lines.size() - 1));
    }

    /** Builds of earlier references are not measured again once the reference has moved: about 6 MB each. */
    private static void removeOtherReferences(Path keep) throws IOException {
        try (Stream<Path> s = Files.list(keep.getParent())) {
            for (Path p : s.filter(p -> !p.equals(keep) && Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)
                    && p.getFileName().toString().matches("reference-[0-9a-f]{12}")).toList()) {
                deleteTree(p);
            }
        }
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) { // does not follow the models link: only the link itself goes
            for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }
}
