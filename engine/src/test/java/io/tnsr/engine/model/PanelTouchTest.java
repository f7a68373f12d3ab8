package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * How a matrix chooses whether to read each panel before its token groups: from the times of its own calls, a
 * probe of the other way at a time, compared with the calls on either side of it. (That the results are the same
 * bits either way: PanelMatricesTest and ScaleMinTypesTest, with the choice fixed each way.)
 */
class PanelTouchTest {
    private static final long SHAPE = 16L << 32 | 24;

    /** Runs {@code calls} calls of one shape that take {@code plain} ns without the pass and {@code touched} with it. */
    private static int run(PanelTouch c, int calls, long plain, long touched, long shape) {
        int touchedCalls = 0;
        for (int i = 0; i < calls; i++) {
            boolean touch = c.touchNext();
            touchedCalls += touch ? 1 : 0;
            c.took(shape, touch ? touched : plain);
        }
        return touchedCalls;
    }

    @Test
    void startsWithoutThePassAndTakesItWhenItIsFaster() {
        PanelTouch c = new PanelTouch();
        assertFalse(c.touching());
        assertFalse(c.touchNext(), "the first call runs as the mode in use");
        run(c, PanelTouch.VOTES * (PanelTouch.MIN_INTERVAL + 2) - 1, 1000, 800, SHAPE);
        assertFalse(c.touching(), "one vote short");
        run(c, 1, 1000, 800, SHAPE);
        assertTrue(c.touching(), "a full set of votes of 0.8 switches");
        int plainCalls = 200 - run(c, 200, 1000, 800, SHAPE);
        assertTrue(plainCalls > 0 && plainCalls < 200 / PanelTouch.MIN_INTERVAL,
                "the probes now run without the pass, rarely: " + plainCalls);
    }

    @Test
    void keepsTheModeInUseWhileTheOtherIsSlowerAndProbesLessAndLessOften() {
        PanelTouch c = new PanelTouch();
        int touched = run(c, 4000, 1000, 1300, SHAPE); // a matrix the cache holds: the pass costs 30%
        assertFalse(c.touching());
        assertEquals(PanelTouch.MAX_INTERVAL, c.interval(), "confirmed again and again, the probes grow rare");
        assertTrue(touched < 40, touched + " of 4000 calls ran the slower way");
    }

    @Test
    void aChoiceThatStartsWithThePassDropsItWhereItCosts() {
        PanelTouch c = new PanelTouch(true); // one-token calls: read ahead until shown slower
        assertTrue(c.touching());
        assertTrue(c.touchNext(), "the first call reads ahead");
        run(c, 1000, 1000, 1300, SHAPE); // a matrix the cache holds: reading ahead costs 30%
        assertFalse(c.touching());
        PanelTouch kept = new PanelTouch(true);
        run(kept, 1000, 2000, 1000, SHAPE); // from memory: half the time
        assertTrue(kept.touching());
        assertEquals(PanelTouch.MAX_INTERVAL, kept.interval());
    }

    @Test
    void aCloseCallChangesNothing() {
        PanelTouch c = new PanelTouch();
        run(c, 1000, 1000, 970, SHAPE); // 3% faster: within what a host's noise moves
        assertFalse(c.touching());
        assertEquals(PanelTouch.MIN_INTERVAL, c.interval(), "neither confirmed nor switched");
    }

    @Test
    void switchesBackWhenTheCacheStartsHoldingTheMatrix() {
        PanelTouch c = new PanelTouch();
        run(c, 200, 1000, 800, SHAPE);
        assertTrue(c.touching());
        run(c, 1000, 700, 1000, SHAPE); // now the pass costs more than it saves: a majority of votes, up to 258 calls apart
        assertFalse(c.touching());
    }

    @Test
    void oneLuckyProbeIsOutvoted() {
        PanelTouch c = new PanelTouch();
        int probes = 0;
        for (int i = 0; i < 200; i++) {
            boolean touch = c.touchNext();
            probes += touch ? 1 : 0;
            c.took(SHAPE, touch && probes % PanelTouch.VOTES == 2 ? 500 : 1000); // every fifth probe ran alone
        }
        assertTrue(probes >= PanelTouch.VOTES);
        assertFalse(c.touching(), "the median of the votes, not the best one, decides");
    }

    @Test
    void onlyCallsOfOneShapeAreCompared() {
        PanelTouch c = new PanelTouch();
        for (int i = 0; i < 1000; i++) { // alternating shapes: no probe has both neighbours of its shape
            boolean touch = c.touchNext();
            c.took(i % 2 == 0 ? SHAPE : SHAPE + 1, touch ? 100 : 1000);
        }
        assertFalse(c.touching(), "a probe beside calls of other work is no evidence");
    }

    @Test
    void aFixedChoiceNeverProbes() {
        PanelTouch c = new PanelTouch();
        run(c, PanelTouch.MIN_INTERVAL, 1000, 1000, SHAPE); // the next call would be a probe
        c.fix(true);
        assertEquals(500, run(c, 500, 100, 1000, SHAPE), "every call touches, however slow");
        c.fix(false);
        assertEquals(0, run(c, 500, 1000, 100, SHAPE));
    }

    @Test
    void aModeSetKeepsItsProbesAndARestartStartsAfresh() {
        PanelTouch c = new PanelTouch(true);
        run(c, 4000, 2000, 1000, SHAPE); // reading ahead confirmed: probes 256 calls apart
        assertEquals(PanelTouch.MAX_INTERVAL, c.interval());
        c.use(false); // a warm-up round sets it the other way
        assertFalse(c.touching());
        int touched = run(c, 2 * PanelTouch.MAX_INTERVAL, 1000, 1000, SHAPE);
        assertTrue(touched >= 1 && touched <= 3, "its probes go on, the other way: " + touched);
        c.restart();
        assertTrue(c.touching(), "back to the mode it starts in");
        int calls = PanelTouch.VOTES * (PanelTouch.MIN_INTERVAL + 2) - 1;
        int plainCalls = calls - run(c, calls, 800, 1000, SHAPE); // now the other way is faster
        assertEquals(PanelTouch.VOTES, plainCalls, "a probe every " + PanelTouch.MIN_INTERVAL + " calls again, not 256");
        assertTrue(c.touching(), "one vote short: the votes from before the restart are gone");
        run(c, 1, 800, 1000, SHAPE);
        assertFalse(c.touching(), "five fresh votes switch it");
    }
}
