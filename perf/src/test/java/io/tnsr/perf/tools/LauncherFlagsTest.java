package io.tnsr.perf.tools;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * The JVM flags the tests run with ({@code <tnsr.jvm.flags>} in the root pom.xml) are the ones the launchers give every
 * tool and stage ({@code JVM_FLAGS} in tools/lib/launch.sh): several of them steer C2 away from compiling the kernels
 * into code that boxes vectors, so a flag missing on one side would make the tests and the product compile differently.
 */
class LauncherFlagsTest {
    private static final Path ROOT = Paths.get(System.getenv().getOrDefault("TNSR_REPO_ROOT", ".."));

    @Test
    void theLaunchersPassEveryJvmFlagTheTestsRunWith() throws IOException {
        Matcher pom = Pattern.compile("<tnsr\\.jvm\\.flags>([^<]*)</tnsr\\.jvm\\.flags>")
                .matcher(Files.readString(ROOT.resolve("pom.xml")));
        assertTrue(pom.find(), "pom.xml defines tnsr.jvm.flags");
        Matcher launch = Pattern.compile("(?s)JVM_FLAGS=\\((.*?)\\)\n").matcher(Files.readString(ROOT.resolve("tools/lib/launch.sh")));
        assertTrue(launch.find(), "tools/lib/launch.sh sets JVM_FLAGS=(...)");
        List<String> launcher = Arrays.asList(launch.group(1).trim().split("\\s+"));
        // A file of the repository: the tests name it from their module (${project.basedir}/..), the launchers from $ROOT.
        List<String> flags = Arrays.stream(pom.group(1).trim().split("\\s+")).filter(f -> !f.startsWith("${"))
                .map(f -> f.replace("${project.basedir}/..", "$ROOT")).toList();
        assertTrue(flags.contains("-XX:PerMethodTrapLimit=10000"), "the tests' flags: " + flags);
        assertTrue(flags.contains("-XX:CompileCommandFile=$ROOT/tools/lib/vector-helpers.compile"), "the tests' flags: " + flags);
        for (int i = 0; i < flags.size(); i++) {
            String f = flags.get(i);
            if (f.startsWith("--add-") && i + 1 < flags.size()) { // an option and its value
                String value = flags.get(i + 1);
                boolean pair = false;
                for (int j = 0; j + 1 < launcher.size(); j++) {
                    pair |= launcher.get(j).equals(f) && launcher.get(j + 1).equals(value);
                }
                assertTrue(pair, "tools/lib/launch.sh lacks " + f + " " + value);
                i++;
            } else {
                assertTrue(launcher.contains(f), "tools/lib/launch.sh lacks " + f + " (its JVM_FLAGS: " + launcher + ")");
            }
        }
    }

    @Test
    void theTestsRunWithTheTrapLimitTheKernelsNeed() {
        List<String> args = ManagementFactory.getRuntimeMXBean().getInputArguments();
        assertTrue(args.contains("-XX:PerMethodTrapLimit=10000"), "this test JVM's options: " + args);
        // The JVM ignores a CompileCommandFile it cannot open, without a word: check that the path names the file.
        String file = args.stream().filter(a -> a.startsWith("-XX:CompileCommandFile=")).findFirst()
                .map(a -> a.substring("-XX:CompileCommandFile=".length())).orElse(null);
        assertTrue(file != null && Files.isRegularFile(Paths.get(file))
                && file.endsWith("tools/lib/vector-helpers.compile"), "this test JVM's options: " + args);
    }

    /**
     * Every line of the inlining file names a method that exists: a renamed helper or kernel would drop out silently.
     */
    @Test
    void theInliningFileNamesMethodsThatExist() throws Exception {
        List<String> lines = Files.readAllLines(ROOT.resolve("tools/lib/vector-helpers.compile"));
        int commands = 0;
        for (String line : lines) {
            if (line.isBlank() || line.startsWith("#")) {
                continue;
            }
            String[] parts = line.trim().split("\\s+");
            assertTrue(parts[0].equals("inline") || parts[0].equals("dontinline"), line);
            String[] target = parts[1].split("::");
            Class<?> owner = Class.forName(target[0], false, getClass().getClassLoader());
            // A helper that returns a vector, or a one-token kernel (m1...) inlined into its class's panel loop or kept
            // out of it; only a kernel is kept out of line (a helper that takes or returns vectors would box them).
            boolean kernel = target[1].startsWith("m1") && Arrays.stream(owner.getDeclaredMethods())
                    .anyMatch(m -> m.getName().equals("wholePanels"));
            boolean found = Arrays.stream(owner.getDeclaredMethods()).anyMatch(m -> m.getName().equals(target[1])
                    && (kernel || parts[0].equals("inline")
                            && jdk.incubator.vector.Vector.class.isAssignableFrom(m.getReturnType())));
            assertTrue(found, target[0] + " has no method " + target[1] + " that returns a vector, nor a kernel of that name"
                    + " beside a wholePanels loop (" + line + ")");
            commands++;
        }
        assertTrue(commands > 10, "commands read: " + commands);
    }
}
