package io.tnsr.wire;

import org.agrona.DirectBuffer;

/**
 * The payload of a {@link MessageType#HELLO} frame: {@link #FIELD_COUNT} u32 words, shape exactly
 * {@code [FIELD_COUNT]}. Each side of a new connection sends one HELLO (the connecting side first); a receiver that
 * does not speak {@link #PROTOCOL_VERSION} answers with ERROR {@link ErrorCode#UNSUPPORTED_PROTOCOL_VERSION} and closes.
 * The word layout is in {@code docs/PROTOCOL.md} §10; {@link Hello} reads and writes it.
 * <pre>{@code
 * if (HelloPayload.protocolVersion(buf, frame) != HelloPayload.PROTOCOL_VERSION) { ... }
 * Hello peer = Hello.from(buf, frame);
 * }</pre>
 */
public final class HelloPayload
{
    /** The protocol version this codec implements. */
    public static final int PROTOCOL_VERSION = 4;
    /** role: the coordinator. */
    public static final int ROLE_COORDINATOR = 0;
    /** role: a pipeline stage. */
    public static final int ROLE_STAGE = 1;

    /** flags bit: the sender holds a shared key and authenticates (HMAC fields and an AUTH frame follow). */
    public static final int FLAG_AUTH = 1;
    /** flags bit: the coordinator's return link: the last stage writes its output to this connection. */
    public static final int FLAG_RETURN_LINK = 2;
    /** flags bit: a probe: the receiver completes the handshake (proving it is alive and the same model) and closes. */
    public static final int FLAG_PROBE = 4;

    /** Word index of {@code protocol_version}. */
    public static final int PROTOCOL_VERSION_INDEX = 0;
    /** Word index of {@code role}. */
    public static final int ROLE_INDEX = 1;
    /** Word index of {@code stage_index}. */
    public static final int STAGE_INDEX_INDEX = 2;
    /** Word index of {@code stage_count}. */
    public static final int STAGE_COUNT_INDEX = 3;
    /** Word index of {@code layer_from}. */
    public static final int LAYER_FROM_INDEX = 4;
    /** Word index of {@code layer_to}. */
    public static final int LAYER_TO_INDEX = 5;
    /** Word index of {@code hidden_dim}. */
    public static final int HIDDEN_DIM_INDEX = 6;
    /** Word index of {@code max_tokens_per_frame}. */
    public static final int MAX_TOKENS_PER_FRAME_INDEX = 7;
    /** Word index of {@code vocab_size}. */
    public static final int VOCAB_SIZE_INDEX = 8;
    /** Word index of {@code model_layers} (the whole model's layer count). */
    public static final int MODEL_LAYERS_INDEX = 9;
    /** Word index of {@code max_sequences_per_frame}. */
    public static final int MAX_SEQUENCES_PER_FRAME_INDEX = 10;
    /** Word index of {@code max_frame_bytes}. */
    public static final int MAX_FRAME_BYTES_INDEX = 11;
    /** Word index of {@code flags} ({@link #FLAG_AUTH}, {@link #FLAG_RETURN_LINK}). */
    public static final int FLAGS_INDEX = 12;
    /** Word index of {@code heartbeat_ms}: the longest the sender leaves this link silent. */
    public static final int HEARTBEAT_MILLIS_INDEX = 13;
    /** Word index of the first of the 8 words of {@code model_fingerprint} (32 bytes). */
    public static final int FINGERPRINT_INDEX = 14;
    /** Word index of the first of the 4 words of {@code nonce} (16 random bytes per connection). */
    public static final int NONCE_INDEX = 22;
    /** Word index of the first of the 8 words of {@code mac} (32 bytes; zero in the connecting side's HELLO). */
    public static final int MAC_INDEX = 26;
    /** Number of u32 words: HELLO's shape is exactly {@code [FIELD_COUNT]}. */
    public static final int FIELD_COUNT = 34;

    /** Bytes of the fingerprint and of a MAC. */
    public static final int DIGEST_BYTES = 32;
    /** Bytes of the nonce. */
    public static final int NONCE_BYTES = 16;

    private HelloPayload()
    {
    }

    /** @return {@code protocol_version}. */
    public static int protocolVersion(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, PROTOCOL_VERSION_INDEX);
    }

    /** @return {@code role}: {@link #ROLE_COORDINATOR} or {@link #ROLE_STAGE}. */
    public static int role(final DirectBuffer buffer, final int frameOffset)
    {
        return FramePayload.u32(buffer, frameOffset, ROLE_INDEX);
    }

    /** @return the u32 word at {@code index} of the payload. */
    public static int word(final DirectBuffer buffer, final int frameOffset, final int index)
    {
        return FramePayload.u32(buffer, frameOffset, index);
    }
}
