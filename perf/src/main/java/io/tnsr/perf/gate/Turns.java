package io.tnsr.perf.gate;

import io.tnsr.perf.JmhUnits;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.io.Writer;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.openjdk.jmh.infra.IterationParams;
import org.openjdk.jmh.profile.InternalProfiler;
import org.openjdk.jmh.profile.ProfilerException;
import org.openjdk.jmh.results.IterationResult;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.util.Statistics;

/**
 * A JMH profiler that makes a benchmark fork take turns with the forks of other builds: before each iteration it
 * asks the perf gate for its turn and waits, after it reports the iteration's figures. The gate runs the same
 * benchmark in the reference build and in the tree under test at once, both pinned to one CPU, and lets them run
 * their iterations alternately, A B B A A B ..., so that iteration i of each is measured within a second of the
 * other and the host's drift (memory bandwidth here moves from second to second) hits both alike.
 *
 * <p>Used as {@code -prof io.tnsr.perf.gate.Turns:port=PORT;name=NAME}. Line protocol over a loopback socket to
 * {@code PORT}, one connection per fork:
 * <pre>
 *   fork: hello NAME PID            once, before the first iteration
 *   fork: ready warmup|measurement  before every iteration
 *   gate: go
 *   fork: done P50_NS P99_NS        after it: the iteration's median and 99th percentile per operation
 *                                   (its mean twice in average-time mode)
 * </pre>
 * A fork whose gate stops answering gives up after {@link #WAIT_MILLIS} and fails, so nothing waits forever.
 */
public final class Turns implements InternalProfiler {
    /** The longest a fork waits for its turn. */
    static final int WAIT_MILLIS = 900_000;

    private final int port;
    private final String name;
    private Socket socket;
    private BufferedReader in;
    private Writer out;

    public Turns(String options) throws ProfilerException {
        int p = -1;
        String n = null;
        for (String kv : (options == null ? "" : options).split(";")) {
            String[] x = kv.split("=", 2);
            if (x.length == 2 && x[0].strip().equals("port")) {
                try {
                    p = Integer.parseInt(x[1].strip());
                } catch (NumberFormatException e) {
                    throw new ProfilerException("Turns: port must be a number, got '" + x[1] + "'");
                }
            } else if (x.length == 2 && x[0].strip().equals("name")) {
                n = x[1].strip();
            }
        }
        if (p <= 0 || n == null || n.isEmpty() || n.contains(" ")) {
            throw new ProfilerException("Turns needs port=PORT;name=NAME (no spaces), got '" + options + "'");
        }
        port = p;
        name = n;
    }

    @Override
    public String getDescription() {
        return "takes turns with other forks, iteration by iteration (tools/perf-gate)";
    }

    @Override
    public void beforeIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams) {
        try {
            if (socket == null) {
                socket = new Socket();
                socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 30_000);
                socket.setSoTimeout(WAIT_MILLIS);
                socket.setTcpNoDelay(true);
                in = new BufferedReader(new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
                out = new OutputStreamWriter(socket.getOutputStream(), StandardCharsets.US_ASCII);
                send("hello " + name + " " + ProcessHandle.current().pid());
            }
            send(iterationParams.getType() == org.openjdk.jmh.runner.IterationType.WARMUP ? "ready warmup" : "ready measurement");
            String line = in.readLine();
            if (!"go".equals(line)) {
                throw new IOException("expected go from the perf gate, got " + line);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("Turns: " + e.getMessage(), e);
        }
    }

    @Override
    public Collection<? extends Result> afterIteration(BenchmarkParams benchmarkParams, IterationParams iterationParams,
                                                       IterationResult result) {
        Result<?> primary = result.getPrimaryResult();
        double unit = JmhUnits.nanosPer(primary.getScoreUnit());
        Statistics s = primary.getStatistics();
        try {
            send(String.format(Locale.ROOT, "done %.6g %.6g", s.getPercentile(50) * unit, s.getPercentile(99) * unit));
        } catch (IOException e) {
            throw new UncheckedIOException("Turns: " + e.getMessage(), e);
        }
        return List.of();
    }

    private void send(String line) throws IOException {
        out.write(line);
        out.write('\n');
        out.flush();
    }
}
