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
 * The short soak CI runs: three stage processes serving four sequences at a time for a minute while a random stage is
 * killed or stopped every 8 to 12 s (about five losses). Every sequence must match one process's tokens, every loss be
 * recovered, and the KV pools, threads and open files end where they were.
 */
@Timeout(300)
class SoakCommandTest {

    @Test
    void aOneMinuteSoakWithAStageLostEveryEightToTwelveSecondsPasses() {
        Object[] r = CliRun.run(new SoakCommand(), "--stages", "3", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--duration", "60", "--kill-every", "8:12", "--concurrency", "4", "--max-tokens", "300", "--sample-every", "5",
                "--seed", "3", "--json");
        Map<?, ?> report = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals("pass", report.get("verdict"), () -> report.get("reasons") + "\n" + r[2]);
        assertEquals(0, r[0]);
        long losses = ((Number) report.get("losses")).longValue();
        assertTrue(losses >= 4, "stages were lost: " + losses);
        assertEquals(losses, ((Number) report.get("recoveries")).longValue(), "each loss recovered");
        assertEquals(report.get("sequences_submitted"), report.get("sequences_matching_reference"));
        List<?> samples = (List<?>) report.get("samples");
        Map<?, ?> last = (Map<?, ?>) samples.get(samples.size() - 1);
        for (Object stage : (List<?>) last.get("stages")) {
            assertEquals(0L, ((Number) ((Map<?, ?>) stage).get("kv_pages_used")).longValue(), "KV pages at the end: " + stage);
        }
    }

    /**
     * With --tokens alone the soak serves until that many tokens were served, then lets the running sequences finish:
     * a little more than the limit, checked like any soak.
     */
    @Test
    void aSoakGivenATokenCountStopsOnceThatManyTokensWereServed() {
        Object[] r = CliRun.run(new SoakCommand(), "--stages", "2", "--model", SharedData.path("models/stories260K.gguf").toString(),
                "--tokens", "400", "--kill-every", "600", "--concurrency", "4", "--max-tokens", "50", "--prompts", "4",
                "--sample-every", "5", "--json");
        Map<?, ?> report = (Map<?, ?>) TestJson.parse(((String) r[1]).strip());
        assertEquals("pass", report.get("verdict"), () -> report.get("reasons") + "\n" + r[2]);
        assertEquals(0, r[0]);
        assertEquals("tokens", report.get("stopped_by"));
        long served = ((Number) report.get("tokens_served")).longValue();
        // at most the sequences running at the limit finish after it: 4 of 50 tokens each
        assertTrue(served >= 400 && served <= 400 + 4 * 50, "tokens served: " + served);
        assertEquals(0L, ((Number) report.get("losses")).longValue(), "no stage lost before the first kill was due");
        assertEquals(report.get("sequences_submitted"), report.get("sequences_matching_reference"));
    }

    @Test
    void aDurationOrATokenCountThatIsNotPositiveIsRefusedNamingIt() {
        for (String option : new String[] {"--tokens", "--duration"}) {
            Object[] zero = CliRun.run(new SoakCommand(), "--stages", "2", "--model",
                    SharedData.path("models/stories260K.gguf").toString(), option, "0");
            assertEquals(2, zero[0], option);
            assertTrue(((String) zero[2]).contains(option), (String) zero[2]);
        }
    }
}
