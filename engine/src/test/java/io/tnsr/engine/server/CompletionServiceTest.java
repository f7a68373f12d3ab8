package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.sampling.SamplingConfig;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Completions over a serving pipeline of two in-process stages (real sockets), as a server's requests use it. */
@Timeout(120)
class CompletionServiceTest {
    private static final String PROMPT = "once upon a time";

    private ServingPipeline pipeline;
    private CompletionService service;

    @BeforeEach
    void serve() throws Exception {
        pipeline = new ServingPipeline();
        service = pipeline.service;
    }

    @AfterEach
    void stop() throws Exception {
        pipeline.close();
    }

    private String alone(String prompt, int maxTokens, SamplingConfig sc) {
        return pipeline.alone(prompt, maxTokens, sc);
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
    void theStreamedTextIsTheTextGenerateGives() throws Exception {
        Completion greedy = service.submit(new CompletionService.Request(PROMPT, 30, SamplingConfig.GREEDY, List.of()));
        Completion other = service.submit(new CompletionService.Request(PROMPT + " and", 30, SamplingConfig.GREEDY, List.of()));
        String streamed = drain(greedy);
        assertEquals(alone(PROMPT, 30, SamplingConfig.GREEDY), streamed);
        assertEquals(streamed, greedy.awaitText(1000));
        assertEquals(alone(PROMPT + " and", 30, SamplingConfig.GREEDY), drain(other), "beside another request, its solo text");
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
        String longPrompt = "a b c d ".repeat(pipeline.cfg.contextLength());
        CompletionService.InvalidRequestException e = assertThrows(CompletionService.InvalidRequestException.class,
                () -> service.submit(new CompletionService.Request(longPrompt, 5, SamplingConfig.GREEDY, List.of())));
        assertTrue(e.getMessage().contains("the model's context holds " + pipeline.cfg.contextLength()), e.getMessage());
        assertEquals(0, service.active());
    }

    @Test
    void maxTokensMayFillTheContextAfterThePromptButNotAskForMore() throws Exception {
        int context = pipeline.cfg.contextLength();
        Completion full = service.submit(new CompletionService.Request(PROMPT, CompletionService.Request.TO_CONTEXT,
                SamplingConfig.GREEDY, List.of(), false, true, -1));
        drain(full);
        int room = context - full.promptTokens() + 1;
        assertEquals(room, full.completionTokens(), "without a bound the sequence runs until the context is full");
        assertEquals(Completion.Finish.LENGTH, full.finish());

        Completion exact = service.submit(new CompletionService.Request(PROMPT, room, SamplingConfig.GREEDY, List.of(),
                false, true, -1));
        drain(exact);
        assertEquals(room, exact.completionTokens());
        CompletionService.InvalidRequestException e = assertThrows(CompletionService.InvalidRequestException.class,
                () -> service.submit(new CompletionService.Request(PROMPT, room + 1, SamplingConfig.GREEDY, List.of())));
        assertEquals("max_tokens is " + (room + 1) + ", but after the prompt's " + full.promptTokens()
                + " tokens the model's context of " + context + " has room for " + room, e.getMessage());
        assertEquals("max_tokens", e.param());
        assertEquals("context_length_exceeded", e.code());
        assertEquals(0, service.active());
    }
}
