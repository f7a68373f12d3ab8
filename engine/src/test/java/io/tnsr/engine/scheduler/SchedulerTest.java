package io.tnsr.engine.scheduler;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.generate.StopReason;
import io.tnsr.engine.generate.TokenChooser;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The scheduler driven by hand, as the coordinator drives it, with no pipeline behind it. */
class SchedulerTest {
    private static final int VOCAB = 16;
    private static final int EOS = 2;
    private static final int NEXT = 5;   // the token every logits row here chooses (greedy)

    private final Sampler sampler = new Sampler(SamplingConfig.GREEDY, VOCAB);
    private final List<String> events = new ArrayList<>();
    private final float[] row = new float[VOCAB];
    private long step = 1;
    private long now = 1_000;

    SchedulerTest() {
        row[NEXT] = 10f;
    }

    private Scheduler scheduler(int microBatches, int perBatch, int tokensPerStep) {
        Generator.Listener listener = new Generator.Listener() {
            @Override
            public void onToken(SequenceState seq, int token) {
                events.add("token " + seq.index() + ":" + token);
            }

            @Override
            public void onFinished(SequenceState seq) {
                events.add("finished " + seq.index() + " " + seq.stoppedBy());
            }
        };
        return new Scheduler(new Scheduler.Limits(microBatches, perBatch, tokensPerStep, 8), new TokenChooser(listener),
                new Scheduler.Metrics(new LatencyMetric("ttft", ""), new LatencyMetric("tpot", ""), new LatencyMetric("request", "")));
    }

    private SequenceState seq(int index, int promptLength, int maxNewTokens) {
        int[] prompt = new int[promptLength];
        Arrays.fill(prompt, 7);
        prompt[0] = 1;
        SequenceState s = new SequenceState(index, "p" + index, prompt, maxNewTokens, 64, 1, t -> t == EOS, sampler);
        s.started(0);
        return s;
    }

    /** Composes micro-batch mb's step; null when there is nothing to send. */
    private Scheduler.Step send(Scheduler s, int mb) {
        Scheduler.Step st = new Scheduler.Step(s.limits());
        return s.compose(mb, step++, now++, st) ? st : null;
    }

    /** The pipeline answers the step: one logits row per entry that wants one. */
    private void answer(Scheduler s, Scheduler.Step st) {
        assertTrue(s.inFlight(st.microBatch(), st.id()));
        for (int e = 0; e < st.batch().sequences(); e++) {
            if (st.batch().wantLogits(e)) {
                s.choose(st.batch().seqId(e), row, 0, now++);
            }
        }
        s.stepDone(st.microBatch(), now++);
    }

    private static int[] entries(Scheduler.Step st) {
        int[] ids = new int[st.batch().sequences()];
        for (int e = 0; e < ids.length; e++) {
            ids[e] = st.batch().seqId(e);
        }
        return ids;
    }

    private static int[] ended(Scheduler s) {
        int[] ids = Arrays.copyOf(s.ended(), s.endedCount());
        s.clearEnded();
        return ids;
    }

    @Test
    void waitingSequencesAreAdmittedAsOthersFinish() {
        Scheduler s = scheduler(1, 2, 64);
        SequenceState a = seq(0, 3, 2);
        SequenceState b = seq(1, 3, 2);
        SequenceState c = seq(2, 3, 2);
        List.of(a, b, c).forEach(s::submit);
        assertEquals(2, s.admit(now, 0), "two places in the one micro-batch");
        assertEquals(1, s.waiting());

        Scheduler.Step prefill = send(s, 0);
        assertArrayEquals(new int[] {0, 1}, entries(prefill));
        assertEquals(6, prefill.batch().tokens(), "both prompts whole");
        answer(s, prefill);
        assertEquals(0, s.admit(now, 0), "no one finished: no room");

        Scheduler.Step decode = send(s, 0);
        assertEquals(2, decode.batch().tokens(), "one decode token each");
        assertEquals(3, decode.batch().position(0), "fed back after the 3 prompt tokens");
        answer(s, decode);
        assertEquals(StopReason.LIMIT, a.stoppedBy());
        assertArrayEquals(new int[] {0, 1}, ended(s), "both ended: END_SEQUENCE frees their caches");

        assertEquals(1, s.admit(now, 0), "the waiting one takes a freed place");
        assertArrayEquals(new int[] {2}, entries(send(s, 0)));
        assertEquals(List.of("token 0:5", "token 1:5", "token 0:5", "finished 0 LIMIT", "token 1:5", "finished 1 LIMIT"), events);
    }

    @Test
    void aSequenceThatFailsLeavesAndTheOthersGoOn() {
        Scheduler s = scheduler(1, 4, 64);
        SequenceState a = seq(0, 2, 8);
        SequenceState b = seq(1, 2, 8);
        s.submit(a);
        s.submit(b);
        s.admit(now, 0);
        answer(s, send(s, 0));
        Scheduler.Step st = send(s, 0);
        s.fail(0, "stage1: no free KV-cache page for sequence 0");
        s.choose(0, row, 0, now);             // its row, if the pipeline still sends one, is ignored
        s.choose(1, row, 0, now);
        s.stepDone(0, now);

        assertEquals(StopReason.ERROR, a.stoppedBy());
        assertEquals("stage1: no free KV-cache page for sequence 0", a.error());
        assertEquals(1, a.generatedCount());
        assertArrayEquals(new int[] {0}, ended(s));
        assertNull(b.stoppedBy());
        assertEquals(2, b.generatedCount());
        assertEquals(1, s.members(0));
        assertArrayEquals(new int[] {1}, entries(send(s, 0)), "only the other one runs on");
        assertEquals(2, st.batch().sequences());
    }

    @Test
    void aSequenceSubmittedMidRunJoinsAtTheNextStepOfAMicroBatchThatCameBack() {
        Scheduler s = scheduler(2, 4, 64);
        s.submit(seq(0, 2, 8));
        s.submit(seq(1, 2, 8));
        s.admit(now, 0);
        Scheduler.Step first = send(s, 0);
        Scheduler.Step second = send(s, 1);
        assertArrayEquals(new int[] {0}, entries(first), "one each, round robin");
        assertArrayEquals(new int[] {1}, entries(second));

        SequenceState late = seq(2, 3, 8);
        s.submit(late);
        assertEquals(0, s.admit(now, 0), "both micro-batches are in flight");
        assertEquals(1, s.waiting());
        answer(s, first);
        assertEquals(1, s.admit(now, 0));
        Scheduler.Step next = send(s, 0);
        assertArrayEquals(new int[] {0, 2}, entries(next), "decode of the running one, then the newcomer's prompt");
        assertEquals(0, next.batch().position(1));
        assertEquals(3, next.batch().tokenCount(1));
        assertTrue(next.batch().wantLogits(1), "its whole prompt fits: its first token comes with this step");
        assertTrue(late.admittedNanos() > 0);
    }

    @Test
    void microBatchesStayBalanced() {
        Scheduler s = scheduler(3, 4, 64);
        for (int i = 0; i < 7; i++) {
            s.submit(seq(i, 1, i < 3 ? 1 : 50));
        }
        assertEquals(7, s.admit(now, 0));
        int[] members = {s.members(0), s.members(1), s.members(2)};
        assertArrayEquals(new int[] {3, 2, 2}, members);

        // Sequences 0, 1 and 2 (one per micro-batch, the first of each) finish on their first token.
        Scheduler.Step[] steps = {send(s, 0), send(s, 1), send(s, 2)};
        for (Scheduler.Step st : steps) {
            answer(s, st);
        }
        assertArrayEquals(new int[] {0, 1, 2}, ended(s));
        assertArrayEquals(new int[] {2, 1, 1}, new int[] {s.members(0), s.members(1), s.members(2)});
        for (int i = 7; i < 9; i++) {
            s.submit(seq(i, 1, 50));
        }
        assertEquals(2, s.admit(now, 0));
        assertArrayEquals(new int[] {2, 2, 2}, new int[] {s.members(0), s.members(1), s.members(2)},
                "newcomers go to the micro-batches with the fewest members");
    }

    @Test
    void aStepCarriesDecodeTokensFirstThenPromptChunksWithinItsBudget() {
        Scheduler s = scheduler(1, 4, 8);
        s.submit(seq(0, 2, 20));
        s.admit(now, 0);
        answer(s, send(s, 0));                // sequence 0 prefilled and running
        s.submit(seq(1, 20, 20));             // a long prompt arrives
        s.admit(now, 0);
        Scheduler.Step st = send(s, 0);
        assertArrayEquals(new int[] {0, 1}, entries(st));
        assertEquals(1, st.batch().tokenCount(0), "the running sequence's decode token first");
        assertEquals(7, st.batch().tokenCount(1), "then as much prompt as the 8-row budget leaves");
        assertFalse(st.batch().wantLogits(1), "no logits before the prompt's last chunk");
        assertEquals(8, st.batch().tokens());
        answer(s, st);
        Scheduler.Step rest = send(s, 0);
        assertEquals(7, rest.batch().position(1), "the prompt goes on where it stopped");
    }

    /** Two micro-batches, steps of 64 rows, and sequence 0 alone with a 40-token prompt, admitted. */
    private Scheduler lonePrompt() {
        Scheduler s = scheduler(2, 4, 64);
        s.submit(seq(0, 40, 8));
        s.admit(now, 0);
        return s;
    }

    @Test
    void aLonePromptTravelsInTheStepsOfEveryMicroBatchAndDecodesOnlyOnceItsLastChunkIsBack() {
        Scheduler s = lonePrompt();
        Scheduler.Step first = send(s, 0);
        assertArrayEquals(new int[] {0}, entries(first));
        assertEquals(20, first.batch().tokenCount(0), "half the prompt: the other micro-batch carries the rest");
        assertFalse(first.batch().wantLogits(0));
        Scheduler.Step second = send(s, 1);
        assertArrayEquals(new int[] {0}, entries(second), "micro-batch 1 has no members, but carries the prompt's rest");
        assertEquals(20, second.batch().position(0));
        assertEquals(20, second.batch().tokenCount(0));
        assertTrue(second.batch().wantLogits(0), "the last chunk brings the first token");

        answer(s, first);
        assertNull(send(s, 0), "no decode token before the last chunk's logits are back");
        answer(s, second);
        assertEquals(List.of("token 0:" + NEXT), events);
        Scheduler.Step decode = send(s, 0);
        assertArrayEquals(new int[] {0}, entries(decode));
        assertEquals(40, decode.batch().position(0));
        assertEquals(1, decode.batch().tokenCount(0));
        assertNull(send(s, 1), "micro-batch 1 has nothing left to carry");
    }

    @Test
    void aStepThatFailsWholeFailsTheSequencesWhosePromptChunksRodeInIt() {
        Scheduler s = lonePrompt();
        Scheduler.Step first = send(s, 0);
        Scheduler.Step second = send(s, 1);
        assertArrayEquals(new int[] {0}, entries(second));
        s.failStep(1, "stage 1: out of memory", now++);
        assertEquals(List.of("finished 0 " + StopReason.ERROR), events, "its cache misses the chunk that step carried");
        assertArrayEquals(new int[] {0}, ended(s), "its id goes to END_SEQUENCE");
        answer(s, first);
        assertFalse(s.busy());
    }

    @Test
    void promptsThatFillEveryStepAreNotCutIntoShares() {
        Scheduler s = scheduler(2, 4, 16);
        s.submit(seq(0, 40, 8));
        s.submit(seq(1, 40, 8));
        s.admit(now, 0);
        Scheduler.Step first = send(s, 0);
        assertArrayEquals(new int[] {0}, entries(first));
        assertEquals(16, first.batch().tokenCount(0), "80 prompt tokens left, two steps of 16 rows: whole steps of it");
    }

    @Test
    void aSequenceRefusedBeforeItStartsIsReportedAndNeverRuns() {
        Scheduler s = scheduler(1, 4, 64);
        SequenceState tooLong = new SequenceState(0, "x", new int[100], 8, 64, 1, t -> t == EOS, sampler);
        s.submit(tooLong);
        assertEquals(0, s.admit(now, 0));
        assertFalse(s.busy());
        assertEquals(List.of("finished 0 ERROR"), events);
    }

    @Test
    void anOpenLoopSequenceJoinsNoEarlierThanItIsDue() {
        Scheduler s = scheduler(1, 4, 64);
        SequenceState later = seq(0, 2, 4);
        later.started(5_000_000);
        s.submit(later);
        assertEquals(5_000_000, s.nextDueNanos());
        assertEquals(0, s.admit(4_999_999, 0));
        assertEquals(1, s.admit(5_000_000, 0));
        assertEquals(5_000_000, later.admittedNanos());
    }

    @Test
    void aCancelledSequenceEndsAtTheNextAdmissionAndItsRowInFlightIsIgnored() {
        Scheduler s = scheduler(1, 4, 64);
        SequenceState a = seq(0, 2, 50);
        SequenceState b = seq(1, 2, 50);
        SequenceState waitingOne = seq(2, 2, 50);
        s.submit(a);
        s.submit(b);
        s.admit(now, 0);
        answer(s, send(s, 0));
        Scheduler.Step inFlight = send(s, 0);
        s.submit(waitingOne);
        s.cancel(0);                          // from another thread, while its step is in flight
        s.cancel(2);                          // waiting, never admitted
        s.cancel(99);                         // unknown: ignored
        assertEquals(0, s.admit(now, 0), "the micro-batch is in flight: no one joins");
        assertEquals(StopReason.CANCELLED, a.stoppedBy());
        assertEquals(StopReason.CANCELLED, waitingOne.stoppedBy());
        assertArrayEquals(new int[] {0}, ended(s), "END_SEQUENCE for the one the stages hold; none for the waiting one");
        answer(s, inFlight);                  // its row comes back: ignored
        assertEquals(1, a.generatedCount());
        assertEquals(2, b.generatedCount());
        assertArrayEquals(new int[] {1}, entries(send(s, 0)));
        assertFalse(s.running(0));
        assertTrue(events.contains("finished 0 CANCELLED") && events.contains("finished 2 CANCELLED"), events::toString);
    }

    @Test
    void aSequenceThatWaitsPastItsLimitExpiresWithoutRunningAndTheNextOneStillJoins() {
        Scheduler s = scheduler(1, 1, 64);
        SequenceState running = seq(0, 2, 50);
        SequenceState late = seq(1, 2, 50);
        SequenceState patient = seq(2, 2, 50);
        late.admitBy(now + 10);
        s.submit(running);
        s.submit(late);
        s.submit(patient);
        assertEquals(1, s.admit(now, 0));
        answer(s, send(s, 0));
        now += 100;                           // past late's limit, not yet admitted
        s.cancel(0);
        assertEquals(1, s.admit(now, 0), "the expired one leaves; the one behind it takes the place");
        assertEquals(StopReason.EXPIRED, late.stoppedBy());
        assertEquals(0, late.generatedCount());
        assertArrayEquals(new int[] {0}, ended(s), "no END_SEQUENCE for one the stages never saw");
        assertArrayEquals(new int[] {2}, entries(send(s, 0)));
        assertTrue(events.contains("finished 1 EXPIRED"), events::toString);
    }

    @Test
    void aRewindReplaysTheRunningSequencesWholeHistoryAndNeverAFinishedOne() {
        Scheduler s = scheduler(1, 2, 64);
        SequenceState done = seq(0, 3, 1);
        SequenceState running = seq(1, 4, 5);
        List.of(done, running).forEach(s::submit);
        s.admit(now, 0);
        answer(s, send(s, 0));                        // both prompts; sequence 0 has its one token and ends
        assertTrue(done.finished());
        answer(s, send(s, 0));                        // sequence 1's second token
        Scheduler.Step lost = send(s, 0);             // in flight when the pipeline breaks
        assertEquals(2, running.generatedCount());

        assertEquals(1, s.rewindAll(), "only the running sequence is rewound");
        assertEquals(0, s.endedCount(), "no stage holds a cache to free");
        assertFalse(s.inFlight(lost.microBatch(), lost.id()), "the lost step is forgotten");
        Scheduler.Step replay = send(s, 0);
        assertArrayEquals(new int[] {1}, entries(replay), "the finished sequence is not replayed");
        assertEquals(0, replay.batch().position(0));
        assertEquals(4 + 2, replay.batch().tokens(), "its prompt and both tokens chosen so far, from position 0");
        assertArrayEquals(new int[] {1, 7, 7, 7, NEXT, NEXT}, Arrays.copyOf(replay.tokens(), 6));
        answer(s, replay);
        assertEquals(3, running.generatedCount(), "the replay's logits choose the next token, none again");
        assertEquals(List.of("token 0:5", "finished 0 LIMIT", "token 1:5", "token 1:5", "token 1:5"), events);
    }
}
