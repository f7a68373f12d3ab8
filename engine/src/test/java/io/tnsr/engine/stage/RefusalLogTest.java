package io.tnsr.engine.stage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** Refused connections are logged at once after a quiet interval, then counted per address, one line per interval. */
class RefusalLogTest {
    private static final long SECOND = 1_000_000_000L;

    @Test
    void theFirstRefusalIsLoggedAtOnceAndAFloodInOneLinePerInterval() {
        RefusalLog log = new RefusalLog(5 * SECOND);
        assertEquals("refused a connection from 10.0.0.9:4000: 2 pending", log.refused("10.0.0.9", "10.0.0.9:4000", "2 pending", 0));
        for (int i = 1; i <= 1000; i++) {
            assertNull(log.refused("10.0.0.9", "10.0.0.9:" + (4000 + i), "2 pending", i * 1000L));
        }
        assertNull(log.refused("10.0.0.7", "10.0.0.7:5000", "model fingerprint differs", 2 * SECOND));
        assertNull(log.flush(4 * SECOND), "nothing before the interval is over");
        String line = log.flush(5 * SECOND);
        assertEquals("refused 1001 more connections in 5.0 s (1002 in all): 1000 from 10.0.0.9 (2 pending); 1 from 10.0.0.7"
                + " (model fingerprint differs)", line);
        assertNull(log.flush(6 * SECOND), "nothing held back");
        String next = log.refused("10.0.0.9", "10.0.0.9:6000", "2 pending", 7 * SECOND);
        assertNull(next, "within the interval since the summary: held");
        assertTrue(log.refused("10.0.0.9", "10.0.0.9:6001", "2 pending", 10 * SECOND).startsWith("refused 2 more connections in 3.0 s"));
        assertEquals("refused a connection from 10.0.0.9:7000: 2 pending", log.refused("10.0.0.9", "10.0.0.9:7000", "2 pending",
                20 * SECOND), "after a quiet interval, at once again");
    }

    @Test
    void aFloodFromManyAddressesNamesAFewAndCountsTheRest() {
        RefusalLog log = new RefusalLog(SECOND);
        log.refused("10.0.0.1", "10.0.0.1:1", "busy", 0);
        for (int i = 0; i < 100; i++) {
            log.refused("10.0.1." + i, "10.0.1." + i + ":1", "busy", 1000 + i);
        }
        String line = log.flush(SECOND);
        assertTrue(line.startsWith("refused 100 more connections"), line);
        assertTrue(line.contains("1 from 10.0.1.7 (busy)") && !line.contains("10.0.1.8 ") && line.endsWith("; 92 from other addresses"),
                line);
    }
}
