package io.tnsr.engine.server;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import io.tnsr.engine.chat.ChatMessage;
import io.tnsr.engine.chat.ChatTemplate;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.util.Jackson;
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Log-probabilities through the API: each generated token's and its most likely alternatives', equal to the bit to
 * what one process computes from the same logits, whether the last stage samples or the coordinator does.
 */
@Timeout(120)
class LogprobsTest {
    private static final String PROMPT = "once upon a time";
    private static final SamplingConfig SEEDED = new SamplingConfig(0.9f, 0, 1f, 7);
    private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();

    private HttpResponse<String> post(URI base, String path, String body) throws Exception {
        return http.send(HttpRequest.newBuilder(base.resolve(path)).timeout(Duration.ofSeconds(60))
                .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body)).build(),
                HttpResponse.BodyHandlers.ofString());
    }

    private static String text(ServingPipeline p, int id) {
        return new String(p.tok.tokenBytes(id), StandardCharsets.UTF_8);
    }

    @ParameterizedTest(name = "sampling in the last stage: {0}")
    @ValueSource(booleans = {true, false})
    void aCompletionsLogprobsAreThoseOfOneProcess(boolean sampleInLastStage) throws Exception {
        try (ServingPipeline p = new ServingPipeline(ModelSpec.tiny(), 2, 1, 0, sampleInLastStage);
             OpenAiHttpServer server = new OpenAiHttpServer(p.service, "tiny", "127.0.0.1", 0)) {
            URI base = URI.create("http://127.0.0.1:" + server.start());
            HttpResponse<String> r = post(base, "/v1/completions", "{\"prompt\": \"" + PROMPT + "\", \"max_tokens\": 24, "
                    + "\"temperature\": 0.9, \"seed\": 7, \"logprobs\": 5}");
            assertEquals(200, r.statusCode(), r.body());
            JsonNode body = Jackson.MAPPER.readTree(r.body());
            List<Completion.TokenLogprob> alone = new ArrayList<>();
            String text = p.alone(PROMPT, 24, SEEDED, 5, alone);
            assertEquals(text, body.at("/choices/0/text").asText());
            JsonNode lp = body.at("/choices/0/logprobs");
            assertEquals(alone.size(), lp.get("tokens").size());
            assertEquals(body.at("/usage/completion_tokens").asInt(), alone.size(), "one entry per generated token");
            int lastOffset = -1;
            for (int i = 0; i < alone.size(); i++) {
                Completion.TokenLogprob want = alone.get(i);
                assertEquals(text(p, want.token()), lp.get("tokens").get(i).asText());
                assertEquals(want.logprob(), lp.get("token_logprobs").get(i).floatValue(), "token " + i);
                Iterator<Map.Entry<String, JsonNode>> top = lp.get("top_logprobs").get(i).fields();
                for (int k = 0; k < want.topIds().length && top.hasNext(); k++) {
                    Map.Entry<String, JsonNode> e = top.next();
                    if (e.getKey().equals(text(p, want.topIds()[k]))) {
                        assertEquals(want.topLogprobs()[k], e.getValue().floatValue(), "token " + i + ", top " + k);
                    }
                }
                assertTrue(lp.get("top_logprobs").get(i).size() >= 1);
                int offset = lp.get("text_offset").get(i).asInt();
                assertTrue(offset >= Math.max(0, lastOffset) && offset <= text.length(), "text_offset " + offset);
                lastOffset = offset;
            }
            assertEquals(0, lp.get("text_offset").get(0).asInt());
        }
    }

    @Test
    void aChatStreamCarriesEachTokensLogprobsOnceAndTheWholeAnswerTheSame() throws Exception {
        try (ServingPipeline p = new ServingPipeline(ModelSpec.tiny(), 2, 1, 0, true)) {
            ChatTemplate t = ChatTemplate.compile(ChatTemplate.BUILT_IN.get("chatml"), p.tok, Clock.systemUTC());
            try (OpenAiHttpServer server = new OpenAiHttpServer(p.service, "tiny", "127.0.0.1", 0, null, t)) {
                URI base = URI.create("http://127.0.0.1:" + server.start());
                String request = "{\"messages\": [{\"role\": \"user\", \"content\": \"" + PROMPT + "\"}], \"max_tokens\": 16, "
                        + "\"temperature\": 0.9, \"seed\": 7, \"logprobs\": true, \"top_logprobs\": 3";
                HttpResponse<String> whole = post(base, "/v1/chat/completions", request + "}");
                assertEquals(200, whole.statusCode(), whole.body());
                JsonNode content = Jackson.MAPPER.readTree(whole.body()).at("/choices/0/logprobs/content");

                String rendered = t.render(List.of(new ChatMessage("user", PROMPT)), true);
                List<Completion.TokenLogprob> alone = new ArrayList<>();
                p.alone(rendered, 16, SEEDED, 3, alone);
                assertEquals(alone.size(), content.size());
                for (int i = 0; i < alone.size(); i++) {
                    JsonNode e = content.get(i);
                    Completion.TokenLogprob want = alone.get(i);
                    assertEquals(text(p, want.token()), e.get("token").asText());
                    assertEquals(want.logprob(), e.get("logprob").floatValue());
                    byte[] bytes = p.tok.tokenBytes(want.token());
                    assertEquals(bytes.length, e.get("bytes").size());
                    for (int b = 0; b < bytes.length; b++) {
                        assertEquals(bytes[b] & 0xFF, e.get("bytes").get(b).asInt());
                    }
                    assertEquals(want.topIds().length, e.get("top_logprobs").size());
                    for (int k = 0; k < want.topIds().length; k++) {
                        assertEquals(text(p, want.topIds()[k]), e.at("/top_logprobs/" + k + "/token").asText());
                        assertEquals(want.topLogprobs()[k], e.at("/top_logprobs/" + k + "/logprob").floatValue());
                    }
                }

                HttpResponse<InputStream> s = http.send(HttpRequest.newBuilder(base.resolve("/v1/chat/completions"))
                        .POST(HttpRequest.BodyPublishers.ofString(request + ", \"stream\": true}")).build(),
                        HttpResponse.BodyHandlers.ofInputStream());
                assertEquals(200, s.statusCode());
                List<JsonNode> streamed = new ArrayList<>();
                try (BufferedReader in = new BufferedReader(new InputStreamReader(s.body(), StandardCharsets.UTF_8))) {
                    for (String line; (line = in.readLine()) != null; ) {
                        if (line.startsWith("data: {")) {
                            JsonNode chunk = Jackson.MAPPER.readTree(line.substring(6));
                            chunk.at("/choices/0/logprobs/content").forEach(streamed::add);
                        }
                    }
                }
                assertEquals(content.size(), streamed.size(), "every token's entry once, in some chunk");
                for (int i = 0; i < streamed.size(); i++) {
                    assertEquals(content.get(i), streamed.get(i), "entry " + i);
                }
            }
        }
    }

    @Test
    void logprobsOutsideTheirRangeAre400AndNoneAskedGivesNull() throws Exception {
        try (ServingPipeline p = new ServingPipeline(ModelSpec.tiny(), 2, 1, 0, true);
             OpenAiHttpServer server = new OpenAiHttpServer(p.service, "tiny", "127.0.0.1", 0)) {
            URI base = URI.create("http://127.0.0.1:" + server.start());
            for (String[] c : List.of(
                    new String[] {"\"logprobs\": 21", "0 to 20"},
                    new String[] {"\"logprobs\": true", "how many top tokens"},
                    new String[] {"\"logprobs\": -1", "0 to 20"})) {
                HttpResponse<String> r = post(base, "/v1/completions", "{\"prompt\": \"x\", " + c[0] + "}");
                assertEquals(400, r.statusCode(), r.body());
                String message = Jackson.MAPPER.readTree(r.body()).at("/error/message").asText();
                assertTrue(message.contains(c[1]), message);
            }
            HttpResponse<String> plain = post(base, "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 3}");
            assertEquals(200, plain.statusCode(), plain.body());
            assertTrue(Jackson.MAPPER.readTree(plain.body()).at("/choices/0/logprobs").isNull());
            assertEquals(0, p.service.active());
        }
    }

    @Test
    void chatsTopLogprobsNeedLogprobsAndStayWithinTwenty() {
        JsonNode without = OpenAiHttpServer.object("{\"top_logprobs\": 2}".getBytes(StandardCharsets.UTF_8));
        CompletionService.InvalidRequestException e = assertThrows(
                CompletionService.InvalidRequestException.class, () -> OpenAiHttpServer.parse(without, "x", true));
        assertTrue(e.getMessage().contains("'top_logprobs' needs 'logprobs': true"), e.getMessage());
        JsonNode tooMany = OpenAiHttpServer.object("{\"logprobs\": true, \"top_logprobs\": 21}".getBytes(StandardCharsets.UTF_8));
        e = assertThrows(CompletionService.InvalidRequestException.class,
                () -> OpenAiHttpServer.parse(tooMany, "x", true));
        assertTrue(e.getMessage().contains("'top_logprobs' is out of range: it must be 0 to 20"), e.getMessage());
    }
}
