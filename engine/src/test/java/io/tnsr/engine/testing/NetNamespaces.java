package io.tnsr.engine.testing;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * A small network of separate hosts for tests, built from Linux network namespaces, so that processes which talk TCP
 * (pipeline stages, a coordinator) can be placed on different addresses and have their links cut or made lossy
 * without touching the machine's own network.
 *
 * <pre>{@code
 * try (NetNamespaces net = NetNamespaces.createOrSkip("MyTest", 3)) {   // skips (or, in CI, fails) without root/ip
 *     Process server = net.start(0, List.of("java", ..., "--listen", net.address(0) + ":7000"), dir.resolve("s.log"));
 *     net.cut(0);          // host 0 is unreachable, and reaches no one
 *     net.restore(0);
 *     net.loss(0, 30);     // 30% of the packets on host 0's link are dropped (tc netem)
 * }
 * }</pre>
 *
 * <p>Topology: a star. A hub namespace holds a bridge ({@code br0}); each host namespace has an {@code eth0} with
 * address {@link #address(int) 10.213.P.(10+i)/24} whose veth peer ({@code h<i>}) sits in the hub, attached to the
 * bridge, and its loopback up. {@link #cut} takes the hub-side end down and {@link #loss} puts a netem qdisc on both
 * ends, so a fault acts on that one host's link only; {@code loss} needs the kernel's netem, which not every kernel has
 * (it throws {@link UnsupportedOperationException} then). The /24 is derived from the pid, so concurrent test JVMs
 * usually use different subnets; since every address lives inside a namespace, the subnet never appears in the root
 * namespace, which is only touched to create and delete the namespaces: test traffic can reach no real interface and
 * no real host.
 *
 * <p>Names: {@code tn<pid>-<n>h} for the hub and {@code tn<pid>-<n>-<i>} for host {@code i} of this JVM's
 * {@code n}-th network. {@link #close()} (also run by a shutdown hook) kills the processes started through
 * {@link #start} and deletes the namespaces; namespaces of this scheme whose JVM is gone (a killed test run) are
 * deleted by the next {@link #create}.
 *
 * <p>Every {@code ip}/{@code tc} call is bounded by {@value #COMMAND_TIMEOUT_SECONDS} s, and one that fails or runs
 * over throws an {@link IllegalStateException} naming the command and its stderr.
 */
public final class NetNamespaces implements AutoCloseable {
    private static final long COMMAND_TIMEOUT_SECONDS = 10;
    private static final long PID = ProcessHandle.current().pid();
    /** Our namespace names: {@code tn<pid>-} then a network's hub or host, or the availability probe. */
    private static final Pattern NAME = Pattern.compile("tn(\\d+)-(probe|\\d+h|\\d+-\\d+)");
    private static final AtomicInteger NETWORKS = new AtomicInteger();
    private static final String BRIDGE = "br0";
    private static final String HOST_IF = "eth0";

    private final String tag;
    private final String hub;
    private final List<String> hosts;
    private final String subnetPrefix;
    private final List<Process> started = new ArrayList<>();
    private final List<String> created = new ArrayList<>();
    private final Set<Integer> lossy = new HashSet<>();
    private final Thread shutdownHook;
    private boolean closed;

    private NetNamespaces(String tag, int hosts) {
        this.tag = tag;
        int n = NETWORKS.getAndIncrement();
        this.hub = "tn" + PID + "-" + n + "h";
        List<String> names = new ArrayList<>();
        for (int i = 0; i < hosts; i++) {
            names.add("tn" + PID + "-" + n + "-" + i);
        }
        this.hosts = List.copyOf(names);
        this.subnetPrefix = "10.213." + (PID % 250) + ".";
        this.shutdownHook = new Thread(this::close, "NetNamespaces-close-" + hub);
    }

    /**
     * A network of {@code hosts} hosts, or a skipped test (a failed one with {@code CI=true}) when namespaces cannot
     * be made here; the reason is also printed to stderr.
     *
     * @param tag names the caller in messages (the test class, say)
     */
    public static NetNamespaces createOrSkip(String tag, int hosts) {
        Optional<String> why = unavailable();
        if (why.isEmpty()) {
            return create(tag, hosts);
        }
        String msg = "network namespaces for " + tag + " unavailable (" + why.get() + "); run the tests as root on"
                + " Linux with iproute2";
        return Prerequisites.missing(msg, "unavailable namespaces are a failure");
    }

    /**
     * A network of {@code hosts} hosts (1 to 240); throws if namespaces are {@link #unavailable()} or it cannot be
     * built. Deletes stale namespaces of this naming scheme first.
     */
    public static NetNamespaces create(String tag, int hosts) {
        if (hosts < 1 || hosts > 240) {
            throw new IllegalArgumentException("hosts must be 1..240, got " + hosts);
        }
        Optional<String> why = unavailable();
        if (why.isPresent()) {
            throw new IllegalStateException("network namespaces unavailable: " + why.get());
        }
        removeStale();
        NetNamespaces net = new NetNamespaces(tag, hosts);
        Runtime.getRuntime().addShutdownHook(net.shutdownHook);
        try {
            net.build();
        } catch (RuntimeException e) {
            try {
                net.close();
            } catch (RuntimeException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw e;
        }
        return net;
    }

    /**
     * Why network namespaces cannot be used here (not root, no {@code ip}, or making a namespace with a bridge and a
     * veth pair fails), else empty. Probed once per JVM.
     */
    public static Optional<String> unavailable() {
        return Probe.REASON;
    }

    /** Host {@code host}'s address, e.g. {@code 10.213.17.10} for host 0. */
    public String address(int host) {
        Objects.checkIndex(host, hosts.size());
        return subnetPrefix + (10 + host);
    }

    /** The hosts' subnet, e.g. {@code 10.213.17.0/24}. */
    public String subnet() {
        return subnetPrefix + "0/24";
    }

    /** How many hosts. */
    public int hosts() {
        return hosts.size();
    }

    /** Host {@code host}'s namespace name. */
    public String namespace(int host) {
        Objects.checkIndex(host, hosts.size());
        return hosts.get(host);
    }

    /** Every namespace of this network: the hub, then the hosts in order. */
    public List<String> namespaces() {
        return Stream.concat(Stream.of(hub), hosts.stream()).toList();
    }

    /**
     * {@code cmd} run in host {@code host}'s namespace: {@code ip netns exec <ns> cmd...}. A process started from it
     * is the caller's to stop (one left running keeps the namespace's network alive after {@link #close()}).
     */
    public List<String> command(int host, List<String> cmd) {
        List<String> full = new ArrayList<>(List.of(Tools.IP, "netns", "exec", namespace(host)));
        full.addAll(cmd);
        return full;
    }

    /**
     * Starts {@code cmd} in host {@code host}'s namespace, its stdout and stderr appended to {@code log}, or inherited
     * when {@code log} is null (under surefire, prefer a log: the fork's stdout is its channel to Maven). The process
     * (and its descendants) is killed by {@link #close()}.
     */
    public synchronized Process start(int host, List<String> cmd, Path log) {
        checkOpen();
        ProcessBuilder pb = new ProcessBuilder(command(host, cmd)).redirectErrorStream(true)
                .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        pb.redirectOutput(log == null ? ProcessBuilder.Redirect.INHERIT : ProcessBuilder.Redirect.appendTo(log.toFile()));
        try {
            Process p = pb.start();
            started.add(p);
            return p;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot start " + pb.command(), e);
        }
    }

    /** Takes host {@code host}'s link down (its veth on the hub side): it reaches no one and no one reaches it. */
    public synchronized void cut(int host) {
        checkOpen();
        run(Tools.IP, "-n", hub, "link", "set", hubIf(host), "down");
    }

    /** Brings host {@code host}'s link back up after {@link #cut}. */
    public synchronized void restore(int host) {
        checkOpen();
        run(Tools.IP, "-n", hub, "link", "set", hubIf(host), "up");
    }

    /**
     * Drops {@code percent} % of the packets in each direction of host {@code host}'s link (tc netem on both ends of
     * its veth); 0 removes the loss.
     *
     * @throws UnsupportedOperationException if {@code tc} or the kernel's netem qdisc is missing
     */
    public synchronized void loss(int host, int percent) {
        checkOpen();
        Objects.checkIndex(host, hosts.size());
        if (percent < 0 || percent > 100) {
            throw new IllegalArgumentException("percent must be 0..100, got " + percent);
        }
        if (percent == 0) {
            if (lossy.remove(host)) {
                run(tc(), "-n", hub, "qdisc", "del", "dev", hubIf(host), "root");
                run(tc(), "-n", namespace(host), "qdisc", "del", "dev", HOST_IF, "root");
            }
            return;
        }
        List<String> hubSide = List.of(tc(), "-n", hub, "qdisc", "replace", "dev", hubIf(host), "root", "netem",
                "loss", percent + "%");
        Result r = exec(hubSide);
        if (r.exit != 0 && r.stderr.matches("(?is).*(unknown|not supported|no such file).*")) {
            throw new UnsupportedOperationException("tc netem is not available in this kernel (CONFIG_NET_SCH_NETEM,"
                    + " module sch_netem): " + describe(hubSide, r));
        }
        check(hubSide, r);
        lossy.add(host);
        run(tc(), "-n", namespace(host), "qdisc", "replace", "dev", HOST_IF, "root", "netem", "loss", percent + "%");
    }

    /** Kills the processes started through {@link #start} and deletes the namespaces; again, does nothing. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        if (Thread.currentThread() != shutdownHook) {
            try {
                Runtime.getRuntime().removeShutdownHook(shutdownHook);
            } catch (IllegalStateException shuttingDown) {
                // the hook runs or has run; this is that run or a concurrent one
            }
        }
        for (Process p : started) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
        for (Process p : started) {
            try {
                p.waitFor(COMMAND_TIMEOUT_SECONDS, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        RuntimeException failure = null;
        for (String ns : created) {
            try {
                run(Tools.IP, "netns", "delete", ns);
            } catch (RuntimeException e) {
                if (failure == null) {
                    failure = e;
                } else {
                    failure.addSuppressed(e);
                }
            }
        }
        created.clear();
        if (failure != null) {
            throw failure;
        }
    }

    @Override
    public String toString() {
        return "NetNamespaces[" + tag + ", hub " + hub + ", hosts " + hosts + ", " + subnet() + "]";
    }

    private synchronized void build() {
        addNamespace(hub);
        run(Tools.IP, "-n", hub, "link", "add", BRIDGE, "type", "bridge");
        run(Tools.IP, "-n", hub, "link", "set", BRIDGE, "up");
        for (int i = 0; i < hosts.size(); i++) {
            String ns = hosts.get(i);
            addNamespace(ns);
            run(Tools.IP, "-n", hub, "link", "add", hubIf(i), "type", "veth", "peer", "name", HOST_IF, "netns", ns);
            run(Tools.IP, "-n", hub, "link", "set", hubIf(i), "master", BRIDGE, "up");
            run(Tools.IP, "-n", ns, "addr", "add", address(i) + "/24", "dev", HOST_IF);
            run(Tools.IP, "-n", ns, "link", "set", HOST_IF, "up");
            run(Tools.IP, "-n", ns, "link", "set", "lo", "up");
        }
    }

    private void addNamespace(String ns) {
        run(Tools.IP, "netns", "add", ns);
        created.add(ns);
    }

    private String hubIf(int host) {
        Objects.checkIndex(host, hosts.size());
        return "h" + host;
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException(this + " is closed");
        }
    }

    private static String tc() {
        if (Tools.TC == null) {
            throw new UnsupportedOperationException("tc (iproute2) not found on PATH, /usr/sbin or /sbin");
        }
        return Tools.TC;
    }

    /** Deletes namespaces named by this scheme whose JVM no longer runs; best effort. */
    private static void removeStale() {
        for (String line : run(Tools.IP, "netns", "list").split("\n")) {
            String ns = line.trim().split("\\s+")[0];
            Matcher m = NAME.matcher(ns);
            if (!m.matches()) {
                continue;
            }
            long pid = Long.parseLong(m.group(1));
            if (pid == PID || ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false)) {
                continue;
            }
            try {
                run(Tools.IP, "netns", "delete", ns);
                System.err.println("NetNamespaces: deleted stale namespace " + ns + " (pid " + pid + " is gone)");
            } catch (RuntimeException e) {
                System.err.println("NetNamespaces: could not delete stale namespace " + ns + ": " + e.getMessage());
            }
        }
    }

    /** Runs {@code cmd} in the root namespace within the time bound; its stdout, or an exception naming it. */
    static String run(String... cmd) {
        List<String> c = List.of(cmd);
        Result r = exec(c);
        check(c, r);
        return r.stdout;
    }

    private static void check(List<String> cmd, Result r) {
        if (r.exit != 0) {
            throw new IllegalStateException(describe(cmd, r));
        }
    }

    private static String describe(List<String> cmd, Result r) {
        return "'" + String.join(" ", cmd) + "' " + (r.exit == Result.TIMED_OUT
                ? "did not finish within " + COMMAND_TIMEOUT_SECONDS + " s" : "exited " + r.exit)
                + (r.stderr.isBlank() ? "" : ": " + r.stderr.strip());
    }

    private record Result(int exit, String stdout, String stderr) {
        static final int TIMED_OUT = Integer.MIN_VALUE;
    }

    /** Runs {@code cmd} with its output in files (no pipe to fill up while it is waited for) and a time bound. */
    private static Result exec(List<String> cmd) {
        Path out = null;
        Path err = null;
        try {
            out = Files.createTempFile("netns-out", ".txt");
            err = Files.createTempFile("netns-err", ".txt");
            Process p = new ProcessBuilder(cmd).redirectOutput(out.toFile()).redirectError(err.toFile())
                    .redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null"))).start();
            int exit;
            if (p.waitFor(COMMAND_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
                exit = p.exitValue();
            } else {
                p.destroyForcibly();
                exit = Result.TIMED_OUT;
            }
            return new Result(exit, Files.readString(out, StandardCharsets.UTF_8), Files.readString(err, StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot run " + cmd, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted while running " + cmd, e);
        } finally {
            for (Path f : new Path[] {out, err}) {
                if (f != null) {
                    try {
                        Files.deleteIfExists(f);
                    } catch (IOException ignored) {
                        // a temporary file left behind
                    }
                }
            }
        }
    }

    /** Where {@code ip} and {@code tc} are: PATH, then the sbin directories a non-login root shell may lack. */
    private static final class Tools {
        static final String IP = find("ip");
        static final String TC = find("tc");

        private static String find(String name) {
            List<String> dirs = new ArrayList<>();
            String path = System.getenv("PATH");
            if (path != null) {
                dirs.addAll(List.of(path.split(File.pathSeparator)));
            }
            dirs.addAll(List.of("/usr/sbin", "/sbin", "/usr/bin", "/bin"));
            return dirs.stream().filter(d -> !d.isEmpty()).map(d -> Paths.get(d, name))
                    .filter(Files::isExecutable).map(Path::toString).findFirst().orElse(null);
        }
    }

    /** Whether namespaces work here: root, {@code ip}, and a namespace holding a bridge and a veth pair. */
    private static final class Probe {
        static final Optional<String> REASON = probe();

        private static Optional<String> probe() {
            if (!System.getProperty("os.name", "").toLowerCase().contains("linux")) {
                return Optional.of("not Linux");
            }
            try {
                if (!isRoot()) {
                    return Optional.of("not root");
                }
            } catch (IOException | RuntimeException e) {
                return Optional.of("cannot tell whether this is root: " + e);
            }
            if (Tools.IP == null) {
                return Optional.of("ip (iproute2) not found on PATH, /usr/sbin or /sbin");
            }
            String ns = "tn" + PID + "-probe";
            try {
                run(Tools.IP, "netns", "add", ns);
            } catch (RuntimeException e) {
                return Optional.of("ip netns add fails: " + e.getMessage());
            }
            try {
                run(Tools.IP, "-n", ns, "link", "add", BRIDGE, "type", "bridge");
                run(Tools.IP, "-n", ns, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1");
                return Optional.empty();
            } catch (RuntimeException e) {
                return Optional.of("a bridge or veth pair cannot be made: " + e.getMessage());
            } finally {
                try {
                    run(Tools.IP, "netns", "delete", ns);
                } catch (RuntimeException e) {
                    System.err.println("NetNamespaces: could not delete probe namespace " + ns + ": " + e.getMessage());
                }
            }
        }

        /** The effective uid, from {@code /proc/self/status} ({@code Uid: real effective saved fs}). */
        private static boolean isRoot() throws IOException {
            for (String line : Files.readAllLines(Paths.get("/proc/self/status"))) {
                if (line.startsWith("Uid:")) {
                    return line.substring(4).trim().split("\\s+")[1].equals("0");
                }
            }
            throw new IOException("no Uid line in /proc/self/status");
        }
    }
}
