package io.tnsr.engine.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The short soak CI runs: three stage processes serving four sequences at a time for 30 s while a random stage is
 * killed or stopped every 6 to 9 s. Every sequence must match one process's tokens, every loss be recovered, and the
 * KV pools, threads and open files end where they were.
 */
@Timeout(300)
class SoakCommandTest {

    @Test
    void aShortSoakWithAStageLostEverySixToNineSecondsPasses() {
        Object[] r = CliRun.run(new SoakCommand(), "--stages", "3", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--duration", "30", "--kill-every", "6:9", "--concurrency", "4", "--max-tokens", "300", "--sample-every", "5",
                "--seed", "3", "--json");
        Map<?, ?> report = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals("pass", report.get("verdict"), () -> report.get("reasons") + "\n" + r[2]);
        assertEquals(0, r[0]);
        long losses = ((Number) report.get("losses")).longValue();
        assertTrue(losses >= 2, "stages were lost: " + losses);
        assertEquals(losses, ((Number) report.get("recoveries")).longValue(), "each loss recovered");
        assertEquals(report.get("sequences_submitted"), report.get("sequences_matching_reference"));
        List<?> samples = (List<?>) report.get("samples");
        Map<?, ?> last = (Map<?, ?>) samples.get(samples.size() - 1);
        for (Object stage : (List<?>) last.get("stages")) {
            assertEquals(0L, ((Number) ((Map<?, ?>) stage).get("kv_pages_used")).longValue(), "KV pages at the end: " + stage);
        }
    }
}
