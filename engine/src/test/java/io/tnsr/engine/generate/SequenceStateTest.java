package io.tnsr.engine.generate;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** A sequence's prefill, and its replay after the pipeline lost its KV cache. */
class SequenceStateTest {
    private static SequenceState sequence() {
        return new SequenceState(7, "p", new int[] {1, 10, 11, 12, 13}, 100, 1000, -1, t -> false,
                new Sampler(SamplingConfig.GREEDY, 512));
    }

    /** Takes the whole prefill in chunks of {@code chunk}: the tokens and the first position of each chunk. */
    private static int[] drain(SequenceState s, int chunk, int[] positions) {
        int[] all = new int[s.prefillRemaining()];
        int got = 0;
        int c = 0;
        while (s.prefillRemaining() > 0) {
            int n = Math.min(chunk, s.prefillRemaining());
            positions[c++] = s.takePrefill(n, all, got);
            got += n;
        }
        return all;
    }

    @Test
    void aRewoundSequenceReplaysItsPromptThenEveryTokenChosenInChunksOfAnySize() {
        for (int chunk : new int[] {1, 2, 3, 4, 5, 6, 100}) {
            SequenceState s = sequence();
            drain(s, 4, new int[8]);
            for (int t : new int[] {20, 21, 22, 23}) {
                s.accept(t, 1);
            }
            assertEquals(8, s.nextPosition(), "token 23 is fed at position 8");
            s.rewind();
            assertEquals(9, s.prefillRemaining(), "the prompt and all four tokens chosen");
            int[] positions = new int[16];
            int[] replay = drain(s, chunk, positions);
            assertArrayEquals(new int[] {1, 10, 11, 12, 13, 20, 21, 22, 23}, replay, "chunks of " + chunk);
            for (int i = 0; positions[i] != 0 || i == 0; i++) {
                assertEquals(i * chunk, positions[i], "chunk " + i + " of " + chunk + " starts where the previous ended");
                if ((i + 1) * chunk >= 9) {
                    break;
                }
            }
            assertEquals(8, s.nextPosition(), "decode resumes where it was");
            assertEquals(23, s.lastToken());
            assertArrayEquals(new int[] {20, 21, 22, 23}, Arrays.copyOf(s.generatedTokens(), 4));
        }
    }

    @Test
    void aSequenceRewoundDuringItsPromptReplaysThePromptOnly() {
        SequenceState s = sequence();
        s.takePrefill(3, new int[8], 0);
        s.rewind();
        assertEquals(5, s.prefillRemaining());
        assertArrayEquals(new int[] {1, 10, 11, 12, 13}, drain(s, 2, new int[8]));
    }
}
