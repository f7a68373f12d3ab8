package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.coordinator.Coordinator;
import io.tnsr.engine.coordinator.LocalStages;
import io.tnsr.engine.coordinator.PipelineRun;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import io.tnsr.engine.tokenizer.StreamingDecoder;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A serving pipeline for tests: the tiny synthetic model over two in-process stages (real sockets), a
 * {@link CompletionService} (by default 2 running places and 1 waiting), driven by a thread of its own until closed.
 */
final class ServingPipeline implements AutoCloseable {
    final Path model;
    final LlamaConfig cfg;
    final Tokenizer tok;
    final CompletionService service;
    final LocalStages stages;
    private final PipelineRun.Settings settings;
    private final PipelineConfig pipeline;
    private final int maxRunning;
    private Thread driver;
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();

    ServingPipeline() throws Exception {
        this(2, 1);
    }

    ServingPipeline(int maxRunning, int maxWaiting) throws Exception {
        this(ModelSpec.tiny(), maxRunning, maxWaiting, 0);
    }

    ServingPipeline(ModelSpec spec, int maxRunning, int maxWaiting, long maxWaitMillis) throws Exception {
        this(spec, maxRunning, maxWaiting, maxWaitMillis, true);
    }

    /** @param sampleInLastStage tokens chosen in the last stage (as serve does), else by the coordinator from logits */
    ServingPipeline(ModelSpec spec, int maxRunning, int maxWaiting, long maxWaitMillis, boolean sampleInLastStage)
            throws Exception {
        this(spec, maxRunning, maxWaiting, maxWaitMillis, sampleInLastStage, true);
    }

    /**
     * @param start start the stages now and wait for them; else {@link #start()} does, and until then the service is
     *              as {@code tools/serve}'s is while its stages load (its HTTP server already listening)
     */
    ServingPipeline(ModelSpec spec, int maxRunning, int maxWaiting, long maxWaitMillis, boolean sampleInLastStage,
                    boolean start) throws Exception {
        this(TestModels.get(spec), maxRunning, maxWaiting, maxWaitMillis, sampleInLastStage, start);
    }

    /** As {@link #ServingPipeline(ModelSpec, int, int, long, boolean, boolean)}, on the model file {@code model}. */
    ServingPipeline(Path model, int maxRunning, int maxWaiting, long maxWaitMillis, boolean sampleInLastStage,
                    boolean start) throws Exception {
        this.maxRunning = maxRunning;
        this.model = model;
        try (GgufFile f = GgufFile.open(model)) {
            cfg = LlamaConfig.fromGguf(f);
            tok = Tokenizers.fromGguf(f);
        }
        pipeline = PipelineConfig.defaults(cfg.layers(), 2, WaitMode.BLOCK);
        Path runDir = Files.createTempDirectory("tnsr-serve-test");
        settings = new PipelineRun.Settings(model, pipeline, Collections.nCopies(2, WaitMode.BLOCK),
                Collections.nCopies(2, -1), new Coordinator.Options(2, 0, pipeline.maxTokensPerFrame(),
                pipeline.maxSequencesPerFrame(), pipeline.maxFrameBytes()).withSampleInLastStage(sampleInLastStage), runDir,
                30_000, 30_000, 10_000, 0);
        service = new CompletionService(tok, cfg.contextLength(), cfg.vocabSize(),
                new CompletionService.Limits(maxRunning, maxWaiting, maxWaitMillis), runDir, 2);
        stages = new LocalStages(pipeline, model, runDir);
        if (start) {
            start();
        }
    }

    /** Starts the stages and waits until the service takes requests. */
    void start() throws Exception {
        int perBatch = (maxRunning + 1) / 2;
        CountDownLatch ready = new CountDownLatch(1);
        driver = new Thread(() -> {
            try {
                PipelineRun.serve(stages, settings, cfg,
                        new Scheduler.Limits(2, perBatch, pipeline.maxTokensPerFrame(), 8), service, s -> {
                            service.attach(s);
                            ready.countDown();
                        }, stop::get, service::recovering);   // as tools/serve does
            } catch (Throwable t) {
                failure.set(t);
                service.pipelineFailed(t.getMessage());   // as tools/serve does
                ready.countDown();
            }
        }, "serving");
        driver.start();
        assertTrue(ready.await(60, TimeUnit.SECONDS));
        assertTrue(service.ready(), () -> "the pipeline did not start: " + failure.get());
    }

    /** The text {@code tools/generate} prints for the prompt: the whole model in this process, decoded as it streams. */
    String alone(String prompt, int maxTokens, SamplingConfig sc) {
        return alone(prompt, maxTokens, sc, -1, new ArrayList<>());
    }

    /**
     * As {@link #alone(String, int, SamplingConfig)}, asking for log-probabilities with {@code top} most likely tokens
     * (-1: none): each generated token's go to {@code logprobs}.
     */
    String alone(String prompt, int maxTokens, SamplingConfig sc, int top, List<Completion.TokenLogprob> logprobs) {
        return alone(prompt, maxTokens, sc, false, top, logprobs);
    }

    /** As {@link #alone(String, int, SamplingConfig, int, List)}; {@code ignoreEos}: as the request's {@code ignore_eos}. */
    String alone(String prompt, int maxTokens, SamplingConfig sc, boolean ignoreEos, int top,
                 List<Completion.TokenLogprob> logprobs) {
        try (GgufFile f = GgufFile.open(model)) {
            int[] ids = tok.encode(prompt, true);
            SequenceState s = new SequenceState(0, prompt, ids, maxTokens, cfg.contextLength(), ignoreEos ? -1 : tok.bos(),
                    ignoreEos ? t -> false : tok::isEndOfGeneration, new Sampler(sc, cfg.vocabSize()));
            if (top >= 0) {
                s.wantLogprobs(top);
            }
            LayerRange range = new LayerRange(f, cfg, 0, cfg.layers(),
                    KvCachePool.sized(cfg.layers(), cfg.kvDim(), cfg.contextLength(), 0), 64, 4);
            new Generator(range, (q, t) -> {
                if (q.logprobs() != null) {
                    logprobs.add(Completion.TokenLogprob.of(q.logprobs(), -1));
                }
            }).run(List.of(s));
            StreamingDecoder d = tok.newDecoder(ids[ids.length - 1]);
            StringBuilder text = new StringBuilder();
            for (int t : s.generatedTokens()) {
                d.next(t, text);
            }
            d.finish(text);
            return text.toString();
        }
    }

    /** KV-cache pages held in each stage now. */
    int[] usedPages() {
        return new int[] {stages.stage(0).range().cache().usedPages(), stages.stage(1).range().cache().usedPages()};
    }

    /** Waits for the pipeline to have failed (a test broke it); its error. */
    Throwable awaitFailure() throws InterruptedException {
        driver.join(60_000);
        Throwable t = failure.getAndSet(null);
        assertTrue(t != null, "the pipeline failed");
        return t;
    }

    @Override
    public void close() throws Exception {
        stop.set(true);
        if (driver == null) {
            return;
        }
        driver.join(60_000);
        if (failure.get() != null) {
            throw new AssertionError("serving failed", failure.get());
        }
    }
}
