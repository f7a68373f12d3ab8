package io.tnsr.engine.stage;

import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * One stage process, as {@code tools/run-pipeline} starts it (it can also be started by hand).
 *
 * <p>It talks to whoever started it with lines on stdout: {@code LISTENING <port>} once bound; then, unless
 * {@code --downstream} was given, it reads {@code DOWNSTREAM <host>:<port>} from stdin; {@code READY} once
 * connected downstream and serving; {@code FAILED <reason>} before exiting on an error. Logs go to stderr.
 * Exit status: 0 after a SHUTDOWN frame passed through, 2 on bad options, 3 on a runtime failure, 4 when the
 * parent process died.
 */
@Command(name = "stage", mixinStandardHelpOptions = true, sortOptions = false,
        description = "Runs one pipeline stage: a contiguous layer range of a model, between two TCP connections.")
public final class StageMain implements Callable<Integer> {
    @Option(names = "--model", required = true, description = "GGUF model file.")
    Path model;

    @Option(names = "--layers", required = true, paramLabel = "FROM:TO", description = "Layer range [FROM, TO).")
    String layers;

    @Option(names = "--stage-index", required = true, description = "0-based position in the pipeline.")
    int stageIndex;

    @Option(names = "--stage-count", required = true, description = "Stages in the pipeline.")
    int stageCount;

    @Option(names = "--host", defaultValue = "127.0.0.1", description = "Address to listen on (default: ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "0", description = "Port to listen on; 0 = any free port (default).")
    int port;

    @Option(names = "--downstream", paramLabel = "HOST:PORT", description = "Next stage, or the coordinator's return port; read from stdin when absent.")
    String downstream;

    @Option(names = "--ring-size", defaultValue = "" + PipelineConfig.DEFAULT_RING_SIZE, description = "Ring slots (default: ${DEFAULT-VALUE}).")
    int ringSize;

    @Option(names = "--max-frame-bytes", defaultValue = "" + PipelineConfig.DEFAULT_MAX_FRAME_BYTES, description = "Largest frame accepted (default: ${DEFAULT-VALUE}).")
    int maxFrameBytes;

    @Option(names = "--max-tokens-per-frame", defaultValue = "" + PipelineConfig.DEFAULT_MAX_TOKENS_PER_FRAME, description = "Rows per frame (default: ${DEFAULT-VALUE}).")
    int maxTokensPerFrame;

    @Option(names = "--max-sequences-per-frame", defaultValue = "" + PipelineConfig.DEFAULT_MAX_SEQUENCES_PER_FRAME, description = "Sequences per frame (default: ${DEFAULT-VALUE}).")
    int maxSequencesPerFrame;

    @Option(names = "--wait", defaultValue = "block", description = "block, spin or backoff (default: ${DEFAULT-VALUE}).")
    String wait;

    @Option(names = "--cpu", defaultValue = "-1", description = "CPU to pin the compute thread to when spinning.")
    int cpu;

    @Option(names = "--kv-cache-tokens", defaultValue = "0", description = "KV cache capacity in positions (0 = auto).")
    long kvCacheTokens;

    @Option(names = "--metrics-dir", description = "Directory for latency histogram logs.")
    Path metricsDir;

    @Option(names = "--socket-buffer-bytes", defaultValue = "0", description = "SO_RCVBUF/SO_SNDBUF of the stage's sockets (0 = OS default).")
    int socketBufferBytes;

    @Option(names = "--stall-threshold-us", defaultValue = "" + PipelineConfig.DEFAULT_STALL_THRESHOLD_MICROS, paramLabel = "US",
            description = "Count a stall when a frame reaching the idle compute thread waits longer than this (default: ${DEFAULT-VALUE}).")
    long stallThresholdMicros;

    @Option(names = "--parent-pid", defaultValue = "-1", description = "Exit when this process ends.")
    long parentPid;

    @Option(names = "--connect-timeout-ms", defaultValue = "20000", description = "Bound on connecting downstream (default: ${DEFAULT-VALUE}).")
    long connectTimeoutMillis;

    @Override
    public Integer call() throws Exception {
        String[] fromTo = layers.split(":");
        if (fromTo.length != 2) {
            throw new IllegalArgumentException("--layers must be FROM:TO, got '" + layers + "'");
        }
        StageOptions o = StageOptions.builder(model, Integer.parseInt(fromTo[0].trim()), Integer.parseInt(fromTo[1].trim()))
                .stage(stageIndex, stageCount).listen(host, port).ringSize(ringSize).maxFrameBytes(maxFrameBytes)
                .frameLimits(maxTokensPerFrame, maxSequencesPerFrame).wait(WaitMode.parse(wait), cpu)
                .kvCacheTokens(kvCacheTokens).metricsDir(metricsDir).socketBufferBytes(socketBufferBytes)
                .stallThresholdMicros(stallThresholdMicros).build();
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
            int bound;
            try {
                bound = stage.listen();
            } catch (IOException e) {
                return failed(e.getMessage(), 3);
            }
            say("LISTENING " + bound);
            String target = downstream;
            if (target == null) {
                BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                String line = in.readLine();
                if (line == null || !line.startsWith("DOWNSTREAM ")) {
                    return failed("expected 'DOWNSTREAM host:port' on stdin, got " + line, 3);
                }
                target = line.substring("DOWNSTREAM ".length()).trim();
            }
            int colon = target.lastIndexOf(':');
            try {
                stage.connectDownstream(target.substring(0, colon), Integer.parseInt(target.substring(colon + 1)),
                        connectTimeoutMillis);
            } catch (IOException e) {
                return failed(e.getMessage(), 3);
            }
            stage.start();
            say("READY");
            Runtime.getRuntime().addShutdownHook(new Thread(stage::stop));
            while (!stage.awaitStop(1, TimeUnit.SECONDS)) {
                // a SHUTDOWN frame, a broken downstream or a signal ends the wait
            }
            if (stage.state() == StageRuntime.State.FAILED) {
                return failed(stage.failure(), 3);
            }
        }
        say("STOPPED");
        return 0;
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
