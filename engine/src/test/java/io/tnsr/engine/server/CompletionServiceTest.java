package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
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
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Completions over a serving pipeline of two in-process stages (real sockets), as a server's requests use it. */
@Timeout(120)
class CompletionServiceTest {
    private static final String PROMPT = "once upon a time";

    private Path model;
    private LlamaConfig cfg;
    private Tokenizer tok;
    private CompletionService service;
    private Thread driver;
    private final AtomicBoolean stop = new AtomicBoolean();
    private final AtomicReference<Throwable> failure = new AtomicReference<>();

    @BeforeEach
    void serve() throws Exception {
        model = TestModels.get(ModelSpec.tiny());
        try (GgufFile f = GgufFile.open(model)) {
            cfg = LlamaConfig.fromGguf(f);
            tok = Tokenizers.fromGguf(f);
        }
        PipelineConfig pipeline = PipelineConfig.defaults(cfg.layers(), 2, WaitMode.BLOCK);
        Path runDir = Files.createTempDirectory("tnsr-serve-test");
        PipelineRun.Settings settings = new PipelineRun.Settings(model, pipeline, Collections.nCopies(2, WaitMode.BLOCK),
                Collections.nCopies(2, -1), new Coordinator.Options(2, 0, pipeline.maxTokensPerFrame(),
                pipeline.maxSequencesPerFrame(), pipeline.maxFrameBytes()), runDir, 30_000, 30_000, 10_000, 0);
        service = new CompletionService(tok, cfg.contextLength(), cfg.vocabSize(), 2, 1);
        CountDownLatch ready = new CountDownLatch(1);
        driver = new Thread(() -> {
            try {
                PipelineRun.serve(new LocalStages(pipeline, model, runDir), settings, cfg,
                        new Scheduler.Limits(2, 1, pipeline.maxTokensPerFrame(), 8), service, s -> {
                            service.attach(s);
                            ready.countDown();
                        }, stop::get);
            } catch (Throwable t) {
                failure.set(t);
                ready.countDown();
            }
        }, "serving");
        driver.start();
        assertTrue(ready.await(60, TimeUnit.SECONDS));
        assertTrue(service.ready(), () -> "the pipeline did not start: " + failure.get());
    }

    @AfterEach
    void stop() throws Exception {
        stop.set(true);
        driver.join(60_000);
        if (failure.get() != null) {
            throw new AssertionError("serving failed", failure.get());
        }
    }

    /** The text {@code tools/generate} prints for the prompt: the whole model in this process, decoded as it streams. */
    private String alone(String prompt, int maxTokens, SamplingConfig sc) {
        try (GgufFile f = GgufFile.open(model)) {
            int[] ids = tok.encode(prompt, true);
            SequenceState s = new SequenceState(0, prompt, ids, maxTokens, cfg.contextLength(), tok.bos(),
                    tok::isEndOfGeneration, new Sampler(sc, cfg.vocabSize()));
            LayerRange range = new LayerRange(f, cfg, 0, cfg.layers(),
                    KvCachePool.sized(cfg.layers(), cfg.kvDim(), cfg.contextLength(), 0), 64, 4);
            new Generator(range, (q, t) -> { }).run(List.of(s));
            StreamingDecoder d = tok.newDecoder(ids[ids.length - 1]);
            StringBuilder text = new StringBuilder();
            for (int t : s.generatedTokens()) {
                d.next(t, text);
            }
            d.finish(text);
            return text.toString();
        }
    }

    private static String drain(Completion c) throws InterruptedException {
        StringBuilder all = new StringBuilder();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        for (String d; (d = c.nextDelta(100)) != null && System.nanoTime() < deadline; ) {
            all.append(d);
        }
        return all.toString();
    }

    @Test
    void theStreamedTextIsTheTextGenerateGivesSeededOrGreedy() throws Exception {
        SamplingConfig seeded = new SamplingConfig(0.8f, 40, 0.95f, 11);
        Completion greedy = service.submit(new CompletionService.Request(PROMPT, 30, SamplingConfig.GREEDY, List.of()));
        Completion sampled = service.submit(new CompletionService.Request(PROMPT, 30, seeded, List.of()));
        String streamed = drain(greedy);
        assertEquals(alone(PROMPT, 30, SamplingConfig.GREEDY), streamed);
        assertEquals(streamed, greedy.awaitText(1000));
        assertEquals(alone(PROMPT, 30, seeded), drain(sampled), "a seed gives the tokens the prompt gives alone");
        assertNotNull(greedy.finish());
        assertEquals(greedy.sequence().promptLength(), greedy.promptTokens());
    }

    @Test
    void aStopStringEndsTheTextJustBeforeItAndEndsTheSequence() throws Exception {
        String full = alone(PROMPT, 40, SamplingConfig.GREEDY);
        assertTrue(full.length() > 12, "enough text to cut: " + full);
        String stopAt = full.substring(8, 11);
        String expected = full.substring(0, full.indexOf(stopAt));
        Completion c = service.submit(new CompletionService.Request(PROMPT, 40, SamplingConfig.GREEDY, List.of("\u0000never", stopAt)));
        assertEquals(expected, drain(c), "streamed: nothing of the stop string, nothing after it");
        assertEquals(expected, c.awaitText(1000));
        assertEquals(Completion.Finish.STOP, c.finish());
        assertTrue(c.completionTokens() < 40, "the sequence ended at the stop string");
    }

    @Test
    void beyondTheRunningAndWaitingPlacesARequestIsRefusedUntilOneEnds() throws Exception {
        Completion a = service.submit(new CompletionService.Request(PROMPT, 200, SamplingConfig.GREEDY, List.of()));
        Completion b = service.submit(new CompletionService.Request(PROMPT, 200, SamplingConfig.GREEDY, List.of()));
        Completion c = service.submit(new CompletionService.Request(PROMPT, 200, SamplingConfig.GREEDY, List.of()));
        CompletionService.OverloadedException e = assertThrows(CompletionService.OverloadedException.class,
                () -> service.submit(new CompletionService.Request(PROMPT, 5, SamplingConfig.GREEDY, List.of())));
        assertTrue(e.getMessage().contains("2 requests are running and 1 waiting"), e.getMessage());
        service.cancel(a);
        assertNotNull(a.awaitText(30_000));
        assertEquals(Completion.Finish.CANCELLED, a.finish());
        Completion d = service.submit(new CompletionService.Request(PROMPT, 5, SamplingConfig.GREEDY, List.of()));
        for (Completion x : List.of(b, c, d)) {
            assertNotNull(x.awaitText(60_000));
        }
        assertEquals(0, service.active());
    }

    @Test
    void aPromptLongerThanTheContextIsRefused() {
        String longPrompt = "a b c d ".repeat(cfg.contextLength());
        CompletionService.InvalidRequestException e = assertThrows(CompletionService.InvalidRequestException.class,
                () -> service.submit(new CompletionService.Request(longPrompt, 5, SamplingConfig.GREEDY, List.of())));
        assertTrue(e.getMessage().contains("the model's context holds " + cfg.contextLength()), e.getMessage());
        assertEquals(0, service.active());
    }
}
