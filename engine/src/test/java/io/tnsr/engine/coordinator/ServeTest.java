package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.StopReason;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A pipeline that serves: sequences submitted at any time, from another thread, while others run, as a server's
 * requests are (in-process stages, real sockets).
 */
@Timeout(120)
class ServeTest {
    private static final List<String> PROMPTS = List.of("the quick fox", "a b c d e", "once upon a time", "x y");
    private static final SamplingConfig GREEDY = SamplingConfig.GREEDY;

    /** One serving pipeline driven by a thread of its own; the test submits and cancels. */
    private static final class Server implements AutoCloseable {
        final PipelineHarness h = new PipelineHarness(TestModels.get(ModelSpec.tiny()), 2);
        final LocalStages stages = new LocalStages(h.pipeline, h.model, h.runDir);
        final Map<Integer, AtomicInteger> tokens = new ConcurrentHashMap<>();
        final Map<Integer, CountDownLatch> finished = new ConcurrentHashMap<>();
        final AtomicReference<Scheduler> scheduler = new AtomicReference<>();
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final AtomicBoolean stop = new AtomicBoolean();
        final Thread driver;

        Server() throws InterruptedException {
            this(status -> { });
        }

        Server(java.util.function.Consumer<String> status) throws InterruptedException {
            CountDownLatch ready = new CountDownLatch(1);
            Generator.Listener listener = new Generator.Listener() {
                @Override
                public void onToken(SequenceState seq, int token) {
                    tokens.computeIfAbsent(seq.index(), k -> new AtomicInteger()).incrementAndGet();
                }

                @Override
                public void onFinished(SequenceState seq) {
                    finished.get(seq.index()).countDown();
                }
            };
            Scheduler.Limits limits = new Scheduler.Limits(2, 4, h.pipeline.maxTokensPerFrame(), 8);
            driver = new Thread(() -> {
                try {
                    PipelineRun.serve(stages, h.settings(), h.cfg, limits, listener, s -> {
                        scheduler.set(s);
                        ready.countDown();
                    }, stop::get, status);
                } catch (Throwable t) {
                    failure.set(t);
                    ready.countDown();
                }
            }, "serving");
            driver.start();
            assertTrue(ready.await(60, TimeUnit.SECONDS), "the pipeline came up");
            if (failure.get() != null) {
                throw new AssertionError("the pipeline did not start", failure.get());
            }
        }

        /** A request: its own sampler, random stream 0 (as a prompt run alone), started now. */
        SequenceState submit(int id, String prompt, int maxTokens, SamplingConfig sc) {
            return submit(new SequenceState(id, 0, prompt, h.tok.encode(prompt, true), maxTokens, h.cfg.contextLength(),
                    h.tok.bos(), h.tok::isEndOfGeneration, new Sampler(sc, h.cfg.vocabSize())));
        }

        /** A request that no token ends: it runs until the context is full, or it is cancelled. */
        SequenceState submitEndless(int id, String prompt) {
            return submit(new SequenceState(id, 0, prompt, h.tok.encode(prompt, true), 100_000, h.cfg.contextLength(),
                    -1, t -> false, new Sampler(GREEDY, h.cfg.vocabSize())));
        }

        SequenceState submit(SequenceState s) {
            int id = s.index();
            finished.put(id, new CountDownLatch(1));
            s.started(System.nanoTime());
            scheduler.get().submit(s);
            return s;
        }

        void awaitTokens(int id, int n) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (tokens.getOrDefault(id, new AtomicInteger()).get() < n && System.nanoTime() < deadline) {
                Thread.sleep(1);
            }
            assertTrue(tokens.get(id).get() >= n, "sequence " + id + " is running");
        }

        void awaitFinished(int id) throws InterruptedException {
            assertTrue(finished.get(id).await(60, TimeUnit.SECONDS), "sequence " + id + " finished");
        }

        @Override
        public void close() throws InterruptedException {
            stop.set(true);
            driver.join(60_000);
            if (failure.get() != null) {
                throw new AssertionError("serving failed", failure.get());
            }
        }
    }

    private static int[] alone(PipelineHarness h, String prompt, int maxTokens, SamplingConfig sc) {
        return h.runSingle(List.of(prompt), maxTokens, sc).get(0).generatedTokens();
    }

    @Test
    void sequencesSubmittedWhileOthersRunGiveTheTokensTheyGiveAlone() throws Exception {
        List<SequenceState> served = new ArrayList<>();
        try (Server server = new Server()) {
            served.add(server.submit(0, PROMPTS.get(0), 24, GREEDY));
            server.awaitTokens(0, 3);
            for (int k = 1; k < PROMPTS.size(); k++) {   // they join mid-run, at the next step
                served.add(server.submit(k, PROMPTS.get(k), 24, GREEDY));
            }
            for (int k = 0; k < PROMPTS.size(); k++) {
                server.awaitFinished(k);
            }
            for (int k = 0; k < PROMPTS.size(); k++) {
                SequenceState s = served.get(k);
                int[] expected = alone(server.h, PROMPTS.get(k), 24, GREEDY);
                assertArrayEquals(expected, s.generatedTokens(), "sequence " + k + ": the tokens it gives alone");
                assertTrue(s.admittedNanos() > 0);
            }
        }
    }

    /**
     * Seeded sampling, too: the stage processes start cold (their first steps interpreted, then compiled) while the
     * single-process run here is warm, and every e^x (softmax, SwiGLU, the sampler's) gives the same bits either way.
     */
    @Test
    void seededSequencesServedTogetherGiveTheTokensTheyGiveAlone() throws Exception {
        List<SequenceState> served = new ArrayList<>();
        List<SamplingConfig> configs = new ArrayList<>();
        try (Server server = new Server()) {
            for (int k = 0; k < PROMPTS.size(); k++) {
                configs.add(new SamplingConfig(0.9f, k == 1 ? 40 : 0, k == 2 ? 0.9f : 1f, 1000 + k));
                served.add(server.submit(k, PROMPTS.get(k), 32, configs.get(k)));
            }
            for (int k = 0; k < PROMPTS.size(); k++) {
                server.awaitFinished(k);
            }
            for (int k = 0; k < PROMPTS.size(); k++) {
                int[] expected = alone(server.h, PROMPTS.get(k), 32, configs.get(k));
                assertArrayEquals(expected, served.get(k).generatedTokens(), "seeded sequence " + k + ": the tokens it gives alone");
            }
        }
    }

    @Test
    void aCancelledSequenceStopsWithinAStepFreesItsCacheInEveryStageAndTheOthersAreUntouched() throws Exception {
        try (Server server = new Server()) {
            SequenceState kept = server.submit(0, PROMPTS.get(2), 40, GREEDY);
            SequenceState dropped = server.submitEndless(1, PROMPTS.get(1));
            server.awaitTokens(1, 4);
            server.scheduler.get().cancel(1);
            server.awaitFinished(1);
            assertEquals(StopReason.CANCELLED, dropped.stoppedBy());
            int at = dropped.generatedCount();
            server.awaitFinished(0);
            assertEquals(at, dropped.generatedCount(), "no token after the cancellation");
            assertArrayEquals(alone(server.h, PROMPTS.get(2), 40, GREEDY), kept.generatedTokens());
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            for (int i = 0; i < 2; i++) {
                while (server.stages.stage(i).range().cache().usedPages() != 0 && System.nanoTime() < deadline) {
                    Thread.sleep(5);
                }
                assertEquals(0, server.stages.stage(i).range().cache().usedPages(), "stage" + i + "'s KV cache is free again");
            }
        }
    }

    @Test
    void aStageLostWhileServingIsReplacedTheRequestsFinishWithTheirTokensAndEveryCacheEndsEmpty() throws Exception {
        List<String> statuses = java.util.Collections.synchronizedList(new ArrayList<>());
        try (Server server = new Server(statuses::add)) {
            List<SequenceState> seqs = new ArrayList<>();
            for (int i = 0; i < PROMPTS.size(); i++) {
                seqs.add(server.submit(i, PROMPTS.get(i), 40, GREEDY));
            }
            server.awaitTokens(0, 5);
            server.stages.kill(1);
            for (int i = 0; i < PROMPTS.size(); i++) {
                server.awaitFinished(i);
            }
            // The tiny model may finish all four before the loss is seen; a request after it must cross the lost stage.
            int late = PROMPTS.size();
            seqs.add(server.submit(late, PROMPTS.get(0), 40, GREEDY));
            server.awaitFinished(late);
            List<SequenceState> alone = server.h.runSingle(PROMPTS, 40, GREEDY);
            for (int i = 0; i <= late; i++) {
                assertArrayEquals(alone.get(i % late).generatedTokens(), seqs.get(i).generatedTokens(), "request " + i);
                assertEquals(seqs.get(i).generatedCount(), server.tokens.get(i).get(), "each token streamed once");
            }
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while ((server.stages.stage(0).range().cache().liveSequences() > 0 || server.stages.stage(1).range().cache().liveSequences() > 0)
                    && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            for (int i = 0; i < 2; i++) {
                assertEquals(0, server.stages.stage(i).range().cache().liveSequences(), "stage " + i + "'s KV cache, session still open");
            }
            assertTrue(statuses.stream().anyMatch(st -> st != null && st.contains("stage1") && st.contains("is down")), statuses::toString);
            assertTrue(statuses.contains(null), "recovered: " + statuses);
        }
    }
}
