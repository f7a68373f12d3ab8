package io.tnsr.wire;

/**
 * The {@code msg_type} byte of a TNSR frame (header offset 4), with the element type of its payload and the
 * shape rules the {@link FrameValidator} enforces for it. See {@code docs/PROTOCOL.md}.
 *
 * <pre>{@code
 * MessageType type = MessageType.fromCode(header.messageTypeCode()); // null when the code is unknown
 * switch (type) { case TOKENS: ...; case ACTIVATIONS: ...; }
 * }</pre>
 *
 * <p>{@link #fromCode(int)} is an array look-up: it never allocates (unlike {@code values()}).
 */
public enum MessageType
{
    /** u32 token ids, rank 1 {@code [n_tokens]}; may carry a sequence table. */
    TOKENS(1, 4, 1, 1, true),
    /** f32 activations, {@code [n_tokens, hidden_dim]} (rank 1..4 accepted; the last dim is the row width); may carry a sequence table. */
    ACTIVATIONS(2, 4, 1, 4, true),
    /** f32 logits, rank 2 {@code [n_rows, vocab]}, one row per WANT_LOGITS sequence-table entry; may carry a sequence table. */
    LOGITS(3, 4, 2, 2, true),
    /** u8 payload {@code u32 error_code, u32 seq_id, UTF-8 message}, rank 1 {@code [payload_len]} with payload_len &gt;= 8. */
    ERROR(4, 1, 1, 1, false),
    /** u32 handshake, shape exactly {@code [34]}; see {@link HelloPayload}. */
    HELLO(5, 4, 1, 1, false),
    /** u32 sequence ids whose KV cache must be freed, rank 1 {@code [n]}. */
    END_SEQUENCE(6, 4, 1, 1, false),
    /** No payload: rank 0, payload_len 0. */
    SHUTDOWN(7, 1, 0, 0, false),
    /** u32[8] handshake confirmation: the connecting side's 32-byte HMAC over both HELLOs, shape exactly {@code [8]}. */
    AUTH(8, 4, 1, 1, false),
    /** u32[4] liveness on an idle link: {@code frames_done, busy_ms, 0, 0}, shape exactly {@code [4]}; never forwarded. */
    HEARTBEAT(9, 4, 1, 1, false),
    /** u8 UTF-8 text, rank 1: the session's route, one {@code host:port} per line for the stages after the receiver. */
    ROUTE(10, 1, 1, 1, false),
    /** u8 UTF-8 text, rank 1: the answer to ROUTE once every stage after the sender is connected; one line per stage. */
    READY(11, 1, 1, 1, false),
    /**
     * u32 token ids, rank 1 {@code [n_rows]}: the tokens the last stage sampled, one per WANT_LOGITS entry (each of
     * which has SAMPLE), in entry order; carries the sequence table of the step. Rank 2 {@code [n_rows, 2 + 2k]} when a
     * sequence of the step asked for log-probabilities: per row the token, its log-probability (f32 bits), then k
     * pairs {@code (token, log-probability)} of the most likely tokens, most likely first.
     */
    SAMPLED(12, 4, 1, 2, true),
    /**
     * u32 rank 2 {@code [n, 7]}: how the last stage samples each of n sequences, a row each:
     * {@code seq_id, temperature (f32 bits), top_k, top_p (f32 bits), random state low word, high word, logprobs}
     * ({@code logprobs}: -1 for none, else how many top tokens to report beside the chosen one); every stage passes it
     * on, the last one keeps it until the sequence ends.
     */
    SAMPLING(13, 4, 2, 2, false);

    private static final MessageType[] BY_CODE = new MessageType[256];

    static
    {
        for (final MessageType type : values())
        {
            BY_CODE[type.code] = type;
        }
    }

    private final int code;
    private final int elementSize;
    private final int minRank;
    private final int maxRank;
    private final boolean sequenceTableAllowed;

    MessageType(final int code, final int elementSize, final int minRank, final int maxRank, final boolean sequenceTableAllowed)
    {
        this.code = code;
        this.elementSize = elementSize;
        this.minRank = minRank;
        this.maxRank = maxRank;
        this.sequenceTableAllowed = sequenceTableAllowed;
    }

    /**
     * The type with this wire code, without allocation.
     *
     * @param code the {@code msg_type} byte as an unsigned value (0..255); any other int is treated as unknown.
     * @return the type, or {@code null} when the code is not a known message type.
     */
    public static MessageType fromCode(final int code)
    {
        return (code & ~0xFF) == 0 ? BY_CODE[code] : null;
    }

    /** @return the {@code msg_type} byte. */
    public int code()
    {
        return code;
    }

    /** @return the size in bytes of one payload element (4 for u32/f32, 1 for u8 and for SHUTDOWN, which has none). */
    public int elementSize()
    {
        return elementSize;
    }

    /** @return the smallest shape_rank this type accepts. */
    public int minRank()
    {
        return minRank;
    }

    /** @return the largest shape_rank this type accepts. */
    public int maxRank()
    {
        return maxRank;
    }

    /** @return whether frames of this type may carry a sequence table (sequence count &gt; 0). */
    public boolean sequenceTableAllowed()
    {
        return sequenceTableAllowed;
    }

    /** @return the name printed by tools and messages (the constant's name, e.g. {@code ACTIVATIONS}). */
    public String printName()
    {
        return name();
    }
}
