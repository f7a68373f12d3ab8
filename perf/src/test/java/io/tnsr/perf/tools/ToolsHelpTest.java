package io.tnsr.perf.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every command in {@code tools/} answers {@code --help} with its usage, exit status 0, and nothing else: no
 * warning (a picocli {@code [picocli WARN]} from a {@code %} in a description), no stack trace. Each runs as the
 * launcher runs it, in a JVM of its own with the main class its script names, the JVM's incubator notice left out
 * as the launcher leaves it out.
 */
class ToolsHelpTest {
    private static final Path TOOLS = Paths.get(System.getenv().getOrDefault("TNSR_REPO_ROOT", "..")).resolve("tools");
    private static final Pattern LAUNCH = Pattern.compile("launch\\.sh\"?\\s+(\\w+)\\s+([\\w.]+)");

    /** Each launcher script of tools/ and the main class it runs. */
    static Stream<String[]> tools() throws IOException {
        List<String[]> all = new ArrayList<>();
        try (Stream<Path> files = Files.list(TOOLS)) {
            for (Path f : files.filter(Files::isRegularFile).sorted().toList()) {
                Matcher m = LAUNCH.matcher(Files.readString(f));
                assertTrue(m.find(), f + " does not exec lib/launch.sh MODULE MAIN");
                all.add(new String[] {f.getFileName().toString(), m.group(2)});
            }
        }
        return all.stream();
    }

    @Test
    void everyToolIsCovered() throws IOException {
        assertTrue(tools().count() >= 15, "the tools/ directory: " + TOOLS.toAbsolutePath());
    }

    @ParameterizedTest(name = "tools/{0} --help")
    @MethodSource("tools")
    void helpIsCleanUsage(String tool, String mainClass) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Paths.get(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments().stream()
                .filter(a -> !a.startsWith("-javaagent") && !a.startsWith("-agentlib") && !a.startsWith("-Xmx")).toList());
        cmd.addAll(List.of("-Xmx256m", "-cp", System.getProperty("java.class.path"), mainClass, "--help"));
        Process p = new ProcessBuilder(cmd).start();
        CompletableFuture<String> out = CompletableFuture.supplyAsync(() -> read(p.getInputStream()));
        CompletableFuture<String> err = CompletableFuture.supplyAsync(() -> read(p.getErrorStream()));
        boolean ended = p.waitFor(60, TimeUnit.SECONDS);
        if (!ended) {
            p.destroyForcibly();
        }
        assertTrue(ended, "tools/" + tool + " --help did not end within 60 s");
        String stdout = out.get(10, TimeUnit.SECONDS);
        String stderr = err.get(10, TimeUnit.SECONDS).lines()
                .filter(l -> !l.startsWith("WARNING: Using incubator modules")).reduce("", (a, b) -> a + b + "\n");
        assertEquals(0, p.exitValue(), "tools/" + tool + " --help exit status; stderr:\n" + stderr);
        assertTrue(stdout.contains("Usage:"), "tools/" + tool + " --help prints a usage:\n" + stdout);
        assertEquals("", stderr, "tools/" + tool + " --help writes nothing to stderr");
        for (String bad : List.of("WARN", "Exception", "\tat ")) {
            assertFalse(stdout.contains(bad), "tools/" + tool + " --help shows '" + bad + "':\n" + stdout);
        }
    }

    private static String read(java.io.InputStream in) {
        try (in) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(could not read: " + e + ")";
        }
    }
}
