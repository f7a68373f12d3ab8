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
    void openAisParametersThisServerDoesNotImplementPassAtTheirDefaultAndAreRefusedOtherwise() {
        // what the openai SDK and LangChain send when nobody asked for these
        String chatDefaults = "{\"presence_penalty\": 0, \"frequency_penalty\": 0.0, \"n\": 1, \"logit_bias\": null, "
                + "\"tools\": [], \"functions\": null, \"tool_choice\": \"none\", \"function_call\": \"auto\", "
                + "\"response_format\": {\"type\": \"text\"}, \"modalities\": [\"text\"], \"audio\": null, "
                + "\"user\": \"u1\", \"min_p\": 0.05, \"repeat_penalty\": 1.1}";
        OpenAiHttpServer.parse(OpenAiHttpServer.object(chatDefaults.getBytes(StandardCharsets.UTF_8)), "x", true);
        String completionDefaults = "{\"presence_penalty\": 0, \"frequency_penalty\": 0, \"n\": 1, \"logit_bias\": {}, "
                + "\"echo\": false, \"best_of\": 1, \"suffix\": null, \"logprobs\": null, \"user\": \"u1\"}";
        OpenAiHttpServer.parse(OpenAiHttpServer.object(completionDefaults.getBytes(StandardCharsets.UTF_8)), "x", false);
        OpenAiHttpServer.parse(OpenAiHttpServer.object("{\"suffix\": \"\"}".getBytes(StandardCharsets.UTF_8)), "x", false);

        record Case(String field, String value, boolean chat) {
        }
        for (Case c : List.of(
                new Case("presence_penalty", "0.5", true), new Case("frequency_penalty", "-1", false),
                new Case("logit_bias", "{\"50256\": -100}", true), new Case("logit_bias", "{\"7\": 5}", false),
                new Case("response_format", "{\"type\": \"json_object\"}", true),
                new Case("response_format", "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"x\"}}", true),
                new Case("tools", "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]", true),
                new Case("functions", "[{\"name\": \"get_weather\"}]", true),
                new Case("tool_choice", "\"required\"", true),
                new Case("tool_choice", "{\"type\": \"function\", \"function\": {\"name\": \"f\"}}", true),
                new Case("function_call", "{\"name\": \"f\"}", true),
                new Case("modalities", "[\"text\", \"audio\"]", true), new Case("audio", "{\"voice\": \"alloy\"}", true),
                new Case("echo", "true", false), new Case("best_of", "3", false), new Case("suffix", "\"}\"", false))) {
            String body = "{\"" + c.field() + "\": " + c.value() + "}";
            CompletionService.InvalidRequestException e = parseRefused(body, c.chat());
            assertTrue(e.getMessage().startsWith("'" + c.field() + "' is not supported by this server"), body + " -> " + e.getMessage());
            assertEquals(c.field(), e.param(), body);
            assertEquals("unsupported_value", e.code(), body);
        }
        for (String body : List.of("{\"presence_penalty\": \"high\"}", "{\"logit_bias\": [1]}", "{\"tools\": {}}",
                "{\"echo\": 1}")) {
            assertEquals("invalid_type", parseRefused(body, body.contains("tools")).code(), body);
        }
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
        assertEquals("the body is not valid JSON: more data after the JSON value at line 1, column 17",
                refused("{\"prompt\": \"x\"} 7").getMessage());
        assertTrue(refused("{\"prompt\": \"x\"} x").getMessage().startsWith("the body is not valid JSON: "));
    }
}
