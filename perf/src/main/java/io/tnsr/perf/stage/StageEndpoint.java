package io.tnsr.perf.stage;

import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.stage.FrameSlot;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.SequenceTable;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * One side of a hop moving frames the way a stage does, with the stage's own code: receiving as the inbound
 * thread does ({@link FrameSlot#receive} through a {@link FrameChannel}: header, validation, rest, trailer, one-way
 * latency from the trace stamp into a {@link LatencyMetric}) into a ring slot; sending as {@code OutboundSender}
 * does (stamp the trace field, one gathering {@link FrameChannel#write} of the empty error region and the frame),
 * from the same slot.
 * The frame is an ACTIVATIONS [rows, width] frame with a one-entry sequence table and a trace stamp, as stages
 * send (16 KiB of payload for [4, 1024]).
 */
public class StageEndpoint implements Hop.Endpoint {
    private final FrameSlot frame;
    private final LatencyMetric hop = new LatencyMetric("hop", "one-way hop");
    private SocketChannel socket;
    private FrameChannel channel;
    protected final ByteBuffer slotBytes;
    protected final UnsafeBuffer slot;
    private final ByteBuffer errorBytes = ByteBuffer.allocateDirect(4096).order(ByteOrder.LITTLE_ENDIAN);
    private final ByteBuffer[] gather;
    protected int length;

    public StageEndpoint(int rows, int width) {
        int payload = rows * width * Float.BYTES;
        int capacity = FrameHeader.HEADER_LENGTH + payload + FrameHeader.MAX_SEQUENCE_COUNT * FrameHeader.SEQUENCE_ENTRY_LENGTH
                + FrameHeader.TRACE_LENGTH;
        frame = new FrameSlot(capacity);
        slotBytes = frame.bytes();
        slot = frame.buffer();
        FrameEncoder.encodeHeader(slot, 0, io.tnsr.wire.MessageType.ACTIVATIONS, 1, 0, FrameHeader.FLAG_TRACE, 1, 2,
                rows, width, 0, 0, payload);
        for (int i = 0; i < rows * width; i++) {
            slot.putFloat(FrameHeader.HEADER_LENGTH + 4 * i, i * 1e-3f, FrameHeader.ORDER);
        }
        FrameEncoder.putSequenceEntry(slot, 0, 0, 7, 100, rows, SequenceTable.WANT_LOGITS);
        length = (int) FrameHeader.frameLength(payload, 1, FrameHeader.FLAG_TRACE);
        gather = new ByteBuffer[] {errorBytes, slotBytes};
    }

    /** Bytes of the frame on the wire (the raw endpoint sends as many). */
    public int frameLength() {
        return length;
    }

    @Override
    public void send(SocketChannel ch) throws IOException {
        FrameEncoder.stampTrace(slot, 0, System.nanoTime());
        channel(ch).write(gather, 0, length);
    }

    /** The frame channel over {@code ch}, made once per connection. */
    protected FrameChannel channel(SocketChannel ch) {
        if (ch != socket) {
            socket = ch;
            channel = new FrameChannel(ch, "the other end of the hop", FrameHeader.DEFAULT_MAX_FRAME_SIZE);
        }
        return channel;
    }

    @Override
    public boolean receive(SocketChannel ch) throws IOException {
        try {
            if (!frame.receive(channel(ch), hop)) {
                return false;
            }
        } catch (FrameFormatException e) {
            throw new IOException(e);
        }
        length = frame.length();
        return true;
    }
}
