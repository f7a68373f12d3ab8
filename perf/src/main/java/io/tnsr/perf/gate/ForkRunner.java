package io.tnsr.perf.gate;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.tnsr.perf.CpuPin;
import io.tnsr.perf.JmhUnits;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.openjdk.jmh.annotations.Mode;

/**
 * Runs the gate's probes as processes of each build's own launchers and reads their {@link Sample}s:
 * <ul>
 * <li>JMH probes of several builds at once ({@link #together}): {@code ROOT/tools/jmh -f 1 -wi W -i I ... -prof gc
 * -prof io.tnsr.perf.gate.Turns:port=P;name=N -rf json -rff FILE ^benchmark$} in each build (its own JVM flags from
 * its launcher, plus {@code TNSR_JAVA_OPTS}, inherited). Each fork says hello, is pinned to one CPU with all its
 * threads, and then runs its iterations only when given the turn ({@link Turns}): one iteration of each fork in
 * turn, the order reversed every other iteration, so that iteration i of every fork is measured within a second
 * or two of the others;</li>
 * <li>a pipeline probe ({@link #pipeline}): {@code ROOT/tools/pipeline-bench --scenarios LAYOUT --type TYPE --repeats 1 --json},
 * not pinned (its stage processes need every CPU).</li>
 * </ul>
 * Every wait has a bound; a process that outlives its bound is killed with its children. Output goes to one log
 * file per process.
 */
public final class ForkRunner {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern UNSAFE = Pattern.compile("[^A-Za-z0-9.=,_-]+");
    /** From start to the first iteration: JVM start, the benchmark's setup (the first run also writes its model files). */
    private static final int STARTUP_SECONDS = 300;

    /** Iteration counts and length of every JMH fork. */
    public record Settings(int warmupIterations, int measurementIterations, int iterationMillis) {
        /** What the gate uses. */
        public static final Settings GATE = new Settings(3, 4, 200);
        /** For trying things out ({@code --quick}): rougher figures. */
        public static final Settings QUICK = new Settings(2, 2, 150);
    }

    /** Where a build lives: its root holds {@code tools/} and the built modules. */
    public record Build(String name, Path root) {
    }

    /** One fork to run: a probe in a build, under a name unique among the forks run together. */
    public record Fork(String name, Build build, Probe.Jmh probe) {
    }

    private final Settings settings;
    private final Path logDir;
    private final int cpu;
    private int count;

    /**
     * @param cpu the CPU every JMH fork is pinned to once it has started, or -1 to leave them to the scheduler
     */
    public ForkRunner(Settings settings, Path logDir, int cpu) throws IOException {
        this.settings = settings;
        this.logDir = Files.createDirectories(logDir);
        try (Stream<Path> old = Files.list(logDir)) { // one run's logs at a time: the last run's go
            for (Path f : old.filter(f -> f.getFileName().toString().matches("\\d{3}-.*\\.log")).toList()) {
                Files.delete(f);
            }
        }
        if (cpu >= 0 && !CpuPin.available()) {
            io.tnsr.engine.util.ConsoleLog.show("perf-gate: no /usr/bin/taskset: benchmark JVMs are not pinned (expect more spread)");
            cpu = -1;
        }
        this.cpu = cpu;
    }

    public Settings settings() {
        return settings;
    }

    /** One live fork: its process, and once it has said hello, its connection. */
    private static final class Live {
        final Fork fork;
        final Process process;
        final Path log;
        final Path json;
        BufferedReader in;
        Writer out;
        Socket socket;
        String error;
        final List<Double> p50 = new ArrayList<>();
        final List<Double> p99 = new ArrayList<>();

        Live(Fork fork, Process process, Path log, Path json) {
            this.fork = fork;
            this.process = process;
            this.log = log;
            this.json = json;
        }

        boolean turning() {
            return in != null && error == null;
        }
    }

    /** Forks started and not yet measured: {@link #run} measures them. */
    public final class Batch {
        private final List<Fork> forks;
        private final List<Live> live = new ArrayList<>();
        private final ServerSocket server;
        private String error;

        private Batch(List<Fork> forks) {
            this.forks = List.copyOf(forks);
            ServerSocket s = null;
            try {
                s = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
                for (Fork f : forks) {
                    live.add(start(f, s.getLocalPort()));
                }
            } catch (IOException e) {
                error = "cannot start the forks: " + e.getMessage();
            }
            server = s;
        }

        /**
         * Lets the forks say hello (pinning each to the measuring CPU), runs their iterations in turns (see the class
         * comment), and returns their samples in the order of the forks. A fork that fails or lacks its benchmark
         * yields a failed sample; the others go on.
         */
        public List<Sample> run() {
            if (error == null) {
                try (ServerSocket s = server) {
                    connect(s, live);
                    int itMillis = settings.iterationMillis() * forks.get(0).probe().iterationScale();
                    for (int iteration = 0; live.stream().anyMatch(Live::turning); iteration++) {
                        List<Live> order = new ArrayList<>(live);
                        if (iteration % 2 == 1) {
                            Collections.reverse(order);
                        }
                        for (Live l : order) {
                            if (l.turning()) {
                                turn(l, itMillis);
                            }
                        }
                    }
                } catch (IOException e) {
                    error = e.getMessage();
                }
            }
            List<Sample> out = new ArrayList<>();
            for (Live l : live) {
                if (error != null && l.error == null) {
                    l.error = "perf-gate: " + error;
                }
                out.add(finish(l));
            }
            while (out.size() < forks.size()) {
                out.add(Sample.failed("perf-gate: " + error));
            }
            return out;
        }
    }

    /** Starts {@code forks} (see {@link Batch}); run them with {@link Batch#run()}. */
    public Batch start(List<Fork> forks) {
        return new Batch(forks);
    }

    /** Starts and runs {@code forks} at once: {@code start(forks).run()}. */
    public List<Sample> together(List<Fork> forks) {
        return start(forks).run();
    }

    private Live start(Fork f, int port) throws IOException {
        count++;
        Path log = logDir.resolve(String.format(Locale.ROOT, "%03d-%s-%s.log", count, UNSAFE.matcher(f.name()).replaceAll("_"),
                UNSAFE.matcher(f.probe().key()).replaceAll("_")));
        Path json = Path.of(log.toString().replaceAll("\\.log$", ".json"));
        Files.deleteIfExists(json);
        Probe.Jmh p = f.probe();
        int it = settings.iterationMillis() * p.iterationScale();
        List<String> cmd = new ArrayList<>(List.of(f.build().root().resolve("tools").resolve("jmh").toString(), "-f", "1",
                "-wi", Integer.toString(settings.warmupIterations()), "-w", it + "ms",
                "-i", Integer.toString(settings.measurementIterations()), "-r", it + "ms",
                "-bm", p.mode().shortLabel(), "-tu", "ns", "-foe", "true", "-to", "2min",
                "-prof", "gc", "-prof", Turns.class.getName() + ":port=" + port + ";name=" + f.name(),
                "-rf", "json", "-rff", json.toString()));
        for (Map.Entry<String, String> e : p.params().entrySet()) {
            cmd.add("-p");
            cmd.add(e.getKey() + "=" + e.getValue());
        }
        cmd.add("^" + Pattern.quote(p.benchmark()) + "$");
        Files.writeString(log, "# " + String.join(" ", cmd) + "\n");
        ProcessBuilder pb = new ProcessBuilder(cmd).directory(f.build().root().toFile()).redirectErrorStream(true)
                .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()));
        // Several JMH hosts at once, by design: JMH's lock file would let only one run.
        pb.environment().merge("TNSR_JAVA_OPTS", "-Djmh.ignoreLock=true", (a, b) -> a + " " + b);
        return new Live(f, pb.start(), log, json);
    }

    /** Waits until every fork has said hello (pinning each) or ended; bounded by {@link #STARTUP_SECONDS}. */
    private void connect(ServerSocket server, List<Live> live) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(STARTUP_SECONDS);
        server.setSoTimeout(500);
        while (true) {
            boolean waiting = false;
            for (Live l : live) {
                if (l.in == null && l.error == null) {
                    if (!l.process.isAlive()) {
                        l.error = "exit status " + l.process.exitValue() + " before its first iteration: " + telling(l.log)
                                + " (log: " + l.log + ")";
                    } else {
                        waiting = true;
                    }
                }
            }
            if (!waiting) {
                return;
            }
            if (System.nanoTime() > deadline) {
                for (Live l : live) {
                    if (l.in == null && l.error == null) {
                        l.error = "no first iteration within " + STARTUP_SECONDS + " s (log: " + l.log + ")";
                    }
                }
                return;
            }
            Socket s;
            try {
                s = server.accept();
            } catch (SocketTimeoutException e) {
                continue;
            }
            s.setTcpNoDelay(true);
            s.setSoTimeout(STARTUP_SECONDS * 1000);
            BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.US_ASCII));
            String[] hello = String.valueOf(in.readLine()).split(" ");
            Live l = hello.length == 3 && hello[0].equals("hello")
                    ? live.stream().filter(x -> x.fork.name().equals(hello[1])).findFirst().orElse(null) : null;
            if (l == null || l.in != null) {
                s.close();
                continue;
            }
            l.socket = s;
            l.in = in;
            l.out = new OutputStreamWriter(s.getOutputStream(), StandardCharsets.US_ASCII);
            if (cpu >= 0) {
                pin(hello[2]);
            }
        }
    }

    /**
     * Pins every thread of the process to {@link #cpu} ({@link CpuPin}): JIT and GC threads too. A fork that cannot be
     * pinned runs unpinned, and says so.
     */
    private void pin(String pid) {
        try {
            CpuPin.pin(Long.parseLong(pid), Integer.toString(cpu));
        } catch (IOException | NumberFormatException e) {
            io.tnsr.engine.util.ConsoleLog.show("perf-gate: a benchmark JVM runs unpinned: " + e.getMessage());
        }
    }

    /** One iteration of {@code l}: wait for its "ready", let it go, read its figures. */
    private static void turn(Live l, int itMillis) {
        try {
            l.socket.setSoTimeout(STARTUP_SECONDS * 1000);
            String ready = l.in.readLine();
            if (ready == null) { // the fork has run all its iterations (or died: finish() tells which)
                l.in = null;
                return;
            }
            boolean measured = ready.equals("ready measurement");
            l.out.write("go\n");
            l.out.flush();
            l.socket.setSoTimeout(itMillis + 180_000);
            String done = l.in.readLine();
            String[] d = done == null ? new String[0] : done.split(" ");
            if (d.length != 3 || !d[0].equals("done")) {
                l.error = "the fork stopped in an iteration: " + telling(l.log) + " (log: " + l.log + ")";
                return;
            }
            if (measured) {
                l.p50.add(Double.parseDouble(d[1]));
                l.p99.add(Double.parseDouble(d[2]));
            }
        } catch (IOException | NumberFormatException e) {
            l.error = "lost the fork (" + e.getMessage() + "; log: " + l.log + ")";
        }
    }

    /** Waits for the process (bounded), then reads its JMH result. */
    private Sample finish(Live l) {
        try {
            if (l.socket != null) {
                l.socket.close();
            }
            if (!l.process.waitFor(l.error == null ? 120 : 5, TimeUnit.SECONDS)) {
                l.process.descendants().forEach(ProcessHandle::destroyForcibly);
                l.process.destroyForcibly();
                l.process.waitFor(10, TimeUnit.SECONDS);
                if (l.error == null) {
                    l.error = "did not end after its last iteration, killed (log: " + l.log + ")";
                }
            }
            if (l.error != null) {
                l.process.descendants().forEach(ProcessHandle::destroyForcibly);
                return Sample.failed(l.error);
            }
            if (l.process.exitValue() != 0 || !Files.exists(l.json)) {
                return Sample.failed("exit status " + l.process.exitValue() + ": " + telling(l.log) + " (log: " + l.log + ")");
            }
            Sample s = parseJmh(Files.readString(l.json), l.fork.probe().mode(),
                    settings.iterationMillis() * l.fork.probe().iterationScale());
            if (!s.ok()) {
                return s;
            }
            double[] p50 = l.p50.stream().mapToDouble(Double::doubleValue).toArray();
            double[] p99 = l.fork.probe().mode() == Mode.SampleTime ? l.p99.stream().mapToDouble(Double::doubleValue).toArray() : new double[0];
            return new Sample(p50.length > 0 ? median(p50) : s.time(), p99.length > 0 ? median(p99) : s.p99(), s.alloc(),
                    s.opsPerIteration(), p50, p99, null);
        } catch (IOException e) {
            return Sample.failed("cannot read the result: " + e.getMessage() + " (log: " + l.log + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            l.process.destroyForcibly();
            return Sample.failed("interrupted");
        }
    }

    /** One fork's figures from JMH's JSON result (see {@link Sample}), without the per-iteration figures. */
    static Sample parseJmh(String jmhJson, Mode mode, int iterationMillis) throws IOException {
        JsonNode all = JSON.readTree(jmhJson);
        if (!all.isArray() || all.size() != 1) {
            return Sample.failed("expected one JMH result, got " + (all.isArray() ? all.size() : "no array"));
        }
        JsonNode primary = all.get(0).path("primaryMetric");
        double unit = JmhUnits.nanosPer(primary.path("scoreUnit").asText("ns/op"));
        double time;
        double p99 = Double.NaN;
        if (mode == Mode.SampleTime) {
            time = primary.path("scorePercentiles").path("50.0").asDouble(Double.NaN) * unit;
            p99 = primary.path("scorePercentiles").path("99.0").asDouble(Double.NaN) * unit;
        } else {
            time = median(iterations(primary)) * unit;
        }
        JsonNode gc = all.get(0).path("secondaryMetrics").path("gc.alloc.rate.norm");
        // The least over the iterations: an allocation on the hot path shows in every one, a background thread's
        // periodic one (the stage's metrics log, JMH's own) in some.
        double alloc = gc.isMissingNode() ? Double.NaN : Arrays.stream(iterations(gc)).min().orElse(Double.NaN);
        if (!(time > 0)) {
            return Sample.failed("JMH result without a time");
        }
        return Sample.of(time, p99, alloc, iterationMillis * 1e6 / time);
    }

    private static double[] iterations(JsonNode metric) {
        List<Double> v = new ArrayList<>();
        for (JsonNode fork : metric.path("rawData")) {
            for (JsonNode x : fork) {
                v.add(x.asDouble());
            }
        }
        return v.stream().mapToDouble(Double::doubleValue).toArray();
    }

    /** One run of a pipeline probe in {@code build}. */
    public Sample pipeline(Build build, Probe.Pipeline p) {
        count++;
        Path log = logDir.resolve(String.format(Locale.ROOT, "%03d-%s-%s.log", count, build.name(),
                UNSAFE.matcher(p.key()).replaceAll("_")));
        List<String> cmd = List.of(build.root().resolve("tools").resolve("pipeline-bench").toString(),
                "--scenarios", p.layout(), "--type", p.type(), "--repeats", "1", "--json");
        try {
            Files.writeString(log, "# " + String.join(" ", cmd) + "\n");
            Process proc = new ProcessBuilder(cmd).directory(build.root().toFile()).redirectErrorStream(true)
                    .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile())).start();
            if (!proc.waitFor(STARTUP_SECONDS, TimeUnit.SECONDS)) {
                proc.descendants().forEach(ProcessHandle::destroyForcibly);
                proc.destroyForcibly();
                proc.waitFor(10, TimeUnit.SECONDS);
                return Sample.failed("no result within " + STARTUP_SECONDS + " s, killed (log: " + log + ")");
            }
            if (proc.exitValue() != 0) {
                return Sample.failed("exit status " + proc.exitValue() + ": " + telling(log) + " (log: " + log + ")");
            }
            for (String line : Files.readAllLines(log, StandardCharsets.UTF_8)) {
                if (line.startsWith("{")) {
                    double tps = JSON.readTree(line).path("median").asDouble(Double.NaN);
                    return tps > 0 ? Sample.of(1e9 / tps, Double.NaN, Double.NaN, Double.NaN)
                            : Sample.failed("pipeline-bench reported no decode rate (log: " + log + ")");
                }
            }
            return Sample.failed("pipeline-bench printed no JSON line (log: " + log + ")");
        } catch (IOException e) {
            return Sample.failed(e.getMessage() + " (log: " + log + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Sample.failed("interrupted");
        }
    }

    /** The log's most telling line: JMH's "No matching benchmarks" or an error if there is one, else the last. */
    static String telling(Path log) {
        List<String> lines;
        try {
            lines = Files.readAllLines(log, StandardCharsets.UTF_8).stream().map(String::strip)
                    .filter(l -> !l.isEmpty() && !l.startsWith("#")).toList();
        } catch (IOException e) {
            return "(no log: " + e.getMessage() + ")";
        }
        for (String l : lines) {
            if (l.startsWith("No matching benchmarks") || l.startsWith("ERROR") || l.contains("Exception")
                    || l.startsWith("Unknown") || l.contains("Error:")) {
                return l;
            }
        }
        return lines.isEmpty() ? "(no output)" : lines.get(lines.size() - 1);
    }

    static double median(double[] v) {
        if (v.length == 0) {
            return Double.NaN;
        }
        double[] s = v.clone();
        Arrays.sort(s);
        int n = s.length;
        return n % 2 == 1 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    }
}
