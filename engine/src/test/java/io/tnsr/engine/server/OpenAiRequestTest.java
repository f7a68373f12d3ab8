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
