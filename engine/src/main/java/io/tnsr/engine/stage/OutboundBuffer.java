package io.tnsr.engine.stage;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHeader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The frames a stage will write downstream for the event being handled: zero or more ERROR frames (sequences
 * that failed here), then at most one data frame (activations or logits) or one forwarded control frame.
 *
 * <p>Hazard: one buffer per stage, written by {@link ComputeHandler} and read by {@link OutboundSender}.
 * That is safe because both run, one after the other, on the same consumer thread for each event
 * (Disruptor's {@code AggregateEventHandler}); handlers on separate threads would need one per slot.
 */
final class OutboundBuffer {
    final ByteBuffer bytes;       // [capacity] direct, little-endian
    final UnsafeBuffer buffer;
    final FloatBuffer floats;
    int length;                   // bytes queued
    int dataFrameOffset = -1;     // offset of the frame carrying a trace stamp, or -1

    OutboundBuffer(int capacity) {
        bytes = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
        buffer = new UnsafeBuffer(bytes);
        floats = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
    }

    void reset() {
        length = 0;
        dataFrameOffset = -1;
    }

    int capacity() {
        return bytes.capacity();
    }

    /** Queues an ERROR frame (error path: the message is encoded from a String). */
    void error(long stepId, int microBatchId, ErrorCode code, int seqId, String message) {
        int room = capacity() - length - FrameHeader.HEADER_LENGTH - 8;
        String m = message.length() > room / 4 ? message.substring(0, Math.max(0, room / 4)) : message;
        length += FrameEncoder.encodeError(buffer, length, stepId, microBatchId, code, seqId, m);
    }

    /** Queues a copy of a frame received (a control frame passed on down the pipeline). */
    void forward(UnsafeBuffer src, int offset, int frameLength) {
        buffer.putBytes(length, src, offset, frameLength);
        length += frameLength;
    }
}
