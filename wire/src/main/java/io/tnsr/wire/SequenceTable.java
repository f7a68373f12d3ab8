package io.tnsr.wire;

import org.agrona.DirectBuffer;

import static io.tnsr.wire.FrameHeader.ORDER;
import static io.tnsr.wire.FrameHeader.SEQUENCE_ENTRY_LENGTH;

/**
 * Reads the sequence table of a frame (the {@code seq_count} 16-byte entries right after the payload) without
 * allocation. Entry layout, little-endian:
 * <pre>
 *  &#64;0  seq_id       u32
 *  &#64;4  position     u32  position in the sequence of this frame's first token for that sequence
 *  &#64;8  n_tokens     u32  rows of the payload that belong to this sequence
 *  &#64;12 entry_flags  u32  bit0 WANT_LOGITS, bit1 SAMPLE (only with WANT_LOGITS), other bits reserved = 0
 * </pre>
 * Entries are in row order: payload rows {@code [0, n_tokens(0))} belong to entry 0, the next {@code n_tokens(1)}
 * rows to entry 1, and so on. Typical loop over a validated ACTIVATIONS frame:
 * <pre>{@code
 * int n = FrameHeader.sequenceCount(buf, frame), row = 0;
 * for (int i = 0; i < n; i++) {
 *     int seq = SequenceTable.seqId(buf, frame, i), pos = SequenceTable.position(buf, frame, i);
 *     int tokens = SequenceTable.nTokens(buf, frame, i);
 *     // rows [row, row + tokens) are positions [pos, pos + tokens) of sequence seq
 *     row += tokens;
 * }
 * }</pre>
 * ids and counts are u32 bits in an {@code int}. The methods trust {@code i < seq_count}; they do not check it.
 */
public final class SequenceTable
{
    /** Entry offset of {@code seq_id}. */
    public static final int SEQ_ID_OFFSET = 0;
    /** Entry offset of {@code position}. */
    public static final int POSITION_OFFSET = 4;
    /** Entry offset of {@code n_tokens}. */
    public static final int N_TOKENS_OFFSET = 8;
    /** Entry offset of {@code entry_flags}. */
    public static final int ENTRY_FLAGS_OFFSET = 12;
    /** Entry flag bit 0: produce logits for this sequence's last token in the frame. */
    public static final int WANT_LOGITS = 0x01;
    /**
     * Entry flag bit 1, only with WANT_LOGITS: the last stage samples this sequence's next token from those logits
     * (as the SAMPLING frame for the sequence says) and sends the token id in a SAMPLED frame instead of the logits.
     */
    public static final int SAMPLE = 0x02;

    private SequenceTable()
    {
    }

    /** @return the buffer index of entry {@code i} of the frame at {@code frameOffset}. */
    public static int entryOffset(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return FrameHeader.sequenceTableOffset(buffer, frameOffset) + i * SEQUENCE_ENTRY_LENGTH;
    }

    /** @return {@code seq_id} of entry {@code i} (u32 bits). */
    public static int seqId(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getInt(entryOffset(buffer, frameOffset, i) + SEQ_ID_OFFSET, ORDER);
    }

    /** @return {@code position} of entry {@code i} (u32 bits). */
    public static int position(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getInt(entryOffset(buffer, frameOffset, i) + POSITION_OFFSET, ORDER);
    }

    /** @return {@code n_tokens} of entry {@code i} (u32 bits). */
    public static int nTokens(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getInt(entryOffset(buffer, frameOffset, i) + N_TOKENS_OFFSET, ORDER);
    }

    /** @return {@code entry_flags} of entry {@code i}. */
    public static int entryFlags(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getInt(entryOffset(buffer, frameOffset, i) + ENTRY_FLAGS_OFFSET, ORDER);
    }

    /** @return whether entry {@code i} has SAMPLE. */
    public static boolean wantsSample(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return (entryFlags(buffer, frameOffset, i) & SAMPLE) != 0;
    }

    /** @return whether entry {@code i} has WANT_LOGITS. */
    public static boolean wantsLogits(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return (entryFlags(buffer, frameOffset, i) & WANT_LOGITS) != 0;
    }
}
