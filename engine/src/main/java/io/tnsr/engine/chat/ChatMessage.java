package io.tnsr.engine.chat;

import java.util.Objects;

/**
 * One message of a conversation, as a chat template sees it: {@code message.role}, {@code message.content}
 * (also {@code message['role']}, {@code message['content']}).
 *
 * @param role    {@code system}, {@code user}, {@code assistant}, or whatever role the template knows
 * @param content the message text
 */
public record ChatMessage(String role, String content) {
    public ChatMessage {
        Objects.requireNonNull(role, "role");
        Objects.requireNonNull(content, "content");
    }
}
