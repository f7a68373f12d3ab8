package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

/** How {@link OpenAiHttpServer} reads a request body and its parameters, without a server. */
class OpenAiRequestTest {

    private static CompletionService.InvalidRequestException refused(String body) {
        return assertThrows(CompletionService.InvalidRequestException.class,
                () -> OpenAiHttpServer.object(body.getBytes(StandardCharsets.UTF_8)), body);
    }

    /** What parse refuses in a completion ({@code chat} false) or chat request of this body. */
    private static CompletionService.InvalidRequestException parseRefused(String body, boolean chat) {
        return assertThrows(CompletionService.InvalidRequestException.class,
                () -> OpenAiHttpServer.parse(OpenAiHttpServer.object(body.getBytes(StandardCharsets.UTF_8)), "x", chat), body);
    }

    @Test
    void anIntegerBeyondItsRangeIsOutOfRangeAndNamesTheRange() {
        record Case(String body, String param, String says) {
        }
        for (Case c : List.of(
                new Case("{\"max_tokens\": 99999999999999999999}", "max_tokens",
                        "'max_tokens' is out of range: it must be 1 to 2147483647, got 99999999999999999999"),
                new Case("{\"max_tokens\": 2147483648}", "max_tokens", "'max_tokens' is out of range: it must be 1 to 2147483647"),
                new Case("{\"max_tokens\": 0}", "max_tokens", "'max_tokens' is out of range: it must be 1 to 2147483647, got 0"),
                new Case("{\"max_completion_tokens\": -5}", "max_completion_tokens", "'max_completion_tokens' is out of range"),
                new Case("{\"top_k\": -1}", "top_k", "'top_k' is out of range: it must be 0 to 2147483647, got -1"),
                new Case("{\"seed\": 99999999999999999999}", "seed",
                        "'seed' is out of range: it must be -9223372036854775808 to 9223372036854775807"))) {
            CompletionService.InvalidRequestException e = parseRefused(c.body(), false);
            assertTrue(e.getMessage().startsWith(c.says()), e.getMessage());
            assertEquals(c.param(), e.param());
            assertEquals("invalid_value", e.code());
        }
        for (String notAnInteger : List.of("{\"max_tokens\": \"five\"}", "{\"max_tokens\": 5.5}", "{\"seed\": true}")) {
            CompletionService.InvalidRequestException e = parseRefused(notAnInteger, false);
            assertTrue(e.getMessage().contains("must be an integer"), e.getMessage());
            assertEquals("invalid_type", e.code());
        }
        CompletionService.InvalidRequestException n = parseRefused("{\"n\": 99999999999999999999}", true);
        assertEquals("'n' must be 1, got 99999999999999999999", n.getMessage());
    }

    @Test
    void aBodyThatIsNotJsonIsNamedInOneSentenceWithItsPlace() {
        assertEquals("the body is not valid JSON: unexpected end of input at line 1, column 12",
                refused("{\"prompt\": ").getMessage());
        assertEquals("the body is not valid JSON: unexpected end of input at line 1, column 33",
                refused("{\"model\": \"tiny\", \"prompt\": \"abc").getMessage());
        assertEquals("the body is not valid JSON: unexpected close marker '}': expected ']' at line 1, column 12",
                refused("{\"a\": [1, 2}").getMessage());
        for (String body : List.of("{\"prompt\": \"x\",}", "{prompt: 1}", "abc", "{\"a\": \"x\ny\"}", "{\"a\": 01}",
                "{\"a\": NaN}", "{\"a\": \"\\q\"}", "{\"a\": [1, 2}", "{\"a\": {\"b\": [")) {
            String message = refused(body).getMessage();
            assertTrue(message.startsWith("the body is not valid JSON: ") && message.matches(".* at line \\d+, column \\d+"),
                    message);
            for (String internal : List.of("Source", "REDACTED", "`", "VALUE_", "\n", "(code ")) {
                assertTrue(!message.contains(internal), body + " -> " + message);
            }
        }
        assertEquals("the body must be a JSON object", refused("[1]").getMessage());
    }
}
