package io.tnsr.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

/**
 * Pins a benchmark's processes to chosen CPUs with {@code taskset}: every thread of a process, JIT and GC threads
 * included, and every process it starts afterwards inherits the mask.
 *
 * <p>Why: the two vCPUs of the VMs we measure on are not equal, and which one is slower changes every few minutes.
 * On a 2-vCPU AMD EPYC (Zen 5) guest, Q4_0 decode read 358-394 tokens/s on one vCPU and 214-276 on the other in
 * the same minutes, and the other way round ten minutes later; llama.cpp's {@code llama-bench} moved 15-23% the
 * same way (docs/benchmarks.md). A benchmark left to the scheduler lands on either, which reads as
 * a spread from process to process; two tools compared side by side must run on the same CPUs.
 */
public final class CpuPin {
    private static final Path TASKSET = Path.of("/usr/bin/taskset");

    private CpuPin() {
    }

    /** Whether this machine can pin ({@code /usr/bin/taskset} and {@code /proc}: Linux). */
    public static boolean available() {
        return Files.isExecutable(TASKSET) && Files.isReadable(Path.of("/proc/self/status"));
    }

    /**
     * The CPUs this process may run on, ascending ({@code Cpus_allowed_list} of its /proc status), or every CPU
     * number below {@link Runtime#availableProcessors} where that cannot be read.
     */
    public static List<Integer> allowed() {
        try {
            return allowedOf(ProcessHandle.current().pid());
        } catch (IOException | IllegalArgumentException e) {
            List<Integer> all = new ArrayList<>(); // no /proc here
            for (int i = 0; i < Runtime.getRuntime().availableProcessors(); i++) {
                all.add(i);
            }
            return all;
        }
    }

    /** The CPUs process {@code pid} may run on (its main thread's), from /proc; an IOException when it is gone. */
    static List<Integer> allowedOf(long pid) throws IOException {
        try {
            for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"), StandardCharsets.UTF_8)) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    return parseList(line.substring(line.indexOf(':') + 1).trim());
                }
            }
        } catch (java.nio.file.NoSuchFileException e) {
            throw new IOException("process " + pid + " is not running: nothing to pin");
        }
        throw new IOException("process " + pid + ": no Cpus_allowed_list in /proc/" + pid + "/status");
    }

    /**
     * What a {@code --cpu} option names, as a list for taskset, or null for {@code none}: {@code last} is the last
     * {@code count} of the {@link #allowed} CPUs; otherwise a list as taskset takes it ({@code 1}, {@code 0,1},
     * {@code 0-3}), each CPU one this process may run on.
     *
     * @throws IllegalArgumentException naming the value and what is allowed
     */
    public static String resolve(String value, int count) {
        List<Integer> allowed = allowed();
        String v = value.trim().toLowerCase(Locale.ROOT);
        if (v.equals("none")) {
            return null;
        }
        if (v.equals("last")) {
            return join(allowed.subList(Math.max(0, allowed.size() - count), allowed.size()));
        }
        List<Integer> cpus;
        try {
            cpus = parseList(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("'" + value + "' is not none, last or a CPU list such as 1, 0,1 or 0-3");
        }
        for (int c : cpus) {
            if (!allowed.contains(c)) {
                throw new IllegalArgumentException("CPU " + c + " of '" + value + "' is not one this process may run on ("
                        + join(allowed) + ")");
            }
        }
        return join(cpus);
    }

    /** The CPUs of a taskset list ({@code 0-2,5}), ascending and without repeats. */
    public static List<Integer> parseList(String list) {
        if (!list.matches("\\d+(-\\d+)?(,\\d+(-\\d+)?)*")) {
            throw new IllegalArgumentException("not a CPU list: '" + list + "'");
        }
        TreeSet<Integer> cpus = new TreeSet<>();
        for (String part : list.split(",")) {
            int dash = part.indexOf('-');
            int from = Integer.parseInt(dash < 0 ? part : part.substring(0, dash));
            int to = dash < 0 ? from : Integer.parseInt(part.substring(dash + 1));
            if (to < from || to > 4095) {
                throw new IllegalArgumentException("not a CPU range: '" + part + "'");
            }
            for (int c = from; c <= to; c++) {
                cpus.add(c);
            }
        }
        return new ArrayList<>(cpus);
    }

    /** Comma-separated. */
    public static String join(List<Integer> cpus) {
        StringBuilder sb = new StringBuilder();
        for (int c : cpus) {
            sb.append(sb.length() == 0 ? "" : ",").append(c);
        }
        return sb.toString();
    }

    /**
     * Pins every thread of process {@code pid} to {@code cpus} ({@code taskset -a -p -c}); waits at most ten
     * seconds.
     *
     * @throws IOException naming the process and what taskset said, when it fails or does not finish
     */
    public static void pin(long pid, String cpus) throws IOException {
        Process p = new ProcessBuilder(TASKSET.toString(), "-a", "-p", "-c", cpus, Long.toString(pid))
                .redirectErrorStream(true).start();
        try {
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                throw new IOException("taskset did not pin process " + pid + " to CPUs " + cpus + " within 10 s");
            }
            String said = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (p.exitValue() != 0) {
                throw new IOException("taskset could not pin process " + pid + " to CPUs " + cpus + ": " + said);
            }
            List<Integer> now = allowedOf(pid); // taskset -a succeeds on a process that is gone: check
            if (!now.equals(parseList(cpus))) {
                throw new IOException("process " + pid + " runs on CPUs " + join(now) + " after taskset, not " + cpus);
            }
        } catch (InterruptedException e) {
            p.destroyForcibly();
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while pinning process " + pid);
        }
    }
}
