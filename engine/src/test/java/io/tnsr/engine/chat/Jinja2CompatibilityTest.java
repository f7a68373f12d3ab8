package io.tnsr.engine.chat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Clock;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The jinja2 behaviour {@link ChatTemplate} adds to Jinjava, one corner at a time: each expected text is what
 * Python's jinja2 3.1 renders from the template in Hugging Face's environment (sandboxed, trim_blocks,
 * lstrip_blocks, its tojson) with the two messages below.
 */
class Jinja2CompatibilityTest {
    private static final List<ChatMessage> MESSAGES = List.of(new ChatMessage("system", "Be brief."),
            new ChatMessage("user", "{{ 7*7 }} {% if true %}x{% endif %}"));
    private static final Clock CLOCK = Clock.fixed(Instant.parse("2026-01-15T12:00:00Z"), ZoneOffset.UTC);

    static Stream<Arguments> jinja2Renders() {
        return Stream.of(
                Arguments.of("lstrip_blocks and trim_blocks",
                        "a\n  {% if true %}\n  b\n  {% endif %}\nc",
                        "a\n  b\nc"),
                Arguments.of("a tag after text on its line keeps the text's spaces",
                        "{{ 'x' }}  {% if true %}y{% endif %}\n  {% if true %}z{% endif %}",
                        "x  yz"),
                Arguments.of("comments, with and without whitespace control",
                        "  {# c #}\nz\n{# d #}  w|a {# x #} b {#- y -#} c",
                        "z\n  w|a  bc"),
                Arguments.of("whitespace control and the + markers",
                        "x {%- if true -%} y {%- endif %} z\n  {%+ if true %}a{% endif %}{% if true +%}\nb{% endif %}",
                        "xy z\n  a\nb"),
                Arguments.of("raw blocks",
                        "a\n  {% raw %}\n {{ x }} {% if %}\n  {% endraw %}\nb",
                        "a\n\n {{ x }} {% if %}\nb"),
                Arguments.of("CRLF line ends and one trailing newline dropped",
                        "line1\r\nline2\r\n{% if true %}\r\nx\r\n{% endif %}\r\n",
                        "line1\nline2\nx\n"),
                Arguments.of("string methods",
                        "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\nhi'.lstrip('\\n') }}|{{ 'hi \\n'.rstrip() }}|{{ 'a,b, c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a b c'.rsplit(' ', 1) }}|{{ 'hello'.startswith(('x', 'h')) }}|{{ 'hello'.endswith('lo') }}|{{ 'hELLO wORLD'.title() }}|{{ 'hELLO'.capitalize() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }}|{{ 'a-b-c'.replace('-', '+', 1) }}|{{ ', '.join(['x', 'y']) }}|{{ 'hello'.find('l') }}",
                        "a b|a|hi|hi|['a', 'b', ' c']|['a', 'b']|['a b', 'c']|True|True|Hello World|Hello|ABab|a+b-c|x, y|2"),
                Arguments.of("dict methods, items and the loop filter",
                        "{% set d = {'a': 1, 'b': 'two', 'c': 3} %}{% for k, v in d.items() if k != 'b' %}{{ k }}={{ v }}{{ loop.index }}{{ loop.last }};{% endfor %}|{{ d.get('a') }}|{{ d.get('z', 'dflt') }}|{{ d.keys()|list }}|{% for k, v in d|items %}{{ k }}{% endfor %}|{{ 'a' in d }}",
                        "a=11False;c=32True;|1|dflt|['a', 'b', 'c']|abc|True"),
                Arguments.of("slices and negative indexes",
                        "{{ messages[1:]|length }} {{ messages[-1].role }} {{ messages[::-1]|map(attribute='role')|join(',') }} {{ 'hello'[1:-1] }} {{ 'hello'[-10:] }} {{ 'héllo'[1] }} {{ 'abc'[::-1] }}",
                        "1 user user,system ell hello é cba"),
                Arguments.of("loop variables",
                        "{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }} {% endfor %}{% for m in [] %}x{% else %}empty{% endfor %}",
                        "10TrueFalse22 21FalseTrue21 empty"),
                Arguments.of("tests",
                        "{{ 'x' is string }} {{ 1 is string }} {{ messages[0] is mapping }} {{ messages is iterable }} {{ 'abc' is iterable }} {{ none is none }} {{ nothing is defined }} {{ 4 is even }} {{ 6 is divisibleby 3 }}",
                        "True False True True True True False True True"),
                Arguments.of("namespace",
                        "{% set ns = namespace(found=false, last=messages|length - 1) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.last }}",
                        "True 1"),
                Arguments.of("printing and arithmetic as Python",
                        "{{ true }} {{ 1.5 }} {{ [1, 'a', 2.0, none] }} {{ {'a': 1} }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }} {{ -3 }} {{ '1' == 1 }}",
                        "True 1.5 [1, 'a', 2.0, None] {'a': 1} 3 3.5 2 1024 abab -3 False"),
                Arguments.of("precedence of not, filters and tests",
                        "{{ not nothing is defined }} {{ not messages|length == 1 }} {{ 'a' + ' b '|trim + 'c' }} {{ messages|length - 1 }} {{ (messages|first).role }}",
                        "True True abc 1 system"),
                Arguments.of("Python truth: 'false' is a true string",
                        "{% if 'false' %}t{% endif %}{% if '' %}e{% endif %}{% if [] %}l{% endif %}{{ 'false' and 'x' }}{{ 0 or 'y' }}",
                        "txy"),
                Arguments.of("string literal escapes",
                        "{{ 'a\\nb' }}|{{ \"q\\\"x\" }}|{{ 'it\\'s' }}|{{ '\\u00e9\\x41\\t' }}|{{ {'a': {'b': 1}} }}",
                        "a\nb|q\"x|it's|éA\t|{'a': {'b': 1}}"),
                Arguments.of("tojson as Hugging Face's",
                        "{{ 'é\"<>&' | tojson }} {{ {'a': [1, 2.5, none, true], 'b': {}} | tojson }} {{ {'b': 1, 'a': [2]} | tojson(indent=2) }} {{ {'z': 1, 'a': 0.1} | tojson(sort_keys=true) }} {{ 'x😀'|tojson(ensure_ascii=true) }}",
                        "\"é\\\"<>&\" {\"a\": [1, 2.5, null, true], \"b\": {}} {\n  \"b\": 1,\n  \"a\": [\n    2\n  ]\n} {\"a\": 0.1, \"z\": 1} \"x\\ud83d\\ude00\""),
                Arguments.of("filters",
                        "{{ ' x '|trim }}|{{ 'héllo'|length }}|{{ 'hello world'|title }}|{{ 'abcdefghij'|truncate(8) }}|{{ 'abcdefghijklmnop'|truncate(8) }}|{{ nothing|default('d') }}|{{ ''|default('e', true) }}|{{ messages|selectattr('role', 'equalto', 'user')|list|length }}",
                        "x|5|Hello World|abcdefghij|abcde...|d|e|1"),
                Arguments.of("a user message is text, never template code",
                        "{{ messages[1].content }}",
                        "{{ 7*7 }} {% if true %}x{% endif %}"));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("jinja2Renders")
    void rendersAsJinja2(String what, String template, String expected) {
        assertEquals(expected, ChatTemplate.compile(template, "<s>", "</s>", CLOCK).render(MESSAGES, true));
    }

    @Test
    void errorsStopTheRenderWithJinja2sMessage() {
        assertFails("{{ 'a' + 1 }}", "can only concatenate str (not \"int\") to str");
        assertFails("{% set l = [] %}{{ l.append(1) }}", "access to attribute 'append' of 'list' object is unsafe.");
        assertFails("{{ messages[0].content.getBytes() }}", "'str object' has no attribute 'getBytes'");
        assertFails("{{ messages|nofilter }}", "No filter named 'nofilter'.");
        assertFails("{{ 1 / 0 }}", "division by zero");
    }

    private static void assertFails(String template, String message) {
        ChatTemplateException e = assertThrows(ChatTemplateException.class,
                () -> ChatTemplate.compile(template, "", "", CLOCK).render(MESSAGES, false));
        assertTrue(e.getMessage().startsWith("chat template failed at line 1: "), e.getMessage());
        assertTrue(e.getMessage().endsWith(message), e.getMessage());
    }
}
