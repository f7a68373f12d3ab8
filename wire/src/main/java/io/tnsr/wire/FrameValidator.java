package io.tnsr.wire;

import io.tnsr.wire.FrameFormatException.Reason;
import org.agrona.DirectBuffer;

import static io.tnsr.wire.FrameHeader.*;

/**
 * Strict, allocation-free validation of TNSR frames, in two steps that match how bytes arrive: the header alone
 * (it gives the total frame length), then the trailer once the whole frame is in memory.
 *
 * <p>PULL mode, a stage's inbound thread reading a socket straight into preallocated ring slots:
 * <pre>{@code
 * long streamOffset = 0, frameIndex = 0;
 * while (running) {
 *     MutableDirectBuffer slot = ring.claim();                      // capacity >= maxFrameSize
 *     readFully(channel, slot, 0, FrameHeader.HEADER_LENGTH);      // exactly 56 bytes
 *     int frameLength = FrameValidator.validateHeader(slot, 0, streamOffset, frameIndex, maxFrameSize);
 *     readFully(channel, slot, FrameHeader.HEADER_LENGTH, frameLength - FrameHeader.HEADER_LENGTH);
 *     FrameValidator.validateTrailer(slot, 0, streamOffset, frameIndex);
 *     ring.publish(slot);
 *     streamOffset += frameLength;
 *     frameIndex++;
 * }
 * // on FrameFormatException e: send ERROR(e.reason().errorCode(), ErrorCode.SEQ_ID_NONE, e.getMessage()), close.
 * }</pre>
 * Hazards: never read the rest of a frame before {@code validateHeader} returned (the length is untrusted until
 * then); never publish before {@code validateTrailer} returned; after any {@link FrameFormatException} the stream
 * has lost framing and must be closed, not resynchronised. The slot must hold {@code maxFrameSize} bytes: a valid
 * frame can be that long.
 *
 * <p>Both methods are thread-safe (stateless) and never allocate unless they throw.
 */
public final class FrameValidator
{
    private static final long U32_LIMIT = 1L << 32;
    /** AUTH's shape is exactly {@code [AUTH_WORDS]}: a 32-byte MAC. */
    public static final int AUTH_WORDS = 8;
    /** HEARTBEAT's shape is exactly {@code [HEARTBEAT_WORDS]}. */
    public static final int HEARTBEAT_WORDS = 4;
    /** SAMPLING's shape is {@code [n, SAMPLING_WORDS]}: one row of words per sequence. */
    public static final int SAMPLING_WORDS = 7;
    /** Most top tokens a SAMPLING row may ask log-probabilities for (its {@code logprobs} word, -1 for none). */
    public static final int MAX_TOP_LOGPROBS = 20;

    private FrameValidator()
    {
    }

    /**
     * Checks a header in this order (the first failure is reported): magic, msg_type, rank &lt;= 4, reserved flag
     * bits, sequence table allowed for the type, unused dims zero, used dims &lt;= 2^31-1, shape fits the type,
     * payload_len &lt;= maxFrameSize, rank 0 has no payload, dims x element size == payload_len, total frame length
     * &lt;= maxFrameSize.
     *
     * @param buffer       holding at least {@link FrameHeader#HEADER_LENGTH} bytes at {@code offset}.
     * @param offset       index of the header's first byte in {@code buffer}.
     * @param streamOffset stream offset of the frame's first byte (for the exception only).
     * @param frameIndex   0-based index of this frame in the stream (for the exception only).
     * @param maxFrameSize largest total frame length accepted, in
     *                     [{@link FrameHeader#MIN_FRAME_SIZE}, {@link FrameHeader#MAX_FRAME_SIZE_LIMIT}].
     * @return the total frame length (header + payload + sequence table + trace stamp), at most {@code maxFrameSize}.
     * @throws FrameFormatException if the header is not valid; nothing of the payload has been read.
     */
    public static int validateHeader(
        final DirectBuffer buffer, final int offset, final long streamOffset, final long frameIndex, final int maxFrameSize)
        throws FrameFormatException
    {
        final int magic = magic(buffer, offset);
        if (magic != MAGIC)
        {
            throw fail(Reason.BAD_MAGIC, frameIndex, streamOffset, MAGIC_OFFSET,
                "bad magic " + hexBytes(buffer, offset, 4) + ", expected 54 4E 53 52 (\"TNSR\")");
        }

        final int typeCode = messageTypeCode(buffer, offset);
        final MessageType type = MessageType.fromCode(typeCode);
        if (type == null)
        {
            throw fail(Reason.UNKNOWN_MESSAGE_TYPE, frameIndex, streamOffset, MSG_TYPE_OFFSET,
                "unknown msg_type " + typeCode + ", expected 1..7");
        }

        final int rank = rank(buffer, offset);
        if (rank > MAX_RANK)
        {
            throw fail(Reason.RANK_TOO_LARGE, frameIndex, streamOffset, RANK_OFFSET,
                "shape_rank " + rank + " > " + MAX_RANK + " (" + type.printName() + ")");
        }

        final int flags = flags(buffer, offset);
        if ((flags & RESERVED_FLAGS_MASK) != 0)
        {
            throw fail(Reason.RESERVED_FLAGS_SET, frameIndex, streamOffset, FLAGS_OFFSET,
                "reserved flag bits set: flags 0x" + hex2(flags) + ", only bit0 (TRACE) is defined");
        }

        final int sequenceCount = sequenceCount(buffer, offset);
        if (sequenceCount != 0 && !type.sequenceTableAllowed())
        {
            throw fail(Reason.SEQUENCE_TABLE_NOT_ALLOWED, frameIndex, streamOffset, SEQUENCE_COUNT_OFFSET,
                "sequence count " + sequenceCount + " on " + type.printName() +
                ", only TOKENS, ACTIVATIONS, LOGITS and SAMPLED may carry a sequence table");
        }

        for (int i = rank; i < MAX_RANK; i++)
        {
            final long d = dim(buffer, offset, i);
            if (d != 0)
            {
                throw fail(Reason.UNUSED_DIM_NONZERO, frameIndex, streamOffset, DIMS_OFFSET + 8 * i,
                    "shape_dims[" + i + "] = " + Long.toUnsignedString(d) + " but shape_rank is " + rank +
                    ", dims beyond the rank must be 0");
            }
        }

        for (int i = 0; i < rank; i++)
        {
            final long d = dim(buffer, offset, i);
            if (d < 0 || d > Integer.MAX_VALUE)
            {
                throw fail(Reason.DIM_TOO_LARGE, frameIndex, streamOffset, DIMS_OFFSET + 8 * i,
                    "shape_dims[" + i + "] = " + Long.toUnsignedString(d) + " > 2147483647");
            }
        }

        if (rank < type.minRank() || rank > type.maxRank())
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, RANK_OFFSET,
                type.printName() + " needs shape_rank " + rankRange(type) + ", got " + rank + " " + shape(buffer, offset, rank));
        }
        if (SHAPE_RULE[typeCode])
        {
            checkShapeRule(buffer, offset, streamOffset, frameIndex, type, rank);
        }

        final long payloadLength = payloadLength(buffer, offset);
        if (payloadLength > maxFrameSize)
        {
            throw fail(Reason.FRAME_TOO_LARGE, frameIndex, streamOffset, PAYLOAD_LENGTH_OFFSET,
                "payload_len " + payloadLength + " > max frame size " + maxFrameSize);
        }

        if (rank == 0)
        {
            if (payloadLength != 0)
            {
                throw fail(Reason.PAYLOAD_ON_RANK_ZERO, frameIndex, streamOffset, PAYLOAD_LENGTH_OFFSET,
                    "rank 0 (" + type.printName() + ") with payload_len " + payloadLength + ", expected 0");
            }
        }
        else
        {
            // Each dim is <= 2^31-1 here; the running product saturates just above any u32, so it never overflows
            // (2^32+1 times 2^31-1 < 2^63) and a zero dim still yields 0.
            long expected = type.elementSize();
            for (int i = 0; i < rank; i++)
            {
                expected = Math.min(expected * dim(buffer, offset, i), U32_LIMIT);
            }
            if (expected != payloadLength)
            {
                throw fail(Reason.SHAPE_PAYLOAD_MISMATCH, frameIndex, streamOffset, PAYLOAD_LENGTH_OFFSET,
                    type.printName() + " shape " + shape(buffer, offset, rank) + " x " + type.elementSize() +
                    " bytes = " + productString(buffer, offset, rank, type.elementSize()) + " bytes, but payload_len is " +
                    payloadLength);
            }
        }

        final long frameLength = FrameHeader.frameLength(payloadLength, sequenceCount, flags);
        if (frameLength > maxFrameSize)
        {
            throw fail(Reason.FRAME_TOO_LARGE, frameIndex, streamOffset, PAYLOAD_LENGTH_OFFSET,
                "frame length " + frameLength + " (56 header + " + payloadLength + " payload + " + sequenceCount +
                " x 16 sequence table" + ((flags & FLAG_TRACE) != 0 ? " + 8 trace" : "") + ") > max frame size " +
                maxFrameSize);
        }
        return (int)frameLength;
    }

    /**
     * Checks the trailer of a frame whose header {@link #validateHeader} accepted and whose bytes are all in
     * {@code buffer}: each sequence-table entry has no reserved entry-flag bits, and when the table is present
     * (seq_count &gt; 0): for TOKENS and ACTIVATIONS the entries' n_tokens sum to dims[0]; for LOGITS the number of
     * WANT_LOGITS entries equals dims[0]. The trace stamp is not checked (any value is valid). A frame without a
     * sequence table passes immediately.
     *
     * @param buffer       holding the whole frame at {@code offset}.
     * @param offset       index of the frame's first byte.
     * @param streamOffset stream offset of the frame's first byte (for the exception only).
     * @param frameIndex   0-based index of the frame in the stream (for the exception only).
     * @throws FrameFormatException if the sequence table is not valid.
     */
    public static void validateTrailer(
        final DirectBuffer buffer, final int offset, final long streamOffset, final long frameIndex)
        throws FrameFormatException
    {
        final int count = sequenceCount(buffer, offset);
        if (count == 0)
        {
            return;
        }
        final int tableOffset = sequenceTableOffset(buffer, offset);
        long tokenSum = 0;
        int logitRows = 0;
        for (int i = 0; i < count; i++)
        {
            final int entry = tableOffset + i * SEQUENCE_ENTRY_LENGTH;
            final int entryFlags = buffer.getInt(entry + SequenceTable.ENTRY_FLAGS_OFFSET, ORDER);
            if ((entryFlags & ~(SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE)) != 0)
            {
                throw fail(Reason.RESERVED_ENTRY_FLAGS_SET, frameIndex, streamOffset,
                    entry + SequenceTable.ENTRY_FLAGS_OFFSET - offset,
                    "sequence entry " + i + " has reserved entry_flags bits set: 0x" + Integer.toHexString(entryFlags) +
                    ", only bit0 (WANT_LOGITS) and bit1 (SAMPLE) are defined");
            }
            if (entryFlags == SequenceTable.SAMPLE)
            {
                throw fail(Reason.RESERVED_ENTRY_FLAGS_SET, frameIndex, streamOffset,
                    entry + SequenceTable.ENTRY_FLAGS_OFFSET - offset,
                    "sequence entry " + i + " has SAMPLE without WANT_LOGITS (a token is sampled from its logits)");
            }
            tokenSum += buffer.getInt(entry + SequenceTable.N_TOKENS_OFFSET, ORDER) & 0xFFFF_FFFFL;
            logitRows += entryFlags & SequenceTable.WANT_LOGITS;
        }

        final int typeCode = messageTypeCode(buffer, offset);
        final long rows = dim(buffer, offset, 0);
        if (typeCode == MessageType.LOGITS.code() || typeCode == MessageType.SAMPLED.code())
        {
            if (logitRows != rows)
            {
                throw fail(Reason.SEQUENCE_TABLE_MISMATCH, frameIndex, streamOffset, tableOffset - offset,
                    typeName(typeCode) + " has " + rows + " rows (dims[0]) but " + logitRows + " of its " + count +
                    " sequence entries have WANT_LOGITS");
            }
        }
        else if (tokenSum != rows)
        {
            throw fail(Reason.SEQUENCE_TABLE_MISMATCH, frameIndex, streamOffset, tableOffset - offset,
                typeName(typeCode) + " has " + rows + " tokens (dims[0]) but its " + count +
                " sequence entries sum to n_tokens " + tokenSum);
        }
    }

    /** Whether a message type's shape has a rule beyond its rank ({@link #checkShapeRule}); by type code. */
    private static final boolean[] SHAPE_RULE = new boolean[256];

    static
    {
        for (final MessageType t : new MessageType[] {
            MessageType.HELLO, MessageType.AUTH, MessageType.HEARTBEAT, MessageType.SAMPLING, MessageType.SAMPLED,
            MessageType.ERROR})
        {
            SHAPE_RULE[t.code()] = true;
        }
    }

    /**
     * The shape rules of the control types (fixed lengths, SAMPLING's row width, SAMPLED's log-probability width,
     * ERROR's minimum): out of line, so that a data frame's header pays one table lookup for them. Runs for every
     * control frame; allocates only when it throws.
     */
    private static void checkShapeRule(
        final DirectBuffer buffer, final int offset, final long streamOffset, final long frameIndex, final MessageType type,
        final int rank) throws FrameFormatException
    {
        if (type == MessageType.HELLO && dim(buffer, offset, 0) != HelloPayload.FIELD_COUNT)
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET,
                "HELLO needs shape [" + HelloPayload.FIELD_COUNT + "], got " + shape(buffer, offset, rank));
        }
        if (type == MessageType.AUTH && dim(buffer, offset, 0) != AUTH_WORDS)
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET,
                "AUTH needs shape [" + AUTH_WORDS + "], got " + shape(buffer, offset, rank));
        }
        if (type == MessageType.HEARTBEAT && dim(buffer, offset, 0) != HEARTBEAT_WORDS)
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET,
                "HEARTBEAT needs shape [" + HEARTBEAT_WORDS + "], got " + shape(buffer, offset, rank));
        }
        if (type == MessageType.SAMPLING && dim(buffer, offset, 1) != SAMPLING_WORDS)
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET + 8,
                "SAMPLING needs shape [n, " + SAMPLING_WORDS + "], got " + shape(buffer, offset, rank));
        }
        if (type == MessageType.SAMPLED && rank == 2)
        {
            final long width = dim(buffer, offset, 1);
            if (width < 2 || (width & 1) != 0 || width > 2 + 2L * MAX_TOP_LOGPROBS)
            {
                throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET + 8,
                    "SAMPLED with log-probabilities needs shape [n_rows, 2 + 2k] with k 0.." + MAX_TOP_LOGPROBS + ", got "
                        + shape(buffer, offset, rank));
            }
        }
        if (type == MessageType.ERROR && dim(buffer, offset, 0) < ErrorPayload.MESSAGE_OFFSET)
        {
            throw fail(Reason.WRONG_SHAPE_FOR_TYPE, frameIndex, streamOffset, DIMS_OFFSET,
                "ERROR needs at least 8 payload bytes (error_code, seq_id), got shape " + shape(buffer, offset, rank));
        }
    }

    // ---------------------------------------------------------------- failure path only (allocates)

    private static FrameFormatException fail(
        final Reason reason, final long frameIndex, final long streamOffset, final int fieldOffset, final String detail)
    {
        return new FrameFormatException(reason, frameIndex, streamOffset, fieldOffset, detail);
    }

    private static String typeName(final int typeCode)
    {
        final MessageType type = MessageType.fromCode(typeCode);
        return type == null ? "msg_type " + typeCode : type.printName();
    }

    private static String rankRange(final MessageType type)
    {
        return type.minRank() == type.maxRank() ? Integer.toString(type.minRank()) : type.minRank() + ".." + type.maxRank();
    }

    static String shape(final DirectBuffer buffer, final int offset, final int rank)
    {
        final StringBuilder sb = new StringBuilder("[");
        for (int i = 0; i < Math.min(rank, MAX_RANK); i++)
        {
            if (i > 0)
            {
                sb.append(", ");
            }
            sb.append(Long.toUnsignedString(dim(buffer, offset, i)));
        }
        return sb.append(']').toString();
    }

    private static String productString(final DirectBuffer buffer, final int offset, final int rank, final int elementSize)
    {
        java.math.BigInteger product = java.math.BigInteger.valueOf(elementSize);
        for (int i = 0; i < rank; i++)
        {
            product = product.multiply(new java.math.BigInteger(Long.toUnsignedString(dim(buffer, offset, i))));
        }
        return product.toString();
    }

    private static String hexBytes(final DirectBuffer buffer, final int offset, final int length)
    {
        final StringBuilder sb = new StringBuilder();
        for (int i = 0; i < length; i++)
        {
            if (i > 0)
            {
                sb.append(' ');
            }
            sb.append(hex2(buffer.getByte(offset + i) & 0xFF));
        }
        return sb.toString();
    }

    private static String hex2(final int value)
    {
        return (value < 16 ? "0" : "") + Integer.toHexString(value).toUpperCase(java.util.Locale.ROOT);
    }
}
