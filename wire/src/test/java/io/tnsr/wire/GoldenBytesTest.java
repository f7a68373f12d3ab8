package io.tnsr.wire;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import static io.tnsr.wire.TestStreams.hex;
import static io.tnsr.wire.TestStreams.unhex;
import static org.junit.jupiter.api.Assertions.*;

/** The bytes of the C struct, written by hand, against the Java codec in both directions. */
class GoldenBytesTest
{
    /** TOKENS [2] = {10, 0x01020304}, one sequence entry, TRACE; built byte by byte from the C layout. */
    static final String TOKENS_FRAME =
        "54 4E 53 52" +               // @0  magic 'T','N','S','R'
        "01" +                        // @4  msg_type TOKENS
        "01" +                        // @5  shape_rank 1
        "01" +                        // @6  padding[0] = flags: TRACE
        "01" +                        // @7  padding[1] = sequence count 1
        "08 07 06 05 04 03 02 01" +   // @8  step_id 0x0102030405060708
        "03 00 00 00" +               // @16 micro_batch_id 3
        "08 00 00 00" +               // @20 payload_len 8
        "02 00 00 00 00 00 00 00" +   // @24 shape_dims[0] = 2
        "00 00 00 00 00 00 00 00" +   // @32 shape_dims[1]
        "00 00 00 00 00 00 00 00" +   // @40 shape_dims[2]
        "00 00 00 00 00 00 00 00" +   // @48 shape_dims[3]
        "0A 00 00 00" +               // @56 token 10
        "04 03 02 01" +               // @60 token 0x01020304
        "07 00 00 00" +               // @64 entry 0: seq_id 7
        "05 00 00 00" +               // @68          position 5
        "02 00 00 00" +               // @72          n_tokens 2
        "01 00 00 00" +               // @76          entry_flags WANT_LOGITS
        "88 77 66 55 44 33 22 11";    // @80 trace stamp 0x1122334455667788

    /** What a C peer with zeroed padding sends: ACTIVATIONS [1, 2] = {1.0f, -2.5f}, no trailer. */
    static final String C_PEER_ACTIVATIONS =
        "54 4E 53 52 02 02 00 00" +   // magic, ACTIVATIONS, rank 2, padding 0 0
        "FF FF FF FF FF FF FF FF" +   // step_id 2^64-1
        "00 00 00 00 08 00 00 00" +   // micro_batch_id 0, payload_len 8
        "01 00 00 00 00 00 00 00" +   // dims[0] 1
        "02 00 00 00 00 00 00 00" +   // dims[1] 2
        "00 00 00 00 00 00 00 00" +
        "00 00 00 00 00 00 00 00" +
        "00 00 80 3F 00 00 20 C0";    // 1.0f, -2.5f

    @Test
    void handBuiltBytesDecodeToTheRightFields() throws Exception
    {
        final byte[] bytes = unhex(TOKENS_FRAME);
        assertEquals(88, bytes.length);
        final UnsafeBuffer buf = new UnsafeBuffer(bytes);
        assertEquals(88, FrameValidator.validateHeader(buf, 0, 0, 0, FrameHeader.DEFAULT_MAX_FRAME_SIZE));
        FrameValidator.validateTrailer(buf, 0, 0, 0);

        final FrameHeader h = new FrameHeader().wrap(buf, 0);
        assertEquals(FrameHeader.MAGIC, h.magic());
        assertEquals(MessageType.TOKENS, h.messageType());
        assertEquals(1, h.rank());
        assertEquals(FrameHeader.FLAG_TRACE, h.flags());
        assertTrue(h.hasTrace());
        assertEquals(1, h.sequenceCount());
        assertEquals(0x0102030405060708L, h.stepId());
        assertEquals(3, h.microBatchId());
        assertEquals(8, h.payloadLength());
        assertEquals(2, h.dim(0));
        assertEquals(0, h.dim(1));
        assertEquals(88, h.frameLength());
        assertEquals(64, h.sequenceTableOffset());
        assertEquals(10, FramePayload.u32(buf, 0, 0));
        assertEquals(0x01020304, FramePayload.u32(buf, 0, 1));
        assertEquals(7, SequenceTable.seqId(buf, 0, 0));
        assertEquals(5, SequenceTable.position(buf, 0, 0));
        assertEquals(2, SequenceTable.nTokens(buf, 0, 0));
        assertTrue(SequenceTable.wantsLogits(buf, 0, 0));
        assertEquals(0x1122334455667788L, h.traceNanos());
    }

    @Test
    void encoderWritesExactlyTheHandBuiltBytes()
    {
        final UnsafeBuffer buf = new UnsafeBuffer(new byte[88]);
        buf.setMemory(0, 88, (byte)0x5A); // dirty buffer: the encoder must write every byte of the frame
        final int len = FrameEncoder.encodeTokens(buf, 0, 0x0102030405060708L, 3, new int[] {10, 0x01020304}, 0, 2, 1,
            FrameHeader.FLAG_TRACE);
        FrameEncoder.putSequenceEntry(buf, 0, 0, 7, 5, 2, SequenceTable.WANT_LOGITS);
        FrameEncoder.stampTrace(buf, 0, 0x1122334455667788L);
        assertEquals(88, len);
        assertEquals(hex(unhex(TOKENS_FRAME)), hex(buf.byteArray()));
    }

    @Test
    void cPeerWithZeroedPaddingInteroperates() throws Exception
    {
        final byte[] bytes = unhex(C_PEER_ACTIVATIONS);
        final UnsafeBuffer buf = new UnsafeBuffer(bytes);
        assertEquals(64, FrameValidator.validateHeader(buf, 0, 0, 0, FrameHeader.DEFAULT_MAX_FRAME_SIZE));
        final FrameHeader h = new FrameHeader().wrap(buf, 0);
        assertEquals(MessageType.ACTIVATIONS, h.messageType());
        assertFalse(h.hasTrace());
        assertEquals(0, h.sequenceCount());
        assertEquals(-1L, h.stepId());
        assertEquals(1.0f, FramePayload.f32(buf, 0, 0));
        assertEquals(-2.5f, FramePayload.f32(buf, 0, 1));

        final UnsafeBuffer out = new UnsafeBuffer(new byte[64]);
        final int len = FrameEncoder.encodeActivations(out, 0, -1L, 0, new UnsafeBuffer(bytes, 56, 8), 0, 1, 2, 0, 0);
        assertEquals(64, len);
        assertEquals(hex(bytes), hex(out.byteArray()));
    }

    @Test
    void headerConstantsMatchTheCLayout()
    {
        assertEquals(0, FrameHeader.MAGIC_OFFSET);
        assertEquals(4, FrameHeader.MSG_TYPE_OFFSET);
        assertEquals(5, FrameHeader.RANK_OFFSET);
        assertEquals(6, FrameHeader.FLAGS_OFFSET);
        assertEquals(7, FrameHeader.SEQUENCE_COUNT_OFFSET);
        assertEquals(8, FrameHeader.STEP_ID_OFFSET);
        assertEquals(16, FrameHeader.MICRO_BATCH_ID_OFFSET);
        assertEquals(20, FrameHeader.PAYLOAD_LENGTH_OFFSET);
        assertEquals(24, FrameHeader.DIMS_OFFSET);
        assertEquals(56, FrameHeader.HEADER_LENGTH);
        final UnsafeBuffer magic = new UnsafeBuffer(new byte[] {'T', 'N', 'S', 'R'});
        assertEquals(FrameHeader.MAGIC, magic.getInt(0, FrameHeader.ORDER));
        for (final MessageType t : MessageType.values())
        {
            assertSame(t, MessageType.fromCode(t.code()));
        }
        assertNull(MessageType.fromCode(0));
        assertNull(MessageType.fromCode(14));
        assertEquals(11, MessageType.READY.code());
        assertEquals(12, MessageType.SAMPLED.code());
        assertEquals(13, MessageType.SAMPLING.code());
        assertNull(MessageType.fromCode(-1));
        assertNull(MessageType.fromCode(256 + 1));
        assertEquals(1, MessageType.TOKENS.code());
        assertEquals(7, MessageType.SHUTDOWN.code());
    }
}
