package io.tnsr.engine.chat;

/**
 * A chat template that does not parse, or a conversation it cannot render. When the template itself refuses
 * the conversation ({@code raise_exception(msg)}), {@link #getMessage()} is exactly {@code msg}, the text
 * Hugging Face transformers would raise, so it can be shown to the client as it is.
 */
public final class ChatTemplateException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final boolean raisedByTemplate;

    ChatTemplateException(String message) {
        this(message, false, null);
    }

    ChatTemplateException(String message, Throwable cause) {
        this(message, false, cause);
    }

    private ChatTemplateException(String message, boolean raisedByTemplate, Throwable cause) {
        super(message, cause);
        this.raisedByTemplate = raisedByTemplate;
    }

    /** The template's own {@code raise_exception(message)}. */
    static ChatTemplateException raised(String message) {
        return new ChatTemplateException(message, true, null);
    }

    /**
     * Whether the template refused the conversation with {@code raise_exception} (the message is the
     * template's), rather than failing to parse or evaluate.
     */
    public boolean raisedByTemplate() {
        return raisedByTemplate;
    }
}
