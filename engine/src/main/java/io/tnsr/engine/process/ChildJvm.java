package io.tnsr.engine.process;

import java.lang.management.ManagementFactory;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Predicate;

/**
 * The start of a command line for another JVM like this one: the same {@code java}, this JVM's options (modules,
 * flags, heap, system properties) and its class path, so that a child process (a stage, a benchmark fork) runs with
 * what the launcher gave this one. Agents and debuggers are never passed on (their ports and files are this
 * process's).
 *
 * <pre>{@code
 * List<String> cmd = ChildJvm.options(a -> a.startsWith("-Xmx")); // java + this JVM's options but its heap limit
 * cmd.add("-Xmx2g");
 * cmd.addAll(ChildJvm.classPath());
 * cmd.add(MainClass.class.getName()); ...
 * }</pre>
 */
public final class ChildJvm {
    private ChildJvm() {
    }

    /** {@code java} of this JVM, then this JVM's options except agents, debuggers and those {@code drop} accepts. */
    public static List<String> options(Predicate<String> drop) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Paths.get(System.getProperty("java.home"), "bin", "java").toString());
        for (String a : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (!a.startsWith("-agentlib") && !a.startsWith("-javaagent") && !a.startsWith("-Xrunjdwp") && !drop.test(a)) {
                cmd.add(a);
            }
        }
        return cmd;
    }

    /** {@code -cp} and this JVM's class path (the launchers' {@code tnsr.classpath}, else java.class.path). */
    public static List<String> classPath() {
        return List.of("-cp", System.getProperty("tnsr.classpath", System.getProperty("java.class.path")));
    }
}
