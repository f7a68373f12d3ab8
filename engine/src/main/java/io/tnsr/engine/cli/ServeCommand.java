package io.tnsr.engine.cli;

import io.tnsr.engine.chat.ChatTemplate;
import io.tnsr.engine.chat.ChatTemplateException;
import io.tnsr.engine.coordinator.Coordinator;
import io.tnsr.engine.coordinator.PipelineException;
import io.tnsr.engine.coordinator.PipelineRun;
import io.tnsr.engine.coordinator.StageProcesses;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.metrics.RunDirectory;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.SpinPolicy;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.server.CompletionService;
import io.tnsr.engine.server.OpenAiHttpServer;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import io.tnsr.wire.FrameHeader;
import java.net.InetAddress;
import java.time.Clock;
import java.util.Optional;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicBoolean;
import picocli.CommandLine.Command;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;

/**
 * {@code tools/serve}: the pipeline's stage processes behind OpenAI's completions API. Requests join the running
 * micro-batches at the next step and leave when done (their KV cache freed in every stage). SIGINT or SIGTERM: stop
 * taking requests, let those in flight finish (or cancel them after {@link #DRAIN_SECONDS} s), stop every stage, exit 0.
 */
@Command(name = "serve", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Serves the model over HTTP with OpenAI's API (POST /v1/completions, streaming or not;"
                + " POST /v1/chat/completions, GET /v1/models, GET /health, GET /metrics, POST /tokenize, /detokenize"
                + " and /apply-template), split across stage"
                + " processes as run-pipeline splits it."})
public final class ServeCommand implements Callable<Integer> {
    /** How long in-flight requests get to finish after SIGTERM before they are cancelled. */
    static final int DRAIN_SECONDS = (int) (OpenAiHttpServer.STOP_TIMEOUT_MILLIS / 1000);

    @Mixin
    PipelineOptions pipeline;

    @Option(names = "--host", defaultValue = "127.0.0.1", description = {"Address to listen on (default: ${DEFAULT-VALUE})."
            + " Any other address needs --api-key-file, or --insecure."})
    String host;

    @Option(names = "--port", defaultValue = "8080", description = "Port to listen on; 0 = any free port (default: ${DEFAULT-VALUE}).")
    int port;

    @Option(names = "--max-sequences", paramLabel = "S", defaultValue = "16", description = "Requests running at once (default: ${DEFAULT-VALUE}).")
    int maxSequences;

    @Option(names = "--micro-batches", paramLabel = "M", description = {"Micro-batches in flight, the running requests spread over them"
            + " (default: one per stage, so that every stage computes at once); with 1 the stages"
            + " take turns, and --threads-per-stage can give each every CPU of this machine."})
    Integer microBatches;

    @Option(names = "--max-queued", paramLabel = "Q", defaultValue = "64", description = "Requests waiting for a place; beyond, 429 (default: ${DEFAULT-VALUE}).")
    int maxQueued;

    @Option(names = "--prefill-chunk", paramLabel = "TOKENS", defaultValue = "128", description = {"Most prompt tokens one step"
            + " prefills beside the running sequences' decode tokens: bounds how long a long prompt"
            + " delays them (default: ${DEFAULT-VALUE}; the frame's max_tokens_per_frame caps it)."})
    int prefillChunk;

    @Option(names = "--max-wait", paramLabel = "SECONDS", defaultValue = "60", description = {"Longest a request waits for a place;"
            + " past it, 503 (default: ${DEFAULT-VALUE}; 0 = no limit)."})
    double maxWait;

    @Option(names = "--api-key-file", paramLabel = "FILE", description = {"A file whose first line is the API key that every request"
            + " must send as 'Authorization: Bearer KEY' (all but GET /health)."})
    Path apiKeyFile;

    @Option(names = "--chat-template", paramLabel = "NAME|FILE", description = {"How /v1/chat/completions turns messages into a prompt:"
            + " a Jinja FILE, or NAME: chatml (default: the model's tokenizer.chat_template;"
            + " without one, chat requests are refused)."})
    String chatTemplate;

    @Override
    public Integer call() throws Exception {
        pipeline.applyVerbosity();
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("--port must be from 0 (any free port) to 65535, got " + port);
        }
        if (maxSequences < 1) {
            throw new IllegalArgumentException("--max-sequences must be 1 or more, got " + maxSequences);
        }
        if (prefillChunk < 1) {
            throw new IllegalArgumentException("--prefill-chunk must be 1 or more, got " + prefillChunk);
        }
        if (maxQueued < 0) {
            throw new IllegalArgumentException("--max-queued must be 0 or more, got " + maxQueued);
        }
        if (!(maxWait >= 0)) {
            throw new IllegalArgumentException("--max-wait must be 0 (no limit) or more seconds, got " + maxWait);
        }
        if (microBatches != null && (microBatches < 1 || microBatches > maxSequences)) {
            throw new IllegalArgumentException("--micro-batches must be from 1 to --max-sequences (" + maxSequences + "), got "
                    + microBatches);
        }
        String apiKey = apiKey();
        if (apiKey == null && !InetAddress.getByName(host).isLoopbackAddress()) {
            if (!pipeline.insecure) {
                throw new IllegalArgumentException("--host " + host + " is reachable from other hosts: give --api-key-file FILE "
                        + "(requests then need 'Authorization: Bearer KEY'), or --insecure to serve anyone without a key");
            }
            System.err.println("serve: WARNING: --insecure: listening on " + host + " with no API key; anyone who can reach "
                    + "this address can use the model");
        }
        Path modelPath = pipeline.modelPath("serve");
        LlamaConfig mc;
        Tokenizer tok;
        ChatTemplate chat;
        try (GgufFile file = GgufFile.open(modelPath)) {
            mc = LlamaConfig.fromGguf(file);
            tok = Tokenizers.fromGguf(file);
            chat = chatTemplate(file, tok);
        }
        PipelineConfig pc = pipeline.pipeline(mc);
        pc.checkFrames(mc);
        int n = pc.stages().size();
        int m = microBatches != null ? microBatches : n;
        SpinPolicy policy = pipeline.spinPolicy(pc, "serve", m);
        int threads = pc.threadsPerStage(Runtime.getRuntime().availableProcessors(), policy.waits());
        PipelineConfig stages = pc.withThreadsPerStage(threads); // auto resolved once (replacement stages too)
        int perStep = Math.min(pc.maxSequencesPerFrame(), FrameHeader.MAX_SEQUENCE_COUNT);
        int perBatch = Math.min(perStep, (maxSequences + m - 1) / m);
        // A step carries each member's decode token first, then prompt chunks up to --prefill-chunk tokens: so a long
        // prompt arriving delays the running sequences' next token by at most one step of perBatch + chunk rows.
        int stepTokens = Math.min(pc.maxTokensPerFrame(), perBatch + prefillChunk);
        Scheduler.Limits limits = new Scheduler.Limits(m, perBatch, stepTokens, perStep);
        int running = Math.min(maxSequences, m * perBatch);
        String name = modelPath.getFileName().toString().replaceFirst("\\.gguf$", "");
        RunDirectory dir = RunDirectory.temporary("tnsr-serve"); // the stages' and this process's metrics, while serving
        Path runDir = dir.path();
        CompletionService service = new CompletionService(tok, mc.contextLength(), mc.vocabSize(),
                new CompletionService.Limits(running, maxQueued, Math.round(maxWait * 1000)), runDir, n);
        PipelineRun.Settings settings = new PipelineRun.Settings(modelPath, stages, policy.waits(), policy.cpus(),
                new Coordinator.Options(m, perBatch, pc.maxTokensPerFrame(), pc.maxSequencesPerFrame(), pc.maxFrameBytes())
                        .withSampleInLastStage(pipeline.sampleInLastStage()),
                runDir, pipeline.startupMillis(), pipeline.stallMillis(), pipeline.connectMillis(), 0, pipeline.link(pc, "serve"), pipeline.recovery());

        AtomicBoolean stopRequested = new AtomicBoolean();
        AtomicBoolean pipelineStop = new AtomicBoolean();
        long t0 = System.nanoTime();
        try (dir; OpenAiHttpServer http = new OpenAiHttpServer(service, name, host, port, apiKey, chat)) {
            int bound = http.start();
            // SIGINT and SIGTERM end the serving loop below, so that the stages are stopped and the exit status is 0
            // (a shutdown hook would run while the JVM is already exiting, with the signal's status).
            Runnable stop = () -> {
                if (stopRequested.compareAndSet(false, true)) {
                    Thread t = new Thread(() -> {
                        System.err.println("serve: stopping: no new requests; " + service.active() + " in flight get up to "
                                + DRAIN_SECONDS + " s");
                        try {
                            http.close();        // stops taking requests, waits for those in flight up to its timeout
                        } catch (Exception e) {
                            System.err.println("serve: " + e.getMessage());
                        }
                        pipelineStop.set(true);
                    }, "serve-stop");
                    t.setDaemon(true);
                    t.start();
                }
            };
            sun.misc.Signal.handle(new sun.misc.Signal("TERM"), sig -> stop.run());
            sun.misc.Signal.handle(new sun.misc.Signal("INT"), sig -> stop.run());
            System.err.println("serve: listening on http://" + host + ":" + bound + " (starting " + n + " stage"
                    + (n == 1 ? "" : "s") + " of " + name + ", " + threads + " thread" + (threads == 1 ? "" : "s")
                    + (n == 1 ? "" : " each") + (pc.threadsPerStage() == 0 ? " (auto)" : "")
                    + (m == n ? "" : ", " + m + " micro-batch" + (m == 1 ? "" : "es")) + "; /health says when ready)");
            try {
                PipelineRun.serve(new StageProcesses(stages, modelPath, runDir, policy.waits(), policy.cpus(), settings.link()), settings,
                        mc, limits, service, s -> {
                            service.attach(s);
                            System.err.println(String.format(java.util.Locale.ROOT, "serve: %d stage%s ready in %.1f s; up to %d requests at once, %d waiting", n,
                                    n == 1 ? "" : "s", (System.nanoTime() - t0) / 1e9, running, maxQueued));
                        }, pipelineStop::get, status -> {
                            service.recovering(status);
                            System.err.println(status == null ? "serve: the pipeline recovered" : "serve: the pipeline is " + status);
                        });
            } catch (PipelineException e) {
                // Requests in flight end with the error (an error event then [DONE] on a stream, 503 otherwise) and
                // /health says why, until the server has closed.
                service.pipelineFailed(e.getMessage());
                System.err.println("serve: the pipeline failed: " + e.getMessage());
                return 3;
            }
        }
        System.err.println("serve: stopped");
        return 0;
    }

    /** The --chat-template (a name or a file), else the model's own; null when there is none. */
    private ChatTemplate chatTemplate(GgufFile file, Tokenizer tok) throws java.io.IOException {
        Clock clock = Clock.systemDefaultZone();
        if (chatTemplate == null) {
            Optional<ChatTemplate> own;
            try {
                own = ChatTemplate.fromGguf(file.metadata(), tok, clock);
            } catch (ChatTemplateException e) {
                throw new IllegalArgumentException("the model's chat template (tokenizer.chat_template) does not parse: "
                        + e.getMessage() + "; give --chat-template NAME|FILE");
            }
            System.err.println(own.isPresent() ? "serve: chat: the model's chat template"
                    : "serve: chat: the model has no chat template; /v1/chat/completions refuses requests (see --chat-template)");
            return own.orElse(null);
        }
        String source = ChatTemplate.BUILT_IN.get(chatTemplate);
        if (source == null) {
            Path f = Path.of(chatTemplate);
            if (!Files.isReadable(f)) {
                throw new IllegalArgumentException("--chat-template " + chatTemplate + ": neither a template name ("
                        + String.join(", ", ChatTemplate.BUILT_IN.keySet()) + ") nor a readable file");
            }
            source = Files.readString(f);
        }
        try {
            return ChatTemplate.compile(source, tok, clock);
        } catch (ChatTemplateException e) {
            throw new IllegalArgumentException("--chat-template " + chatTemplate + ": " + e.getMessage());
        }
    }

    /** The key in --api-key-file (its first line, trimmed), or null when none is given. */
    private String apiKey() throws java.io.IOException {
        if (apiKeyFile == null) {
            return null;
        }
        if (!Files.isReadable(apiKeyFile)) {
            throw new IllegalArgumentException("--api-key-file " + apiKeyFile + ": no such readable file");
        }
        String key = Files.readAllLines(apiKeyFile).stream().findFirst().orElse("").trim();
        if (key.isEmpty()) {
            throw new IllegalArgumentException("--api-key-file " + apiKeyFile + ": its first line is empty; it must hold the key");
        }
        return key;
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new ServeCommand(), args));
    }
}
