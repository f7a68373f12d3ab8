package io.tnsr.wire;

import io.tnsr.wire.FrameFormatException.Reason;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.Arrays;

import static io.tnsr.wire.FrameHeader.*;
import static org.junit.jupiter.api.Assertions.*;

/**
 * Every validation failure: the reason, the stream offset of the bad field and the frame index. Each bad frame
 * follows a valid 56-byte SHUTDOWN, so it is frame #1 and its fields sit at stream offset 56 + field offset.
 */
class ValidationTest
{
    private static final int PREFIX = 56;
    private static final int TOKENS = 1;
    private static final int ACTIVATIONS = 2;
    private static final int LOGITS = 3;
    private static final int ERROR = 4;
    private static final int HELLO = 5;
    private static final int AUTH = 8;
    private static final int HEARTBEAT = 9;
    private static final int END_SEQUENCE = 6;
    private static final int SHUTDOWN = 7;

    /** A frame with the given raw header fields followed by {@code bodyBytes} zero bytes. */
    private static UnsafeBuffer frame(
        final int type, final int rank, final int flags, final int seqCount, final long payloadLen,
        final long d0, final long d1, final long d2, final long d3, final int bodyBytes)
    {
        final UnsafeBuffer b = new UnsafeBuffer(new byte[HEADER_LENGTH + bodyBytes]);
        FrameEncoder.encodeHeader(b, 0, MessageType.TOKENS, 5, 1, flags, seqCount, rank, d0, d1, d2, d3, (int)payloadLen);
        b.putByte(MSG_TYPE_OFFSET, (byte)type);
        return b;
    }

    private static FrameFormatException expect(final UnsafeBuffer bad, final Reason reason, final int fieldOffset)
    {
        return expect(bad, reason, fieldOffset, DEFAULT_MAX_FRAME_SIZE);
    }

    private static FrameFormatException expect(final UnsafeBuffer bad, final Reason reason, final int fieldOffset, final int max)
    {
        final byte[] stream = new FrameStreams.Builder().shutdown(0).raw(bad.byteArray()).bytes();
        final TestStreams.Decoded d = TestStreams.decode(stream, max);
        assertNotNull(d.error, () -> "expected " + reason + " but decoded " + d);
        final FrameFormatException e = d.error;
        assertEquals(reason, e.reason(), e::getMessage);
        assertEquals(1, e.frameIndex(), e::getMessage);
        assertEquals(PREFIX, e.frameStreamOffset(), e::getMessage);
        assertEquals(fieldOffset, e.fieldOffset(), e::getMessage);
        assertEquals(PREFIX + fieldOffset, e.streamOffset(), e::getMessage);
        assertEquals(1, d.frames.size(), "the valid frame before the bad one is delivered");
        assertTrue(e.getMessage().startsWith("frame #1 at stream offset 56: "), e::getMessage);
        assertTrue(e.getMessage().endsWith("[" + reason + " at byte " + (PREFIX + fieldOffset) + "]"), e::getMessage);

        if (reason != Reason.TRUNCATED_HEADER && reason != Reason.TRUNCATED_PAYLOAD && fieldOffset < HEADER_LENGTH &&
            reason != Reason.RESERVED_ENTRY_FLAGS_SET && reason != Reason.SEQUENCE_TABLE_MISMATCH)
        {
            // Header checks fire as soon as the 56 header bytes are in, before any payload byte is buffered.
            final byte[] headerOnly = Arrays.copyOf(stream, PREFIX + HEADER_LENGTH);
            final FrameChannel channel = FrameChannel.reading(new TestStreams.Chunks(headerOnly, 1), "the test stream", max);
            final ByteBuffer frame = ByteBuffer.allocate(HEADER_LENGTH + 64).order(FrameHeader.ORDER);
            assertDoesNotThrow(() -> channel.read(frame), "the SHUTDOWN before the bad frame");
            final FrameFormatException early = assertThrows(FrameFormatException.class, () -> channel.read(frame));
            assertEquals(e.getMessage(), early.getMessage());
            assertThrows(IllegalStateException.class, () -> channel.read(frame), "framing is lost after a bad frame");
        }
        return e;
    }

    @Test
    void badMagic()
    {
        final UnsafeBuffer b = frame(SHUTDOWN, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        b.putByte(2, (byte)'X');
        final FrameFormatException e = expect(b, Reason.BAD_MAGIC, 0);
        assertTrue(e.getMessage().contains("bad magic 54 4E 58 52, expected 54 4E 53 52"), e::getMessage);
    }

    @Test
    void unknownMessageType()
    {
        for (final int type : new int[] {0, 14, 0x7F, 0xFF})
        {
            final FrameFormatException e = expect(frame(type, 0, 0, 0, 0, 0, 0, 0, 0, 0), Reason.UNKNOWN_MESSAGE_TYPE, 4);
            assertTrue(e.getMessage().contains("unknown msg_type " + type), e::getMessage);
        }
    }

    @Test
    void rankOverFour()
    {
        final FrameFormatException e = expect(frame(ACTIVATIONS, 5, 0, 0, 4, 1, 1, 1, 1, 4), Reason.RANK_TOO_LARGE, 5);
        assertTrue(e.getMessage().contains("shape_rank 5 > 4"), e::getMessage);
        expect(frame(ACTIVATIONS, 0xFF, 0, 0, 4, 1, 1, 1, 1, 4), Reason.RANK_TOO_LARGE, 5);
    }

    @Test
    void reservedFlagBits()
    {
        for (final int flags : new int[] {0x02, 0x80, 0xFF})
        {
            expect(frame(TOKENS, 1, flags, 0, 4, 1, 0, 0, 0, 12), Reason.RESERVED_FLAGS_SET, 6);
        }
    }

    @Test
    void sequenceTableOnATypeThatCannotCarryIt()
    {
        expect(frame(HELLO, 1, 0, 1, 136, 34, 0, 0, 0, 152), Reason.SEQUENCE_TABLE_NOT_ALLOWED, 7);
        expect(frame(ERROR, 1, 0, 2, 8, 8, 0, 0, 0, 40), Reason.SEQUENCE_TABLE_NOT_ALLOWED, 7);
        expect(frame(END_SEQUENCE, 1, 0, 1, 4, 1, 0, 0, 0, 20), Reason.SEQUENCE_TABLE_NOT_ALLOWED, 7);
        expect(frame(SHUTDOWN, 0, 0, 255, 0, 0, 0, 0, 0, 0), Reason.SEQUENCE_TABLE_NOT_ALLOWED, 7);
    }

    @Test
    void unusedDimNonZero()
    {
        expect(frame(TOKENS, 1, 0, 0, 4, 1, 0, 3, 0, 4), Reason.UNUSED_DIM_NONZERO, 24 + 16);
        expect(frame(SHUTDOWN, 0, 0, 0, 0, 1, 0, 0, 0, 0), Reason.UNUSED_DIM_NONZERO, 24);
        expect(frame(ACTIVATIONS, 3, 0, 0, 4, 1, 1, 1, -1L, 4), Reason.UNUSED_DIM_NONZERO, 24 + 24);
    }

    @Test
    void dimBeyondTwoToTheThirtyOne()
    {
        expect(frame(ACTIVATIONS, 2, 0, 0, 0, 0, 1L << 40, 0, 0, 0), Reason.DIM_TOO_LARGE, 32);
        final FrameFormatException e = expect(frame(TOKENS, 1, 0, 0, 4, -1L, 0, 0, 0, 4), Reason.DIM_TOO_LARGE, 24);
        assertTrue(e.getMessage().contains("shape_dims[0] = 18446744073709551615"), e::getMessage);
    }

    @Test
    void wrongShapeForType()
    {
        expect(frame(HELLO, 1, 0, 0, 32, 8, 0, 0, 0, 32), Reason.WRONG_SHAPE_FOR_TYPE, 24);
        expect(frame(HELLO, 2, 0, 0, 136, 34, 1, 0, 0, 136), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        expect(frame(AUTH, 1, 0, 0, 28, 7, 0, 0, 0, 28), Reason.WRONG_SHAPE_FOR_TYPE, 24);
        expect(frame(HEARTBEAT, 1, 0, 0, 12, 3, 0, 0, 0, 12), Reason.WRONG_SHAPE_FOR_TYPE, 24);
        expect(frame(SHUTDOWN, 1, 0, 0, 1, 1, 0, 0, 0, 1), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        expect(frame(TOKENS, 0, 0, 0, 0, 0, 0, 0, 0, 0), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        expect(frame(TOKENS, 2, 0, 0, 8, 1, 2, 0, 0, 8), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        expect(frame(LOGITS, 1, 0, 0, 8, 2, 0, 0, 0, 8), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        expect(frame(ACTIVATIONS, 0, 0, 0, 0, 0, 0, 0, 0, 0), Reason.WRONG_SHAPE_FOR_TYPE, 5);
        final FrameFormatException e = expect(frame(ERROR, 1, 0, 0, 4, 4, 0, 0, 0, 4), Reason.WRONG_SHAPE_FOR_TYPE, 24);
        assertTrue(e.getMessage().contains("ERROR needs at least 8 payload bytes"), e::getMessage);
    }

    @Test
    void payloadLengthOverMaxFrameSize()
    {
        final FrameFormatException e = expect(frame(TOKENS, 1, 0, 0, 0xFFFF_FFFFL, 1, 0, 0, 0, 0), Reason.FRAME_TOO_LARGE, 20);
        assertTrue(e.getMessage().contains("payload_len 4294967295 > max frame size 67108864"), e::getMessage);
        assertEquals(ErrorCode.FRAME_TOO_LARGE, e.reason().errorCode());
        // Consistent shape, but over a configured 1 KiB limit.
        expect(frame(TOKENS, 1, 0, 0, 1028, 257, 0, 0, 0, 0), Reason.FRAME_TOO_LARGE, 20, 1024);
    }

    @Test
    void totalFrameLengthOverMaxFrameSize()
    {
        // 56 + 160 payload = 216 fits 224; + 1 entry (16) = 232 does not.
        expect(frame(ACTIVATIONS, 2, 0, 1, 160, 1, 40, 0, 0, 160 + 16), Reason.FRAME_TOO_LARGE, 20, 231);
        // Exactly at the limit is fine; the trace stamp tips it over.
        final UnsafeBuffer atLimit = frame(ACTIVATIONS, 2, 0, 0, 160, 1, 40, 0, 0, 160);
        assertDoesNotThrow(() -> FrameValidator.validateHeader(atLimit, 0, 0, 0, 216));
        final FrameFormatException e = expect(frame(ACTIVATIONS, 2, FLAG_TRACE, 0, 160, 1, 40, 0, 0, 168), Reason.FRAME_TOO_LARGE, 20, 216);
        assertTrue(e.getMessage().contains("frame length 224 (56 header + 160 payload + 0 x 16 sequence table + 8 trace) > max frame size 216"), e::getMessage);
    }

    @Test
    void rankZeroWithPayload()
    {
        expect(frame(SHUTDOWN, 0, 0, 0, 4, 0, 0, 0, 0, 4), Reason.PAYLOAD_ON_RANK_ZERO, 20);
    }

    @Test
    void shapePayloadMismatch()
    {
        final FrameFormatException e = expect(frame(TOKENS, 1, 0, 0, 8, 3, 0, 0, 0, 8), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        assertTrue(e.getMessage().contains("TOKENS shape [3] x 4 bytes = 12 bytes, but payload_len is 8"), e::getMessage);
        expect(frame(ACTIVATIONS, 2, 0, 0, 4096, 4, 1023, 0, 0, 4096), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        expect(frame(HELLO, 1, 0, 0, 8, 34, 0, 0, 0, 8), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        expect(frame(ERROR, 1, 0, 0, 9, 10, 0, 0, 0, 9), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        expect(frame(TOKENS, 1, 0, 0, 4, 0, 0, 0, 0, 4), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        // Product 4 * (2^31-1)^4 would overflow a long; the check must still say "mismatch", not wrap around to 16.
        final long big = Integer.MAX_VALUE;
        final FrameFormatException o = expect(frame(ACTIVATIONS, 4, 0, 0, 16, big, big, big, big, 16), Reason.SHAPE_PAYLOAD_MISMATCH, 20);
        assertTrue(o.getMessage().contains("= 85070591571778290947995441078751723524 bytes"), o::getMessage);
        // A zero dim makes the product 0, whatever the others are.
        assertDoesNotThrow(() -> FrameValidator.validateHeader(frame(ACTIVATIONS, 4, 0, 0, 0, big, big, 0, big, 0), 0, 0, 0, 1024));
    }

    @Test
    void reservedEntryFlagBits()
    {
        // TOKENS [2], entries: (seq 1, n 1, flags 0), (seq 2, n 1, flags 0x4)
        final UnsafeBuffer b = frame(TOKENS, 1, 0, 2, 8, 2, 0, 0, 0, 8 + 32);
        FrameEncoder.putSequenceEntry(b, 0, 0, 1, 0, 1, 0);
        FrameEncoder.putSequenceEntry(b, 0, 1, 2, 0, 1, 0x4);
        final FrameFormatException e = expect(b, Reason.RESERVED_ENTRY_FLAGS_SET, 56 + 8 + 16 + 12);
        assertTrue(e.getMessage().contains("sequence entry 1 has reserved entry_flags bits set: 0x4"), e::getMessage);
    }

    @Test
    void sequenceTableDoesNotAddUp()
    {
        final UnsafeBuffer tokens = frame(TOKENS, 1, 0, 2, 12, 3, 0, 0, 0, 12 + 32);
        FrameEncoder.putSequenceEntry(tokens, 0, 0, 1, 0, 1, 0);
        FrameEncoder.putSequenceEntry(tokens, 0, 1, 2, 0, 1, 1);
        FrameFormatException e = expect(tokens, Reason.SEQUENCE_TABLE_MISMATCH, 56 + 12);
        assertTrue(e.getMessage().contains("TOKENS has 3 tokens (dims[0]) but its 2 sequence entries sum to n_tokens 2"), e::getMessage);

        final UnsafeBuffer acts = frame(ACTIVATIONS, 2, FLAG_TRACE, 1, 16, 2, 2, 0, 0, 16 + 16 + 8);
        FrameEncoder.putSequenceEntry(acts, 0, 0, 1, 0, 0xFFFF_FFFF, 0);
        expect(acts, Reason.SEQUENCE_TABLE_MISMATCH, 56 + 16);

        final UnsafeBuffer logits = frame(LOGITS, 2, 0, 2, 16, 2, 2, 0, 0, 16 + 32);
        FrameEncoder.putSequenceEntry(logits, 0, 0, 1, 0, 5, SequenceTable.WANT_LOGITS);
        FrameEncoder.putSequenceEntry(logits, 0, 1, 2, 0, 5, 0);
        e = expect(logits, Reason.SEQUENCE_TABLE_MISMATCH, 56 + 16);
        assertTrue(e.getMessage().contains("LOGITS has 2 rows (dims[0]) but 1 of its 2 sequence entries have WANT_LOGITS"), e::getMessage);
    }

    @Test
    void truncatedHeader()
    {
        final UnsafeBuffer b = frame(TOKENS, 1, 0, 0, 4, 1, 0, 0, 0, 4);
        final FrameFormatException e = expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 20)), Reason.TRUNCATED_HEADER, 20);
        assertTrue(e.getMessage().contains("stream ended after 20 of the 56 header bytes"), e::getMessage);
        expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 1)), Reason.TRUNCATED_HEADER, 1);
        expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 55)), Reason.TRUNCATED_HEADER, 55);
    }

    @Test
    void truncatedPayloadOrTrailer()
    {
        final UnsafeBuffer b = frame(TOKENS, 1, FLAG_TRACE, 1, 8, 2, 0, 0, 0, 8 + 16 + 8);
        FrameEncoder.putSequenceEntry(b, 0, 0, 1, 0, 2, 0);
        final FrameFormatException e = expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 60)), Reason.TRUNCATED_PAYLOAD, 60);
        assertTrue(e.getMessage().contains("stream ended after 60 of the 88 frame bytes (TOKENS, payload_len 8, 1 sequence entries, trace)"),
            e::getMessage);
        expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 56)), Reason.TRUNCATED_PAYLOAD, 56);
        expect(new UnsafeBuffer(Arrays.copyOf(b.byteArray(), 87)), Reason.TRUNCATED_PAYLOAD, 87);
    }

    @Test
    void firstFailureInTheDocumentedOrderWins()
    {
        // Unknown type, rank 9, reserved flags, unused dims: the type is reported.
        expect(frame(0x42, 9, 0xFF, 3, 1, 1, 1, 1, 1, 1), Reason.UNKNOWN_MESSAGE_TYPE, 4);
        // Rank 9 and reserved flags: rank first.
        expect(frame(TOKENS, 9, 0xFF, 0, 4, 1, 0, 0, 0, 4), Reason.RANK_TOO_LARGE, 5);
        // Too large and mismatched: too large first.
        expect(frame(TOKENS, 1, 0, 0, 0x7FFF_FFFFL, 1, 0, 0, 0, 0), Reason.FRAME_TOO_LARGE, 20);
        // Wrong shape for type and mismatch: shape first.
        expect(frame(SHUTDOWN, 1, 0, 0, 100, 3, 0, 0, 0, 100), Reason.WRONG_SHAPE_FOR_TYPE, 5);
    }

    @Test
    void offsetsCountFromTheStreamStartAcrossManyFrames()
    {
        final FrameStreams.Builder s = new FrameStreams.Builder();
        for (int i = 0; i < 10; i++)
        {
            s.tokens(i, 0, new int[] {1, 2, 3}, 0);
        }
        final int before = s.length();
        final UnsafeBuffer bad = frame(TOKENS, 1, 0, 0, 4, 1, 0, 0, 0, 4);
        bad.putByte(MSG_TYPE_OFFSET, (byte)99);
        final TestStreams.Decoded d = TestStreams.decode(s.raw(bad.byteArray()).bytes(), DEFAULT_MAX_FRAME_SIZE, 7, 100, 333);
        assertEquals(10, d.frames.size());
        assertEquals(10, d.error.frameIndex());
        assertEquals(before + 4, d.error.streamOffset());
    }

    @Test
    void sampledTokensAndSamplingRows()
    {
        // SAMPLE only with WANT_LOGITS
        final UnsafeBuffer b = frame(TOKENS, 1, 0, 2, 8, 2, 0, 0, 0, 8 + 32);
        FrameEncoder.putSequenceEntry(b, 0, 0, 1, 0, 1, SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE);
        FrameEncoder.putSequenceEntry(b, 0, 1, 2, 0, 1, SequenceTable.SAMPLE);
        FrameFormatException e = expect(b, Reason.RESERVED_ENTRY_FLAGS_SET, 56 + 8 + 16 + 12);
        assertTrue(e.getMessage().contains("sequence entry 1 has SAMPLE without WANT_LOGITS"), e::getMessage);

        // SAMPLED: one token per WANT_LOGITS entry
        final UnsafeBuffer sampled = frame(MessageType.SAMPLED.code(), 1, 0, 2, 8, 2, 0, 0, 0, 8 + 32);
        FrameEncoder.putSequenceEntry(sampled, 0, 0, 1, 4, 1, SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE);
        FrameEncoder.putSequenceEntry(sampled, 0, 1, 2, 0, 9, 0);
        e = expect(sampled, Reason.SEQUENCE_TABLE_MISMATCH, 56 + 8);
        assertTrue(e.getMessage().contains("SAMPLED has 2 rows (dims[0]) but 1 of its 2 sequence entries have WANT_LOGITS"),
            e::getMessage);

        // SAMPLED with log-probabilities: [rows, 2 + 2k], k at most 20
        final UnsafeBuffer withLogprobs = frame(MessageType.SAMPLED.code(), 2, 0, 1, 24, 1, 6, 0, 0, 24 + 16);
        FrameEncoder.putSequenceEntry(withLogprobs, 0, 0, 1, 4, 1, SequenceTable.WANT_LOGITS | SequenceTable.SAMPLE);
        assertDoesNotThrow(() -> FrameValidator.validateHeader(withLogprobs, 0, 0, 0, 1024));
        e = expect(frame(MessageType.SAMPLED.code(), 2, 0, 1, 20, 1, 5, 0, 0, 20 + 16), Reason.WRONG_SHAPE_FOR_TYPE, 32);
        assertTrue(e.getMessage().contains("SAMPLED with log-probabilities needs shape [n_rows, 2 + 2k] with k 0..20, got [1, 5]"),
            e::getMessage);
        expect(frame(MessageType.SAMPLED.code(), 2, 0, 1, 176, 1, 44, 0, 0, 176 + 16), Reason.WRONG_SHAPE_FOR_TYPE, 32);

        // SAMPLING rows are seven words
        e = expect(frame(MessageType.SAMPLING.code(), 2, 0, 0, 48, 2, 6, 0, 0, 48), Reason.WRONG_SHAPE_FOR_TYPE, 32);
        assertTrue(e.getMessage().contains("SAMPLING needs shape [n, 7], got [2, 6]"), e::getMessage);

        final UnsafeBuffer ok = new UnsafeBuffer(new byte[HEADER_LENGTH + 56]);
        final int len = FrameEncoder.encodeSamplingHeader(ok, 0, 9, 2);
        FrameEncoder.putSampling(ok, 0, 0, 7, 0.8f, 40, 0.95f, 0x0123_4567_89AB_CDEFL, 5);
        FrameEncoder.putSampling(ok, 0, 1, 8, 0f, 0, 1f, -1L, -1);
        assertEquals(HEADER_LENGTH + 56, len);
        assertDoesNotThrow(() -> FrameValidator.validateHeader(ok, 0, 0, 0, 1024));
        assertEquals(7, ok.getInt(HEADER_LENGTH, FrameHeader.ORDER));
        assertEquals(0.95f, ok.getFloat(HEADER_LENGTH + 12, FrameHeader.ORDER));
        assertEquals(0x0123_4567_89AB_CDEFL, ok.getLong(HEADER_LENGTH + 16, FrameHeader.ORDER));
        assertEquals(5, ok.getInt(HEADER_LENGTH + 24, FrameHeader.ORDER));
        assertEquals(-1L, ok.getLong(HEADER_LENGTH + 28 + 16, FrameHeader.ORDER));
        assertEquals(-1, ok.getInt(HEADER_LENGTH + 28 + 24, FrameHeader.ORDER));
    }
}
