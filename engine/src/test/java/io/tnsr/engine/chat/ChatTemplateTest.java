package io.tnsr.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.testing.SharedData;
import io.tnsr.engine.testing.TestJson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * {@link ChatTemplate} against what Python's jinja2 renders, as Hugging Face transformers runs it, from real
 * models' templates ({@code shared/chat-templates}: every case of chat-goldens.json, refusals included), and
 * the pieces that need no shared data: refusals, syntax errors, the injected clock, whitespace rules.
 */
class ChatTemplateTest {
    /** The date the goldens were rendered with: strftime_now() reads 2026-01-15. */
    static final Clock GOLDEN_CLOCK = Clock.fixed(Instant.parse("2026-01-15T12:00:00Z"), ZoneOffset.UTC);

    @TestFactory
    Stream<DynamicTest> everyGoldenCaseRendersExactly() throws IOException {
        Path dir = SharedData.path("chat-templates");
        @SuppressWarnings("unchecked")
        Map<String, Object> goldens = (Map<String, Object>) TestJson.read(dir.resolve("chat-goldens.json"));
        @SuppressWarnings("unchecked")
        List<Map<String, Object>> cases = (List<Map<String, Object>>) goldens.get("cases");
        List<DynamicTest> tests = new ArrayList<>();
        for (Map<String, Object> c : cases) {
            String template = (String) c.get("template");
            boolean addGenerationPrompt = (Boolean) c.get("add_generation_prompt");
            String name = template.replace(".jinja", "") + " / " + c.get("conversation")
                    + (addGenerationPrompt ? " / add_generation_prompt" : " / no generation prompt");
            tests.add(DynamicTest.dynamicTest(name, () -> {
                String source = Files.readString(dir.resolve("templates").resolve(template), StandardCharsets.UTF_8);
                ChatTemplate t = ChatTemplate.compile(source, (String) c.get("bos_token"), (String) c.get("eos_token"), GOLDEN_CLOCK);
                List<ChatMessage> messages = messages(c.get("messages"));
                if (c.containsKey("expected_error")) {
                    ChatTemplateException e = assertThrows(ChatTemplateException.class, () -> t.render(messages, addGenerationPrompt));
                    assertEquals(c.get("expected_error"), e.getMessage());
                    assertTrue(e.raisedByTemplate());
                } else {
                    assertEquals(c.get("expected"), t.render(messages, addGenerationPrompt));
                }
            }));
        }
        assertEquals(56, tests.size(), "chat-goldens.json should hold 56 cases");
        return tests.stream();
    }

    private static List<ChatMessage> messages(Object json) {
        List<ChatMessage> r = new ArrayList<>();
        for (Object o : (List<?>) json) {
            Map<?, ?> m = (Map<?, ?>) o;
            r.add(new ChatMessage((String) m.get("role"), (String) m.get("content")));
        }
        return r;
    }

    private static final List<ChatMessage> USER_ONLY = List.of(new ChatMessage("user", "Hi"));

    @Test
    void raiseExceptionRefusesWithTheTemplatesOwnMessage() {
        ChatTemplate t = ChatTemplate.compile("{% for m in messages %}{% if m.role == 'system' %}"
                + "{{ raise_exception('No system role, please') }}{% endif %}{{ m.content }}{% endfor %}", "<s>", "</s>");
        assertEquals("Hi", t.render(USER_ONLY, false));
        ChatTemplateException e = assertThrows(ChatTemplateException.class,
                () -> t.render(List.of(new ChatMessage("system", "S"), new ChatMessage("user", "Hi")), false));
        assertEquals("No system role, please", e.getMessage());
        assertTrue(e.raisedByTemplate());
    }

    @Test
    void aDeveloperMessageIsASystemOneToATemplateThatDoesNotNameThatRole() {
        List<ChatMessage> chat = List.of(new ChatMessage("developer", "Be brief."), new ChatMessage("user", "Hi"));
        ChatTemplate chatml = ChatTemplate.compile(ChatTemplate.BUILT_IN.get("chatml"), "", "");
        assertEquals("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n", chatml.render(chat, false));
        ChatTemplate strict = ChatTemplate.compile("{% for m in messages %}{% if m.role not in ['system', 'user', 'assistant'] %}"
                + "{{ raise_exception('Unexpected message role.') }}{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}", "", "");
        assertEquals("system: Be brief.\nuser: Hi\n", strict.render(chat, false));
        ChatTemplate knowing = ChatTemplate.compile("{% for m in messages %}{% if m.role == 'developer' %}# Instructions: "
                + "{% endif %}{{ m.role }}: {{ m.content }}\n{% endfor %}", "", "");
        assertEquals("# Instructions: developer: Be brief.\nuser: Hi\n", knowing.render(chat, false),
                "a template that names the role (gpt-oss's) gets it as it is");
    }

    @Test
    void aSyntaxErrorIsAClearExceptionAtCompile() {
        ChatTemplateException unclosed = assertThrows(ChatTemplateException.class,
                () -> ChatTemplate.compile("Hello\n{{ messages[0].content ", "<s>", "</s>"));
        assertTrue(unclosed.getMessage().contains("line 2"), unclosed.getMessage());
        assertFalse(unclosed.raisedByTemplate());
        ChatTemplateException noEndfor = assertThrows(ChatTemplateException.class,
                () -> ChatTemplate.compile("{% for m in messages %}{{ m.content }}", "<s>", "</s>"));
        assertTrue(noEndfor.getMessage().startsWith("chat template syntax error"), noEndfor.getMessage());
    }

    @Test
    void strftimeNowReadsTheInjectedClock() {
        Clock clock = Clock.fixed(Instant.parse("2024-07-04T09:05:00Z"), ZoneOffset.UTC);
        ChatTemplate t = ChatTemplate.compile("{% if strftime_now is defined %}{{ strftime_now('%d %b %Y, %A %-d %B %H:%M') }}{% endif %}",
                "", "", clock);
        assertEquals("04 Jul 2024, Thursday 4 July 09:05", t.render(USER_ONLY, false));
    }

    @Test
    void concurrentRendersAreIndependent() throws Exception {
        ChatTemplate t = ChatTemplate.compile("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                + "{{ m.role }}:{{ m.content | trim }};{% endfor %}{{ ns.n }}", "<s>", "</s>");
        ExecutorService pool = Executors.newFixedThreadPool(4);
        try {
            List<Future<Boolean>> results = new ArrayList<>();
            for (int k = 0; k < 4; k++) {
                int n = k + 1;
                results.add(pool.submit(() -> {
                    List<ChatMessage> ms = new ArrayList<>();
                    StringBuilder expected = new StringBuilder();
                    for (int i = 0; i < n; i++) {
                        ms.add(new ChatMessage("user", " m" + i + " "));
                        expected.append("user:m").append(i).append(';');
                    }
                    expected.append(n);
                    for (int i = 0; i < 200; i++) {
                        if (!t.render(ms, false).equals(expected.toString())) {
                            return false;
                        }
                    }
                    return true;
                }));
            }
            for (Future<Boolean> r : results) {
                assertTrue(r.get());
            }
        } finally {
            pool.shutdownNow();
        }
    }
}
