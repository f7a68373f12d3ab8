package io.tnsr.engine.stage;

import io.tnsr.engine.kvcache.KvCacheType;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * One stage process: {@code tools/stage} runs it as a long-lived service that serves one pipeline session after
 * another; {@code run-pipeline} starts one per stage with {@code --once} (serve one session, then exit).
 *
 * <p>It tells whoever started it how it is doing with lines on stdout: {@code LISTENING <port>} once bound,
 * {@code READY} once serving, {@code FAILED <reason>} before exiting on an error, {@code STOPPED} at a clean end.
 * Logs go to stderr. Exit status: 0 after SHUTDOWN passed through a one-session stage, 143 after a clean stop on
 * SIGTERM (as for any process the signal ends), 2 on bad options, 3 on a runtime failure, 4 when the parent process
 * died.
 */
@Command(name = "stage", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Serves one pipeline stage: a contiguous layer range of a model, between an upstream and a downstream link.",
                "Coordinators (run-pipeline, serve) reach it through a config file listing it as \"external\"; every session"
                        + " (pipeline run) starts with a handshake that checks the model fingerprint, the layer ranges, the frame"
                        + " limits and, with --key-file, the shared key."})
public final class StageMain implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "GGUF model file (the same file on every stage and the coordinator).")
    Path model;

    @Option(names = "--layers", required = true, paramLabel = "FROM:TO", description = "Layer range [FROM, TO) this stage holds.")
    String layers;

    @Option(names = "--listen", paramLabel = "HOST:PORT", description = "Address to listen on (default: 127.0.0.1:0, any free port).")
    String listen;

    @Option(names = "--key-file", paramLabel = "FILE", description = "Shared key of the pipeline; required unless listening on a loopback address.")
    Path keyFile;

    @Option(names = "--insecure", description = "Listen on a non-loopback address without a key (no authentication: anyone who can reach it can join).")
    boolean insecure;

    @Option(names = "--stage-index", defaultValue = "-1", description = "0-based position in the pipeline, checked against each session's (default: taken from the session).")
    int stageIndex;

    @Option(names = "--stage-count", defaultValue = "0", description = "Stages in the pipeline, checked against each session's.")
    int stageCount;

    @Option(names = "--host", hidden = true, description = "Address to listen on (--listen's host).")
    String host;

    @Option(names = "--port", hidden = true, defaultValue = "-1", description = "Port to listen on (--listen's port).")
    int port;

    @Option(names = "--quiet", description = "Print only warnings and failures, not the routine lines (loaded, running, session started).")
    boolean quiet;

    @Option(names = "--once", hidden = true, description = "Exit after the session that passes SHUTDOWN (run-pipeline's own stages).")
    boolean once;

    @Option(names = "--ring-size", defaultValue = "" + PipelineConfig.DEFAULT_RING_SIZE, description = "Ring slots (default: ${DEFAULT-VALUE}).")
    int ringSize;

    @Option(names = "--max-frame-bytes", defaultValue = "" + PipelineConfig.DEFAULT_MAX_FRAME_BYTES, description = "Largest frame accepted; must equal the coordinator's (default: ${DEFAULT-VALUE}).")
    int maxFrameBytes;

    @Option(names = "--max-tokens-per-frame", defaultValue = "" + PipelineConfig.DEFAULT_MAX_TOKENS_PER_FRAME, description = "Rows per frame; must equal the coordinator's (default: ${DEFAULT-VALUE}).")
    int maxTokensPerFrame;

    @Option(names = "--max-sequences-per-frame", defaultValue = "" + PipelineConfig.DEFAULT_MAX_SEQUENCES_PER_FRAME, description = "Sequences per frame; must equal the coordinator's (default: ${DEFAULT-VALUE}).")
    int maxSequencesPerFrame;

    @Option(names = "--wait", defaultValue = "block", description = "How the compute thread waits: block, spin or backoff (default: ${DEFAULT-VALUE}).")
    String wait;

    @Option(names = "--cpu", defaultValue = "-1", description = "CPU to pin the compute thread to when spinning.")
    int cpu;

    @Option(names = "--threads", defaultValue = "1", paramLabel = "N", description = {"Threads sharing the rows of every"
            + " matmul: the compute thread and N - 1 workers (default: ${DEFAULT-VALUE}). Results keep their bits. Give the"
            + " stages on one host no more threads in all than it has cores."})
    int threads;

    @Option(names = "--kv-cache-tokens", defaultValue = "0", description = "KV cache capacity in positions (0 = auto).")
    long kvCacheTokens;

    @Option(names = "--kv-cache-type", defaultValue = "f32", paramLabel = "TYPE", description = {"How the KV cache stores"
            + " keys and values: f32 (exact) or f16 (half the memory per position, rounded once when stored)"
            + " (default: ${DEFAULT-VALUE})."})
    String kvCacheType;

    @Option(names = "--metrics-dir", description = "Directory for the stage's latency histogram logs and counters, kept"
            + " after it stops (default: a temporary directory, deleted when the stage stops).")
    Path metricsDir;

    @Option(names = "--socket-buffer-bytes", defaultValue = "0", description = "SO_RCVBUF/SO_SNDBUF of the stage's sockets (0 = OS default).")
    int socketBufferBytes;

    @Option(names = "--stall-threshold-us", defaultValue = "" + PipelineConfig.DEFAULT_STALL_THRESHOLD_MICROS, paramLabel = "US",
            description = "Count a stall when a frame reaching the idle compute thread waits longer than this (default: ${DEFAULT-VALUE}).")
    long stallThresholdMicros;

    @Option(names = "--warmup-ms", defaultValue = "0", paramLabel = "MS",
            description = {"Before listening, run the layers on scratch sequences until the JIT has compiled the kernels,"
                    + " for at most this long, so that the first requests run at full speed (default: ${DEFAULT-VALUE}, none)."})
    long warmupMillis;

    @Option(names = "--liveness-ms", defaultValue = "" + LinkOptions.DEFAULT_LIVENESS_MILLIS, paramLabel = "MS",
            description = "Report the upstream link as down after this long without a frame or heartbeat (default: ${DEFAULT-VALUE}).")
    long livenessMillis;

    @Option(names = "--handshake-timeout-ms", defaultValue = "" + LinkOptions.DEFAULT_HANDSHAKE_MILLIS, paramLabel = "MS",
            description = "Close a new connection that has not completed its handshake within this (default: ${DEFAULT-VALUE}).")
    long handshakeMillis;

    @Option(names = "--connect-timeout-ms", defaultValue = "" + LinkOptions.DEFAULT_CONNECT_MILLIS, paramLabel = "MS",
            description = "Bound on connecting to the next stage (default: ${DEFAULT-VALUE}).")
    long connectTimeoutMillis;

    @Option(names = "--fingerprint-cache", paramLabel = "DIR", description = "Where model fingerprints are cached (default: $TNSR_CACHE_DIR, else ~/.cache/tnsr).")
    Path fingerprintCache;

    @Option(names = "--parent-pid", defaultValue = "-1", description = "Exit when this process ends.")
    long parentPid;

    @Override
    public Integer call() throws Exception {
        io.tnsr.engine.util.ConsoleLog.setVerbose(!quiet);
        String[] fromTo = layers.split(":");
        if (fromTo.length != 2) {
            throw new IllegalArgumentException("--layers must be FROM:TO, got '" + layers + "'");
        }
        String listenHost = host != null ? host : "127.0.0.1";
        int listenPort = port >= 0 ? port : 0;
        if (listen != null) {
            int colon = listen.lastIndexOf(':');
            if (colon <= 0) {
                throw new IllegalArgumentException("--listen must be HOST:PORT, got '" + listen + "'");
            }
            listenHost = listen.substring(0, colon);
            listenPort = parsePort(listen.substring(colon + 1), "--listen");
        }
        PipelineConfig.checkStageSizes(ringSize, maxFrameBytes, maxTokensPerFrame, maxSequencesPerFrame, kvCacheTokens,
                socketBufferBytes, stallThresholdMicros);
        if (cpu < -1) {
            throw new IllegalArgumentException("--cpu must be a CPU number, or -1 for none, got " + cpu);
        }
        LinkKey key = LinkKey.load(keyFile);
        key.requireFor(listenHost, insecure, "this stage", "--key-file");
        StageOptions o = StageOptions.builder(model, parseLayer(fromTo[0], "FROM"), parseLayer(fromTo[1], "TO"))
                .stage(stageIndex, stageIndex < 0 ? Math.max(1, stageCount) : stageCount).listen(listenHost, listenPort)
                .ringSize(ringSize).maxFrameBytes(maxFrameBytes)
                .frameLimits(maxTokensPerFrame, maxSequencesPerFrame).wait(WaitMode.parse(wait), cpu)
                .kvCacheTokens(kvCacheTokens).kvCacheType(KvCacheType.parse(kvCacheType, "--kv-cache-type"))
                .metricsDir(metricsDir).socketBufferBytes(socketBufferBytes)
                .stallThresholdMicros(stallThresholdMicros).threads(threads)
                .link(new LinkOptions(key, livenessMillis, handshakeMillis, connectTimeoutMillis, fingerprintCache))
                .once(once).warmupMillis(warmupMillis).build();
        if (parentPid > 0) {
            ProcessHandle.of(parentPid).ifPresentOrElse(
                    p -> p.onExit().thenRun(() -> {
                        System.err.println("[" + o.name() + "] parent process " + parentPid + " ended; exiting");
                        Runtime.getRuntime().halt(4);
                    }),
                    () -> Runtime.getRuntime().halt(4));
        }
        StageRuntime stage;
        try {
            stage = new StageRuntime(o);
        } catch (RuntimeException e) {
            return failed(e.getMessage(), 2);
        }
        try (stage) {
            // On SIGTERM: stop, then let this thread close the stage (metrics flushed) and say so before the JVM ends.
            CountDownLatch closed = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                stage.stop();
                try {
                    closed.await(10, TimeUnit.SECONDS);
                } catch (InterruptedException ignored) {
                    // ending anyway
                }
            }));
            try {
                return serve(stage, o, listenHost);
            } finally {
                closed.countDown();
            }
        }
    }

    /** Listens, starts, and waits until the stage stops; the exit status. */
    private int serve(StageRuntime stage, StageOptions o, String listenHost) throws InterruptedException {
        int bound;
        try {
            bound = stage.listen();
        } catch (IOException e) {
            return failed(e.getMessage(), 3);
        }
        say("LISTENING " + bound);
        stage.start();
        say("READY");
        if (!o.once()) {
            System.err.println("[" + o.name() + "] serving on " + listenHost + ":" + bound + (o.link().key().present() ? " (" + o.link().key() + ")" : "")
                    + "; a coordinator lists it in its config as \"external\": \"" + listenHost + ":" + bound + "\"");
        }
        while (!stage.awaitStop(1, TimeUnit.SECONDS)) {
            // a SHUTDOWN frame (one session), a failure or a signal ends the wait
        }
        if (stage.state() == StageRuntime.State.FAILED) {
            return failed(stage.failure(), 3);
        }
        stage.close();
        say("STOPPED");
        return 0;
    }

    private static int parseLayer(String s, String what) {
        try {
            return Integer.parseInt(s.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--layers " + what + " must be a whole number, got '" + s + "'");
        }
    }

    private static int parsePort(String s, String option) {
        try {
            int p = Integer.parseInt(s.trim());
            if (p < 0 || p > 65535) {
                throw new IllegalArgumentException(option + " port must be 0..65535, got " + p);
            }
            return p;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(option + " port must be a number, got '" + s + "'");
        }
    }

    private static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    private static int failed(String why, int status) {
        say("FAILED " + why);
        System.err.println("stage: " + why);
        return status;
    }

    /** Bad options: the usage and exit 2; anything thrown: {@code FAILED <reason>} and exit 2 (bad input) or 3. */
    public static void main(String[] args) {
        CommandLine cl = new CommandLine(new StageMain());
        cl.setExecutionExceptionHandler((e, line, parsed) -> {
            if (System.getenv("TNSR_DEBUG") != null) {
                e.printStackTrace();
            }
            return failed(e.getMessage() != null ? e.getMessage() : e.toString(), e instanceof IllegalArgumentException ? 2 : 3);
        });
        System.exit(cl.execute(args));
    }
}
