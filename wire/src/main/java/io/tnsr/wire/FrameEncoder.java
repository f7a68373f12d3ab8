package io.tnsr.wire;

import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

import static io.tnsr.wire.FrameHeader.*;

/**
 * Writes TNSR frames into a {@link MutableDirectBuffer} at an offset: static, stateless, no allocation, no varargs.
 *
 * <p>Two ways to build a frame:
 * <ol>
 * <li>A typed helper ({@link #encodeTokens}, {@link #encodeActivations}, {@link #encodeLogits}, {@link #encodeError},
 * {@link #encodeHello}, {@link #encodeEndSequence}, {@link #encodeShutdown}) writes header and payload, zeroes the
 * sequence table and trace slots it reserves, and returns the total frame length.</li>
 * <li>{@link #encodeHeader} alone, when the payload is produced in place (e.g. a stage computing activations
 * straight into {@link FrameHeader#HEADER_LENGTH} bytes after the frame start).</li>
 * </ol>
 * Then fill the sequence table with {@link #putSequenceEntry} and, as the very last thing before the bytes go to the
 * socket, stamp the trace with {@link #stampTrace}:
 * <pre>{@code
 * int len = FrameEncoder.encodeActivations(out, 0, stepId, microBatch, acts, 0, rows, hidden, 2, FrameHeader.FLAG_TRACE);
 * FrameEncoder.putSequenceEntry(out, 0, 0, seqA, posA, rowsA, 0);
 * FrameEncoder.putSequenceEntry(out, 0, 1, seqB, posB, rows - rowsA, SequenceTable.WANT_LOGITS);
 * FrameEncoder.stampTrace(out, 0, System.nanoTime());
 * channel.write(out.byteBuffer().limit(len).position(0));
 * }</pre>
 * Hazards: the encoder writes exactly what it is given and does not validate (that is how tests build malformed
 * frames): the sum of the entries' n_tokens must equal dims[0] (for LOGITS: the WANT_LOGITS count must equal the
 * rows), every reserved entry must be written, and the buffer must have room for the whole frame (Agrona's bounds
 * checks, when enabled, throw IndexOutOfBoundsException otherwise). Use {@link FrameValidator} in tests.
 * {@link #putSequenceEntry} and {@link #stampTrace} locate the trailer from the header, so write the header first.
 */
public final class FrameEncoder
{
    private FrameEncoder()
    {
    }

    /**
     * Writes a 56-byte header. Does not touch the payload or trailer.
     *
     * @param buffer        destination.
     * @param offset        index of the frame's first byte.
     * @param type          msg_type.
     * @param stepId        step_id (u64 bits).
     * @param microBatchId  micro_batch_id (u32 bits).
     * @param flags         flags byte ({@link FrameHeader#FLAG_TRACE} or 0).
     * @param sequenceCount number of sequence-table entries, 0..255.
     * @param rank          shape_rank, 0..4.
     * @param d0            shape_dims[0] (0 when unused).
     * @param d1            shape_dims[1] (0 when unused).
     * @param d2            shape_dims[2] (0 when unused).
     * @param d3            shape_dims[3] (0 when unused).
     * @param payloadLength payload_len in bytes.
     */
    public static void encodeHeader(
        final MutableDirectBuffer buffer,
        final int offset,
        final MessageType type,
        final long stepId,
        final int microBatchId,
        final int flags,
        final int sequenceCount,
        final int rank,
        final long d0,
        final long d1,
        final long d2,
        final long d3,
        final int payloadLength)
    {
        buffer.putInt(offset + MAGIC_OFFSET, MAGIC, ORDER);
        buffer.putByte(offset + MSG_TYPE_OFFSET, (byte)type.code());
        buffer.putByte(offset + RANK_OFFSET, (byte)rank);
        buffer.putByte(offset + FLAGS_OFFSET, (byte)flags);
        buffer.putByte(offset + SEQUENCE_COUNT_OFFSET, (byte)sequenceCount);
        buffer.putLong(offset + STEP_ID_OFFSET, stepId, ORDER);
        buffer.putInt(offset + MICRO_BATCH_ID_OFFSET, microBatchId, ORDER);
        buffer.putInt(offset + PAYLOAD_LENGTH_OFFSET, payloadLength, ORDER);
        buffer.putLong(offset + DIMS_OFFSET, d0, ORDER);
        buffer.putLong(offset + DIMS_OFFSET + 8, d1, ORDER);
        buffer.putLong(offset + DIMS_OFFSET + 16, d2, ORDER);
        buffer.putLong(offset + DIMS_OFFSET + 24, d3, ORDER);
    }

    /**
     * Writes sequence-table entry {@code index} of the frame whose header is at {@code frameOffset} (the table
     * position is computed from that header's payload_len).
     */
    public static void putSequenceEntry(
        final MutableDirectBuffer buffer,
        final int frameOffset,
        final int index,
        final int seqId,
        final int position,
        final int nTokens,
        final int entryFlags)
    {
        final int entry = sequenceTableOffset(buffer, frameOffset) + index * SEQUENCE_ENTRY_LENGTH;
        buffer.putInt(entry + SequenceTable.SEQ_ID_OFFSET, seqId, ORDER);
        buffer.putInt(entry + SequenceTable.POSITION_OFFSET, position, ORDER);
        buffer.putInt(entry + SequenceTable.N_TOKENS_OFFSET, nTokens, ORDER);
        buffer.putInt(entry + SequenceTable.ENTRY_FLAGS_OFFSET, entryFlags, ORDER);
    }

    /**
     * Writes the trace stamp (the last 8 bytes) of the frame whose header is at {@code frameOffset}; the header must
     * have {@link FrameHeader#FLAG_TRACE}. Call it just before the frame is written out.
     */
    public static void stampTrace(final MutableDirectBuffer buffer, final int frameOffset, final long nanoTime)
    {
        buffer.putLong(traceOffset(buffer, frameOffset), nanoTime, ORDER);
    }

    /**
     * TOKENS frame {@code [count]} from {@code tokens[from .. from+count)}.
     *
     * @return the total frame length.
     */
    public static int encodeTokens(
        final MutableDirectBuffer buffer,
        final int offset,
        final long stepId,
        final int microBatchId,
        final int[] tokens,
        final int from,
        final int count,
        final int sequenceCount,
        final int flags)
    {
        final int payloadLength = 4 * count;
        encodeHeader(buffer, offset, MessageType.TOKENS, stepId, microBatchId, flags, sequenceCount, 1, count, 0, 0, 0, payloadLength);
        putU32s(buffer, offset + HEADER_LENGTH, tokens, from, count);
        return clearTrailer(buffer, offset, payloadLength, sequenceCount, flags);
    }

    /**
     * ACTIVATIONS frame {@code [rows, width]}, copying {@code rows * width * 4} bytes of little-endian f32 from
     * {@code src} at {@code srcOffset}.
     *
     * @return the total frame length.
     */
    public static int encodeActivations(
        final MutableDirectBuffer buffer,
        final int offset,
        final long stepId,
        final int microBatchId,
        final DirectBuffer src,
        final int srcOffset,
        final int rows,
        final int width,
        final int sequenceCount,
        final int flags)
    {
        return encodeMatrix(buffer, offset, MessageType.ACTIVATIONS, stepId, microBatchId, src, srcOffset, rows, width, sequenceCount, flags);
    }

    /**
     * LOGITS frame {@code [rows, vocab]}, copying {@code rows * vocab * 4} bytes of little-endian f32 from
     * {@code src}. With a sequence table, exactly {@code rows} entries must have WANT_LOGITS.
     *
     * @return the total frame length.
     */
    public static int encodeLogits(
        final MutableDirectBuffer buffer,
        final int offset,
        final long stepId,
        final int microBatchId,
        final DirectBuffer src,
        final int srcOffset,
        final int rows,
        final int vocab,
        final int sequenceCount,
        final int flags)
    {
        return encodeMatrix(buffer, offset, MessageType.LOGITS, stepId, microBatchId, src, srcOffset, rows, vocab, sequenceCount, flags);
    }

    /**
     * HELLO frame {@code [34]} carrying {@code hello}'s fields (handshake: not on a hot path).
     *
     * @return the total frame length (192).
     */
    public static int encodeHello(final MutableDirectBuffer buffer, final int offset, final long stepId, final Hello hello)
    {
        final int payloadLength = 4 * HelloPayload.FIELD_COUNT;
        encodeHeader(buffer, offset, MessageType.HELLO, stepId, 0, 0, 0, 1, HelloPayload.FIELD_COUNT, 0, 0, 0, payloadLength);
        hello.writePayload(buffer, offset + HEADER_LENGTH);
        return HEADER_LENGTH + payloadLength;
    }

    /**
     * AUTH frame {@code [8]}: the 32-byte MAC.
     *
     * @return the total frame length (88).
     */
    public static int encodeAuth(final MutableDirectBuffer buffer, final int offset, final byte[] mac)
    {
        final int payloadLength = 4 * FrameValidator.AUTH_WORDS;
        encodeHeader(buffer, offset, MessageType.AUTH, 0, 0, 0, 0, 1, FrameValidator.AUTH_WORDS, 0, 0, 0, payloadLength);
        buffer.putBytes(offset + HEADER_LENGTH, mac, 0, payloadLength);
        return HEADER_LENGTH + payloadLength;
    }

    /**
     * HEARTBEAT frame {@code [4]}: {@code frames_done, busy_ms, 0, 0}. No allocation.
     *
     * @param framesDone frames the sender has processed (wraps at 2^32)
     * @param busyMillis how long the sender has been working on its current frame (0 when idle)
     * @return the total frame length (72).
     */
    public static int encodeHeartbeat(final MutableDirectBuffer buffer, final int offset, final int framesDone, final int busyMillis)
    {
        final int payloadLength = 4 * FrameValidator.HEARTBEAT_WORDS;
        encodeHeader(buffer, offset, MessageType.HEARTBEAT, 0, 0, 0, 0, 1, FrameValidator.HEARTBEAT_WORDS, 0, 0, 0, payloadLength);
        final int p = offset + HEADER_LENGTH;
        buffer.putInt(p, framesDone, ORDER);
        buffer.putInt(p + 4, busyMillis, ORDER);
        buffer.putLong(p + 8, 0L, ORDER);
        return HEADER_LENGTH + payloadLength;
    }

    /**
     * A text frame ({@link MessageType#ROUTE} or {@link MessageType#READY}): UTF-8 {@code text} as a u8 vector.
     *
     * @return the total frame length.
     */
    public static int encodeText(final MutableDirectBuffer buffer, final int offset, final MessageType type, final String text)
    {
        final int length = buffer.putStringWithoutLengthUtf8(offset + HEADER_LENGTH, text);
        encodeHeader(buffer, offset, type, 0, 0, 0, 0, 1, length, 0, 0, 0, length);
        return HEADER_LENGTH + length;
    }

    /**
     * Writes a SAMPLING frame header for {@code count} sequences; then {@link #putSampling} fills each row. The
     * frame is {@code HEADER_LENGTH + count * SAMPLING_WORDS * 4} bytes (returned).
     */
    public static int encodeSamplingHeader(final MutableDirectBuffer buffer, final int offset, final long stepId, final int count)
    {
        final int payloadLength = 4 * FrameValidator.SAMPLING_WORDS * count;
        encodeHeader(buffer, offset, MessageType.SAMPLING, stepId, 0, 0, 0, 2, count, FrameValidator.SAMPLING_WORDS, 0, 0,
            payloadLength);
        return HEADER_LENGTH + payloadLength;
    }

    /**
     * Row {@code i} of a SAMPLING frame: how the last stage samples sequence {@code seqId}, from random state
     * {@code state}; {@code logprobs} -1 for no log-probabilities, else how many top tokens to report.
     */
    public static void putSampling(
        final MutableDirectBuffer buffer,
        final int offset,
        final int i,
        final int seqId,
        final float temperature,
        final int topK,
        final float topP,
        final long state,
        final int logprobs)
    {
        final int at = offset + HEADER_LENGTH + 4 * FrameValidator.SAMPLING_WORDS * i;
        buffer.putInt(at, seqId, ORDER);
        buffer.putFloat(at + 4, temperature, ORDER);
        buffer.putInt(at + 8, topK, ORDER);
        buffer.putFloat(at + 12, topP, ORDER);
        buffer.putLong(at + 16, state, ORDER);
        buffer.putInt(at + 24, logprobs, ORDER);
    }

    /**
     * END_SEQUENCE frame {@code [count]} from {@code seqIds[from .. from+count)}.
     *
     * @return the total frame length.
     */
    public static int encodeEndSequence(
        final MutableDirectBuffer buffer,
        final int offset,
        final long stepId,
        final int microBatchId,
        final int[] seqIds,
        final int from,
        final int count)
    {
        final int payloadLength = 4 * count;
        encodeHeader(buffer, offset, MessageType.END_SEQUENCE, stepId, microBatchId, 0, 0, 1, count, 0, 0, 0, payloadLength);
        putU32s(buffer, offset + HEADER_LENGTH, seqIds, from, count);
        return HEADER_LENGTH + payloadLength;
    }

    /**
     * SHUTDOWN frame: header only, rank 0, payload_len 0.
     *
     * @return the total frame length (56).
     */
    public static int encodeShutdown(final MutableDirectBuffer buffer, final int offset, final long stepId, final int microBatchId)
    {
        encodeHeader(buffer, offset, MessageType.SHUTDOWN, stepId, microBatchId, 0, 0, 0, 0, 0, 0, 0, 0);
        return HEADER_LENGTH;
    }

    /**
     * ERROR frame {@code [8 + utf8(message).length]}. Error path: encoding the message may allocate. The caller
     * keeps the message short enough for the peer's maximum frame size and for the buffer.
     *
     * @param seqId the sequence concerned, or {@link ErrorCode#SEQ_ID_NONE} for the whole frame/connection.
     * @return the total frame length.
     */
    public static int encodeError(
        final MutableDirectBuffer buffer,
        final int offset,
        final long stepId,
        final int microBatchId,
        final ErrorCode code,
        final int seqId,
        final String message)
    {
        final int payload = offset + HEADER_LENGTH;
        final int messageLength = buffer.putStringWithoutLengthUtf8(payload + ErrorPayload.MESSAGE_OFFSET, message);
        final int payloadLength = ErrorPayload.MESSAGE_OFFSET + messageLength;
        encodeHeader(buffer, offset, MessageType.ERROR, stepId, microBatchId, 0, 0, 1, payloadLength, 0, 0, 0, payloadLength);
        buffer.putInt(payload + ErrorPayload.ERROR_CODE_OFFSET, code.code(), ORDER);
        buffer.putInt(payload + ErrorPayload.SEQ_ID_OFFSET, seqId, ORDER);
        return HEADER_LENGTH + payloadLength;
    }

    private static int encodeMatrix(
        final MutableDirectBuffer buffer,
        final int offset,
        final MessageType type,
        final long stepId,
        final int microBatchId,
        final DirectBuffer src,
        final int srcOffset,
        final int rows,
        final int width,
        final int sequenceCount,
        final int flags)
    {
        final int payloadLength = Math.multiplyExact(Math.multiplyExact(rows, width), 4);
        encodeHeader(buffer, offset, type, stepId, microBatchId, flags, sequenceCount, 2, rows, width, 0, 0, payloadLength);
        buffer.putBytes(offset + HEADER_LENGTH, src, srcOffset, payloadLength);
        return clearTrailer(buffer, offset, payloadLength, sequenceCount, flags);
    }

    private static void putU32s(final MutableDirectBuffer buffer, final int index, final int[] values, final int from, final int count)
    {
        for (int i = 0; i < count; i++)
        {
            buffer.putInt(index + 4 * i, values[from + i], ORDER);
        }
    }

    /** Zeroes the sequence table and trace slot after the payload; returns the total frame length. */
    private static int clearTrailer(
        final MutableDirectBuffer buffer, final int offset, final int payloadLength, final int sequenceCount, final int flags)
    {
        final int trailer = offset + HEADER_LENGTH + payloadLength;
        final int frameLength = (int)FrameHeader.frameLength(payloadLength, sequenceCount, flags);
        final int trailerLength = offset + frameLength - trailer;
        if (trailerLength > 0)
        {
            buffer.setMemory(trailer, trailerLength, (byte)0);
        }
        return frameLength;
    }
}
