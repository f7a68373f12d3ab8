package io.tnsr.engine.chat;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import java.time.Clock;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * A model's chat template (the Jinja text in {@code tokenizer.chat_template}), rendering a conversation into
 * the prompt text the model was trained on, exactly as Hugging Face transformers'
 * {@code tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=...)} does with Python's
 * jinja2.
 *
 * <pre>{@code
 * ChatTemplate t = ChatTemplate.compile(source, "<|begin_of_text|>", "<|eot_id|>");
 * String prompt = t.render(List.of(new ChatMessage("user", "Hello!")), true);
 * }</pre>
 *
 * <p>What the template sees, as in transformers: {@code messages} (a list of dicts with {@code role} and
 * {@code content}), {@code add_generation_prompt}, {@code bos_token}, {@code eos_token}, {@code tools} and
 * {@code documents} (None); the globals {@code raise_exception(msg)} (refuses the conversation: {@link #render}
 * throws a {@link ChatTemplateException} whose message is {@code msg}) and {@code strftime_now(format)} (the
 * clock's current local date and time, formatted as Python's strftime); the {@code tojson} filter as Hugging Face
 * defines it (Python's {@code json.dumps} with {@code ensure_ascii=False}); and jinja2's
 * {@code trim_blocks}/{@code lstrip_blocks} whitespace, Python's string, dict and list methods
 * ({@code .strip()}, {@code .split()}, {@code .startswith()}, {@code .items()}, {@code .get()}, ...),
 * {@code namespace()}, slicing and negative indexes, and {@code loop.first}/{@code last}/{@code index0}.
 * Like Hugging Face's sandbox, a template cannot call Java methods or change lists and dicts in place.
 *
 * <p>Rendering is done by Jinjava with jinja2's semantics layered on (see {@link Jinja2Environment}). Where it
 * still differs from jinja2: None and undefined are one value to it (so {@code tools is defined} is false,
 * {@code {{ none }}} prints nothing, and an attribute of an undefined value is empty rather than an error);
 * tuples are lists; and {@code {% with %}}, {@code {% filter %}}, {@code dict()}, {@code cycler()},
 * {@code str.format()} and chained comparisons ({@code a < b < c}) are missing: a template using them fails to
 * compile or render, it does not render other text.
 *
 * <p>Instances are immutable and thread-safe: {@link #render} may be called concurrently (each call has its
 * own Jinjava context; the template text is parsed again on each call: a render of a real template takes
 * 0.1 to 0.6 ms, after a first compile that loads Jinjava, about 2 s).
 */
public final class ChatTemplate {
    /** OpenAI's newer name for the system role; templates other than OpenAI's own do not know it. */
    public static final String DEVELOPER = "developer";

    private final String source;
    private final boolean knowsDeveloper;
    private final String bosToken;
    private final String eosToken;
    private final Clock clock;

    private ChatTemplate(String source, String bosToken, String eosToken, Clock clock) {
        this.source = source;
        this.knowsDeveloper = source.contains(DEVELOPER);
        this.bosToken = bosToken;
        this.eosToken = eosToken;
        this.clock = clock;
    }

    /**
     * Parses {@code templateSource}; {@code strftime_now} reads the system clock in the default time zone.
     *
     * @param bosToken the text of the model's BOS token ({@code bos_token} in the template), or "" if none
     * @param eosToken the text of the model's EOS token ({@code eos_token}), or "" if none
     * @throws ChatTemplateException if the template does not parse (the message names the line)
     */
    public static ChatTemplate compile(String templateSource, String bosToken, String eosToken) {
        return compile(templateSource, bosToken, eosToken, Clock.systemDefaultZone());
    }

    /**
     * Parses {@code templateSource}, with {@code clock} (and its zone) as what {@code strftime_now} reads.
     *
     * @throws ChatTemplateException if the template does not parse (the message names the line)
     */
    public static ChatTemplate compile(String templateSource, String bosToken, String eosToken, Clock clock) {
        Objects.requireNonNull(templateSource, "templateSource");
        Objects.requireNonNull(clock, "clock");
        String prepared = Jinja2Source.prepare(templateSource);
        Jinja2Environment.INSTANCE.check(prepared);
        return new ChatTemplate(prepared, Objects.requireNonNullElse(bosToken, ""),
                Objects.requireNonNullElse(eosToken, ""), clock);
    }

    /**
     * The chat template a GGUF model carries ({@value GgufMetadata#KEY_CHAT_TEMPLATE}), rendered with the text of
     * the model's BOS and EOS tokens as {@code bos_token} and {@code eos_token}; empty when the model has none.
     * Builds the model's tokenizer to find those tokens: use {@link #fromGguf(GgufMetadata, Tokenizer, Clock)}
     * when one is at hand.
     *
     * @throws ChatTemplateException if the model's template does not parse
     */
    public static Optional<ChatTemplate> fromGguf(GgufFile file) {
        GgufMetadata md = file.metadata();
        if (md.chatTemplate().isEmpty()) {
            return Optional.empty();
        }
        return fromGguf(md, Tokenizers.fromGguf(md), Clock.systemDefaultZone());
    }

    /**
     * The model's chat template, with {@code tokenizer}'s BOS and EOS pieces ({@code <s>},
     * {@code <|begin_of_text|>}, ...) as {@code bos_token} and {@code eos_token} ("" where the vocabulary has
     * none), and {@code clock} for {@code strftime_now}; empty when the model has no template.
     *
     * @throws ChatTemplateException if the model's template does not parse
     */
    public static Optional<ChatTemplate> fromGguf(GgufMetadata md, Tokenizer tokenizer, Clock clock) {
        Optional<String> source = md.chatTemplate();
        if (source.isEmpty()) {
            return Optional.empty();
        }
        return Optional.of(compile(source.get(), piece(tokenizer, tokenizer.bos()), piece(tokenizer, tokenizer.eos()), clock));
    }

    /** Templates known by name, for models that carry none: {@code chatml} (the {@code <|im_start|>} turns of many). */
    public static final Map<String, String> BUILT_IN = Map.of("chatml",
            "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
                    + "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}");

    /**
     * A template for a model's {@code tokenizer}, its BOS and EOS pieces as {@code bos_token} and {@code eos_token}.
     *
     * @throws ChatTemplateException if the template does not parse
     */
    public static ChatTemplate compile(String templateSource, Tokenizer tokenizer, Clock clock) {
        return compile(templateSource, piece(tokenizer, tokenizer.bos()), piece(tokenizer, tokenizer.eos()), clock);
    }

    private static String piece(Tokenizer tokenizer, int id) {
        return id >= 0 ? tokenizer.piece(id) : "";
    }

    /**
     * The prompt text of {@code messages}, ending with the assistant's turn header when
     * {@code addGenerationPrompt} is set (if the template writes one). A {@code developer} message goes to a template
     * that never names that role as a {@code system} one, as llama-server passes it: such a template would otherwise
     * write a turn its model never saw, or refuse the role; a template that names it (gpt-oss's) gets it as it is.
     *
     * @throws ChatTemplateException with the template's own message when it refuses the conversation (for
     *                               example a system message where the model has no system role), or naming the
     *                               line and what failed otherwise
     */
    public String render(List<ChatMessage> messages, boolean addGenerationPrompt) {
        List<Object> msgs = new ArrayList<>(messages.size());
        for (ChatMessage m : messages) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("role", !knowsDeveloper && DEVELOPER.equals(m.role()) ? "system" : m.role());
            d.put("content", m.content());
            msgs.add(d);
        }
        Map<String, Object> vars = new HashMap<>();
        vars.put("messages", msgs);
        vars.put("add_generation_prompt", addGenerationPrompt);
        vars.put("bos_token", bosToken);
        vars.put("eos_token", eosToken);
        vars.put("tools", null);
        vars.put("documents", null);
        return Jinja2Environment.INSTANCE.render(source, vars, clock);
    }

    /** The BOS token text the template is rendered with. */
    public String bosToken() {
        return bosToken;
    }

    /** The EOS token text the template is rendered with. */
    public String eosToken() {
        return eosToken;
    }
}
