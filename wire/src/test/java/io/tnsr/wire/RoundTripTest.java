package io.tnsr.wire;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

import static io.tnsr.wire.FrameHeader.FLAG_TRACE;
import static org.junit.jupiter.api.Assertions.*;

/** Every message type encoded by {@link FrameEncoder} comes back with the same fields through both decode modes. */
class RoundTripTest
{
    private final UnsafeBuffer out = new UnsafeBuffer(new byte[64 * 1024]);

    /** Reads the single frame at 0 back through a {@link FrameChannel} and checks the validator agrees. */
    private FrameHeader decodeOne(final int frameLength) throws Exception
    {
        assertEquals(frameLength, FrameValidator.validateHeader(out, 0, 0, 0, FrameHeader.DEFAULT_MAX_FRAME_SIZE));
        FrameValidator.validateTrailer(out, 0, 0, 0);

        final byte[] bytes = new byte[frameLength];
        out.getBytes(0, bytes);
        final FrameChannel channel = FrameChannel.reading(new TestStreams.Chunks(bytes, 1), "the test stream",
            FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        final ByteBuffer slot = ByteBuffer.allocate(frameLength).order(FrameHeader.ORDER);
        assertEquals(frameLength, channel.read(slot));
        assertArrayEquals(bytes, slot.array(), "the frame's bytes, in place in the reader's buffer");
        assertEquals(FrameChannel.END_OF_STREAM, channel.read(slot));
        return new FrameHeader().wrap(out, 0);
    }

    @Test
    void tokensPlain() throws Exception
    {
        final int len = FrameEncoder.encodeTokens(out, 0, 42, 1, new int[] {9, 1, 2, 3, 9}, 1, 3, 0, 0);
        final FrameHeader h = decodeOne(len);
        assertEquals(56 + 12, len);
        assertEquals(MessageType.TOKENS, h.messageType());
        assertEquals(42, h.stepId());
        assertEquals(1, h.microBatchId());
        assertEquals(1, h.rank());
        assertEquals(3, h.dim(0));
        assertEquals(12, h.payloadLength());
        assertEquals(0, h.sequenceCount());
        assertFalse(h.hasTrace());
        assertArrayEquals(new int[] {1, 2, 3}, u32s(out, 0, 3));
    }

    @Test
    void tokensWithSequenceTableAndTrace() throws Exception
    {
        final int len = FrameEncoder.encodeTokens(out, 0, -2L, 0xFFFF_FFFE, new int[] {1, 2, 3}, 0, 3, 2, FLAG_TRACE);
        FrameEncoder.putSequenceEntry(out, 0, 0, 100, 0, 2, SequenceTable.WANT_LOGITS);
        FrameEncoder.putSequenceEntry(out, 0, 1, 0xFFFF_FFF0, 77, 1, 0);
        FrameEncoder.stampTrace(out, 0, 123_456_789_012L);
        final FrameHeader h = decodeOne(len);
        assertEquals(56 + 12 + 32 + 8, len);
        assertEquals(-2L, h.stepId());
        assertEquals(0xFFFF_FFFE, h.microBatchId());
        assertEquals(2, h.sequenceCount());
        assertEquals(68, h.sequenceTableOffset());
        assertEquals(100, SequenceTable.seqId(out, 0, 0));
        assertEquals(0, SequenceTable.position(out, 0, 0));
        assertEquals(2, SequenceTable.nTokens(out, 0, 0));
        assertTrue(SequenceTable.wantsLogits(out, 0, 0));
        assertEquals(0xFFFF_FFF0, SequenceTable.seqId(out, 0, 1));
        assertEquals(77, SequenceTable.position(out, 0, 1));
        assertEquals(1, SequenceTable.nTokens(out, 0, 1));
        assertFalse(SequenceTable.wantsLogits(out, 0, 1));
        assertTrue(h.hasTrace());
        assertEquals(123_456_789_012L, h.traceNanos());
    }

    @Test
    void activationsPlainAndWithTrailer() throws Exception
    {
        final UnsafeBuffer values = FrameStreams.floats(3 * 5, 1);
        int len = FrameEncoder.encodeActivations(out, 0, 7, 2, values, 0, 3, 5, 0, 0);
        FrameHeader h = decodeOne(len);
        assertEquals(MessageType.ACTIVATIONS, h.messageType());
        assertEquals(2, h.rank());
        assertEquals(3, h.dim(0));
        assertEquals(5, h.dim(1));
        assertEquals(60, h.payloadLength());
        for (int i = 0; i < 15; i++)
        {
            assertEquals(values.getFloat(4 * i, FrameHeader.ORDER), FramePayload.f32(out, 0, i));
        }

        len = FrameEncoder.encodeActivations(out, 0, 8, 3, values, 0, 3, 5, 1, FLAG_TRACE);
        FrameEncoder.putSequenceEntry(out, 0, 0, 5, 10, 3, SequenceTable.WANT_LOGITS);
        FrameEncoder.stampTrace(out, 0, 99);
        h = decodeOne(len);
        assertEquals(56 + 60 + 16 + 8, len);
        assertEquals(3, SequenceTable.nTokens(out, 0, 0));
        assertEquals(99, h.traceNanos());
        assertEquals(values.getFloat(56, FrameHeader.ORDER), FramePayload.f32(out, 0, 14));
    }

    @Test
    void activationsOfRankOneToFourViaEncodeHeader() throws Exception
    {
        final long[][] shapes = {{16}, {2, 8}, {2, 2, 4}, {1, 2, 2, 4}};
        for (final long[] s : shapes)
        {
            final long[] d = {0, 0, 0, 0};
            System.arraycopy(s, 0, d, 0, s.length);
            FrameEncoder.encodeHeader(out, 0, MessageType.ACTIVATIONS, 1, 0, 0, 0, s.length, d[0], d[1], d[2], d[3], 64);
            final FrameHeader h = decodeOne(56 + 64);
            assertEquals(s.length, h.rank());
            for (int i = 0; i < 4; i++)
            {
                assertEquals(d[i], h.dim(i));
            }
        }
    }

    @Test
    void logitsWithWantLogitsRows() throws Exception
    {
        final UnsafeBuffer values = FrameStreams.floats(2 * 10, 3);
        final int len = FrameEncoder.encodeLogits(out, 0, 11, 0, values, 0, 2, 10, 3, 0);
        FrameEncoder.putSequenceEntry(out, 0, 0, 1, 0, 4, SequenceTable.WANT_LOGITS);
        FrameEncoder.putSequenceEntry(out, 0, 1, 2, 0, 4, 0);
        FrameEncoder.putSequenceEntry(out, 0, 2, 3, 8, 1, SequenceTable.WANT_LOGITS);
        final FrameHeader h = decodeOne(len);
        assertEquals(MessageType.LOGITS, h.messageType());
        assertEquals(2, h.dim(0));
        assertEquals(10, h.dim(1));
        assertEquals(3, h.sequenceCount());
        assertEquals(values.getFloat(4 * 19, FrameHeader.ORDER), FramePayload.f32(out, 0, 19));
    }

    @Test
    void error() throws Exception
    {
        int len = FrameEncoder.encodeError(out, 0, 5, 1, ErrorCode.CONTEXT_OVERFLOW, 17, "position 2048 ≥ context 2048");
        FrameHeader h = decodeOne(len);
        assertEquals(MessageType.ERROR, h.messageType());
        assertEquals(1, h.rank());
        assertEquals(h.payloadLength(), h.dim(0));
        assertEquals(ErrorCode.CONTEXT_OVERFLOW, ErrorPayload.errorCode(out, 0));
        assertEquals(17, ErrorPayload.seqId(out, 0));
        assertEquals("position 2048 ≥ context 2048", ErrorPayload.message(out, 0));

        len = FrameEncoder.encodeError(out, 0, 5, 1, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE, "");
        h = decodeOne(len);
        assertEquals(56 + 8, len);
        assertEquals(ErrorCode.SEQ_ID_NONE, ErrorPayload.seqId(out, 0));
        assertEquals("", ErrorPayload.message(out, 0));
        for (final ErrorCode c : ErrorCode.values())
        {
            assertSame(c, ErrorCode.fromCode(c.code()));
        }
        assertNull(ErrorCode.fromCode(0));
    }

    @Test
    void hello() throws Exception
    {
        final byte[] fp = new byte[32];
        final byte[] nonce = new byte[16];
        final byte[] mac = new byte[32];
        for (int i = 0; i < 32; i++)
        {
            fp[i] = (byte)i;
            mac[i] = (byte)(255 - i);
        }
        nonce[15] = 7;
        final Hello sent = new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_STAGE, 1, 3, 5, 10, 4096, 512, 32000, 32,
            16, 1 << 20, HelloPayload.FLAG_AUTH, 500, fp, nonce, mac);
        final int len = FrameEncoder.encodeHello(out, 0, 0, sent);
        final FrameHeader h = decodeOne(len);
        assertEquals(56 + 4 * 34, len);
        assertEquals(MessageType.HELLO, h.messageType());
        assertEquals(34, h.dim(0));
        assertEquals(HelloPayload.PROTOCOL_VERSION, HelloPayload.protocolVersion(out, 0));
        assertEquals(HelloPayload.ROLE_STAGE, HelloPayload.role(out, 0));
        final Hello got = Hello.from(out, 0);
        assertEquals(sent, got);
        assertEquals(4096, got.hiddenDim());
        assertEquals(32000, got.vocabSize());
        assertEquals(500, got.heartbeatMillis());
        assertTrue(got.has(HelloPayload.FLAG_AUTH));
        org.junit.jupiter.api.Assertions.assertArrayEquals(fp, got.fingerprint());
        org.junit.jupiter.api.Assertions.assertArrayEquals(nonce, got.nonce());
        org.junit.jupiter.api.Assertions.assertArrayEquals(mac, got.mac());
    }

    @Test
    void authHeartbeatAndText() throws Exception
    {
        final byte[] mac = new byte[32];
        mac[0] = 1;
        mac[31] = 9;
        int len = FrameEncoder.encodeAuth(out, 0, mac);
        assertEquals(MessageType.AUTH, decodeOne(len).messageType());
        len = FrameEncoder.encodeHeartbeat(out, 0, 17, 250);
        assertEquals(MessageType.HEARTBEAT, decodeOne(len).messageType());
        assertEquals(17, out.getInt(56, java.nio.ByteOrder.LITTLE_ENDIAN));
        len = FrameEncoder.encodeText(out, 0, MessageType.ROUTE, "10.0.0.2:7001\n10.0.0.3:7001");
        assertEquals(MessageType.ROUTE, decodeOne(len).messageType());
    }

    @Test
    void endSequenceAndShutdown() throws Exception
    {
        int len = FrameEncoder.encodeEndSequence(out, 0, 3, 0, new int[] {4, 5, 6}, 0, 3);
        FrameHeader h = decodeOne(len);
        assertEquals(MessageType.END_SEQUENCE, h.messageType());
        assertArrayEquals(new int[] {4, 5, 6}, u32s(out, 0, 3));

        len = FrameEncoder.encodeShutdown(out, 0, 77, 0);
        h = decodeOne(len);
        assertEquals(56, len);
        assertEquals(MessageType.SHUTDOWN, h.messageType());
        assertEquals(0, h.rank());
        assertEquals(0, h.payloadLength());
        assertEquals(77, h.stepId());
    }

    @Test
    void helpersClearStaleTrailerBytes() throws Exception
    {
        out.setMemory(0, 1024, (byte)0xFF);
        final int len = FrameEncoder.encodeTokens(out, 0, 1, 0, new int[] {1}, 0, 1, 1, FLAG_TRACE);
        assertEquals(0, SequenceTable.entryFlags(out, 0, 0));
        assertEquals(0, FrameHeader.traceNanos(out, 0));
        FrameEncoder.putSequenceEntry(out, 0, 0, 1, 0, 1, 0);
        decodeOne(len);
    }

    @Test
    void pullModeIntoARingSlot() throws Exception
    {
        final byte[] stream = FrameStreams.example();
        final UnsafeBuffer slot = new UnsafeBuffer(new byte[4096]);
        final UnsafeBuffer wire = new UnsafeBuffer(stream);
        final List<String> pulled = new ArrayList<>();
        final FrameHeader header = new FrameHeader();
        long streamOffset = 0;
        long frameIndex = 0;
        while (streamOffset < stream.length)
        {
            slot.putBytes(0, wire, (int)streamOffset, FrameHeader.HEADER_LENGTH);          // "read 56 bytes"
            final int frameLength = FrameValidator.validateHeader(slot, 0, streamOffset, frameIndex, slot.capacity());
            slot.putBytes(56, wire, (int)streamOffset + 56, frameLength - 56);             // "read the rest"
            FrameValidator.validateTrailer(slot, 0, streamOffset, frameIndex);
            pulled.add(header.wrap(slot, 0).toString());
            streamOffset += frameLength;
            frameIndex++;
        }
        final List<String> pushed = new ArrayList<>();
        final FrameChannel channel = FrameChannel.reading(new TestStreams.Chunks(stream, 1), "the test stream",
            FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        final ByteBuffer bytes = ByteBuffer.allocate(4096).order(FrameHeader.ORDER);
        while (channel.read(bytes) != FrameChannel.END_OF_STREAM)
        {
            pushed.add(header.wrap(new UnsafeBuffer(bytes), 0).toString());
        }
        assertEquals(pushed, pulled);
        assertEquals(12, pulled.size());
    }

    private static int[] u32s(final DirectBuffer buf, final int frame, final int n)
    {
        final int[] v = new int[n];
        for (int i = 0; i < n; i++)
        {
            v[i] = FramePayload.u32(buf, frame, i);
        }
        return v;
    }
}
