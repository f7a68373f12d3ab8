package io.tnsr.wire;

import org.agrona.DirectBuffer;

import java.nio.ByteOrder;

/**
 * The 56-byte TNSR frame header: field offsets, constants, static accessors and a reusable flyweight.
 *
 * <p>Layout (little-endian; byte-for-byte the C struct {@code repr(C, align(8))}, see {@code docs/PROTOCOL.md}):
 * <pre>
 *  &#64;0  magic[4]        'T' 'N' 'S' 'R'
 *  &#64;4  msg_type        u8   {@link MessageType}
 *  &#64;5  shape_rank      u8   0..4
 *  &#64;6  flags           u8   (C: padding[0]) bit0 TRACE, bits 1..7 reserved = 0
 *  &#64;7  seq_count       u8   (C: padding[1]) sequence-table entries after the payload
 *  &#64;8  step_id         u64
 *  &#64;16 micro_batch_id  u32
 *  &#64;20 payload_len     u32
 *  &#64;24 shape_dims      u64[4]  (dims beyond rank are 0)
 * </pre>
 * A frame is {@code header | payload | seq_count x 16-byte sequence entries | 8-byte trace stamp if TRACE}, so its
 * total length follows from the header alone ({@link #frameLength(DirectBuffer, int)}).
 *
 * <p>The flyweight does not validate: wrap a header that {@link FrameValidator#validateHeader} accepted, or use the
 * getters only for diagnostics. Typical use, with one instance reused for every frame:
 * <pre>{@code
 * private final FrameHeader header = new FrameHeader();          // allocated once
 * ...
 * header.wrap(buffer, offset);
 * if (header.messageType() == MessageType.ACTIVATIONS) {
 *     int rows = (int) header.dim(0), width = (int) header.dim(header.rank() - 1);
 *     float x = buffer.getFloat(header.payloadOffset(), ByteOrder.LITTLE_ENDIAN);
 * }
 * }</pre>
 * Hazard: the flyweight reads the buffer on every call; it sees whatever the buffer holds now, so do not keep it (or
 * the buffer) past the moment the bytes are recycled (for example when the next frame is read into it).
 *
 * <p>Unsigned fields: u64 values ({@code step_id}, dims) are returned as the raw bits in a {@code long}; u32 ids
 * ({@code micro_batch_id}) as raw bits in an {@code int}; u32 lengths as exact non-negative {@code long}s. After
 * validation every dim is at most {@link Integer#MAX_VALUE} and the frame length at most the maximum frame size, so
 * {@code (int)} casts of those are safe.
 */
public final class FrameHeader
{
    /** Byte order of every multi-byte field of the protocol. */
    public static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    /** Offset of {@code magic[4]}. */
    public static final int MAGIC_OFFSET = 0;
    /** Offset of {@code msg_type} (u8). */
    public static final int MSG_TYPE_OFFSET = 4;
    /** Offset of {@code shape_rank} (u8). */
    public static final int RANK_OFFSET = 5;
    /** Offset of the flags byte ({@code padding[0]} in the C struct). */
    public static final int FLAGS_OFFSET = 6;
    /** Offset of the sequence count byte ({@code padding[1]} in the C struct). */
    public static final int SEQUENCE_COUNT_OFFSET = 7;
    /** Offset of {@code step_id} (u64). */
    public static final int STEP_ID_OFFSET = 8;
    /** Offset of {@code micro_batch_id} (u32). */
    public static final int MICRO_BATCH_ID_OFFSET = 16;
    /** Offset of {@code payload_len} (u32). */
    public static final int PAYLOAD_LENGTH_OFFSET = 20;
    /** Offset of {@code shape_dims[0]} (u64); dim i is at {@code DIMS_OFFSET + 8 * i}. */
    public static final int DIMS_OFFSET = 24;
    /** Length of the header in bytes. */
    public static final int HEADER_LENGTH = 56;

    /** The magic as the int a little-endian read of bytes {@code 54 4E 53 52} ("TNSR") yields. */
    public static final int MAGIC = 0x52534E54;
    /** Largest shape_rank. */
    public static final int MAX_RANK = 4;

    /** Flags bit 0: an 8-byte trace stamp (sender's {@code System.nanoTime()}) ends the frame. */
    public static final int FLAG_TRACE = 0x01;
    /** Flag bits that must be zero. */
    public static final int RESERVED_FLAGS_MASK = 0xFE;

    /** Length of one sequence-table entry. */
    public static final int SEQUENCE_ENTRY_LENGTH = 16;
    /** Largest sequence count (the field is one byte). */
    public static final int MAX_SEQUENCE_COUNT = 255;
    /** Length of the trace stamp (i64). */
    public static final int TRACE_LENGTH = 8;

    /** Default maximum total frame length accepted by the validator and the stream decoder: 64 MiB. */
    public static final int DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024;
    /** Largest maximum frame size that may be configured: 1 GiB (frame lengths stay far from int overflow). */
    public static final int MAX_FRAME_SIZE_LIMIT = 1 << 30;
    /** Smallest maximum frame size that may be configured: one header. */
    public static final int MIN_FRAME_SIZE = HEADER_LENGTH;

    private DirectBuffer buffer;
    private int offset;

    /**
     * Points this flyweight at a header. Allocation-free.
     *
     * @param buffer holding at least {@link #HEADER_LENGTH} bytes from {@code offset}.
     * @param offset index of the header's first byte (the magic).
     * @return this.
     */
    public FrameHeader wrap(final DirectBuffer buffer, final int offset)
    {
        this.buffer = buffer;
        this.offset = offset;
        return this;
    }

    /** @return the wrapped buffer. */
    public DirectBuffer buffer()
    {
        return buffer;
    }

    /** @return the index of the frame's first byte in {@link #buffer()}. */
    public int offset()
    {
        return offset;
    }

    /** @return the first four bytes as a little-endian int; {@link #MAGIC} for a valid frame. */
    public int magic()
    {
        return magic(buffer, offset);
    }

    /** @return {@code msg_type} as an unsigned value 0..255. */
    public int messageTypeCode()
    {
        return messageTypeCode(buffer, offset);
    }

    /** @return the message type, or {@code null} when the code is unknown. */
    public MessageType messageType()
    {
        return MessageType.fromCode(messageTypeCode(buffer, offset));
    }

    /** @return {@code shape_rank}, 0..255 (0..4 when valid). */
    public int rank()
    {
        return rank(buffer, offset);
    }

    /** @return the flags byte, 0..255. */
    public int flags()
    {
        return flags(buffer, offset);
    }

    /** @return whether the TRACE flag is set (an 8-byte trace stamp ends the frame). */
    public boolean hasTrace()
    {
        return (flags(buffer, offset) & FLAG_TRACE) != 0;
    }

    /** @return the number of sequence-table entries after the payload, 0..255. */
    public int sequenceCount()
    {
        return sequenceCount(buffer, offset);
    }

    /** @return {@code step_id} (u64 bits). */
    public long stepId()
    {
        return stepId(buffer, offset);
    }

    /** @return {@code micro_batch_id} (u32 bits). */
    public int microBatchId()
    {
        return microBatchId(buffer, offset);
    }

    /** @return {@code payload_len}, 0..2^32-1. */
    public long payloadLength()
    {
        return payloadLength(buffer, offset);
    }

    /**
     * @param i dimension index 0..3.
     * @return {@code shape_dims[i]} (u64 bits).
     */
    public long dim(final int i)
    {
        return dim(buffer, offset, i);
    }

    /** @return the total frame length (header, payload, sequence table, trace stamp) computed from the header. */
    public long frameLength()
    {
        return frameLength(buffer, offset);
    }

    /** @return the buffer index of the first payload byte. */
    public int payloadOffset()
    {
        return offset + HEADER_LENGTH;
    }

    /** @return the buffer index of the first sequence-table entry (valid frames only). */
    public int sequenceTableOffset()
    {
        return sequenceTableOffset(buffer, offset);
    }

    /** @return the trace stamp (sender's {@code System.nanoTime()}); only meaningful when {@link #hasTrace()}. */
    public long traceNanos()
    {
        return traceNanos(buffer, offset);
    }

    @Override
    public String toString()
    {
        if (buffer == null)
        {
            return "FrameHeader{unwrapped}";
        }
        final MessageType type = messageType();
        return "FrameHeader{type=" + (type == null ? "UNKNOWN(" + messageTypeCode() + ")" : type.printName()) +
            ", step=" + Long.toUnsignedString(stepId()) + ", mb=" + Integer.toUnsignedString(microBatchId()) +
            ", rank=" + rank() + ", dims=[" + Long.toUnsignedString(dim(0)) + ", " + Long.toUnsignedString(dim(1)) +
            ", " + Long.toUnsignedString(dim(2)) + ", " + Long.toUnsignedString(dim(3)) + "], payload=" +
            payloadLength() + ", flags=0x" + Integer.toHexString(flags()) + ", seqCount=" + sequenceCount() + '}';
    }

    // ---------------------------------------------------------------- static accessors (no flyweight needed)

    /** @return the magic at {@code frameOffset} as a little-endian int. */
    public static int magic(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getInt(frameOffset + MAGIC_OFFSET, ORDER);
    }

    /** @return {@code msg_type}, 0..255. */
    public static int messageTypeCode(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getByte(frameOffset + MSG_TYPE_OFFSET) & 0xFF;
    }

    /** @return {@code shape_rank}, 0..255. */
    public static int rank(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getByte(frameOffset + RANK_OFFSET) & 0xFF;
    }

    /** @return the flags byte, 0..255. */
    public static int flags(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getByte(frameOffset + FLAGS_OFFSET) & 0xFF;
    }

    /** @return the sequence count, 0..255. */
    public static int sequenceCount(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getByte(frameOffset + SEQUENCE_COUNT_OFFSET) & 0xFF;
    }

    /** @return {@code step_id} (u64 bits). */
    public static long stepId(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getLong(frameOffset + STEP_ID_OFFSET, ORDER);
    }

    /** @return {@code micro_batch_id} (u32 bits). */
    public static int microBatchId(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getInt(frameOffset + MICRO_BATCH_ID_OFFSET, ORDER);
    }

    /** @return {@code payload_len} as an exact value 0..2^32-1. */
    public static long payloadLength(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getInt(frameOffset + PAYLOAD_LENGTH_OFFSET, ORDER) & 0xFFFF_FFFFL;
    }

    /** @return {@code shape_dims[i]} (u64 bits), {@code i} in 0..3. */
    public static long dim(final DirectBuffer buffer, final int frameOffset, final int i)
    {
        return buffer.getLong(frameOffset + DIMS_OFFSET + 8 * i, ORDER);
    }

    /**
     * Total frame length from the header alone: {@code 56 + payload_len + 16 * seq_count + (TRACE ? 8 : 0)}.
     * Exact for any header (no overflow: at most about 2^32 + 4 KiB).
     */
    public static long frameLength(final DirectBuffer buffer, final int frameOffset)
    {
        return frameLength(payloadLength(buffer, frameOffset), sequenceCount(buffer, frameOffset), flags(buffer, frameOffset));
    }

    /**
     * @param payloadLength payload bytes.
     * @param sequenceCount sequence-table entries.
     * @param flags the flags byte (only {@link #FLAG_TRACE} matters).
     * @return the total frame length of such a frame.
     */
    public static long frameLength(final long payloadLength, final int sequenceCount, final int flags)
    {
        return HEADER_LENGTH + payloadLength + (long)SEQUENCE_ENTRY_LENGTH * sequenceCount +
            ((flags & FLAG_TRACE) != 0 ? TRACE_LENGTH : 0);
    }

    /** @return the buffer index of the first sequence-table entry: right after the payload. */
    public static int sequenceTableOffset(final DirectBuffer buffer, final int frameOffset)
    {
        return frameOffset + HEADER_LENGTH + (int)payloadLength(buffer, frameOffset);
    }

    /** @return the buffer index of the trace stamp: the last 8 bytes of a frame with TRACE. */
    public static int traceOffset(final DirectBuffer buffer, final int frameOffset)
    {
        return sequenceTableOffset(buffer, frameOffset) + SEQUENCE_ENTRY_LENGTH * sequenceCount(buffer, frameOffset);
    }

    /** @return the trace stamp of a frame with TRACE (its last 8 bytes). */
    public static long traceNanos(final DirectBuffer buffer, final int frameOffset)
    {
        return buffer.getLong(traceOffset(buffer, frameOffset), ORDER);
    }
}
