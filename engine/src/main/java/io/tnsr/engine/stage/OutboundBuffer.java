package io.tnsr.engine.stage;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHeader;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The frames a stage will write downstream for the event being handled, in two regions written in this
 * order: ERROR frames (sequences that failed here; the coordinator must see them before the data frame that
 * no longer carries those sequences), then at most one data frame (activations or logits) or one forwarded
 * control frame. The data frame starts at offset 0 of its own buffer so its float payload is aligned for
 * bulk copies.
 *
 * <p>Hazard: one instance per stage, written by {@link ComputeHandler} and read by {@link OutboundSender}.
 * That is safe because both run, one after the other, on the same consumer thread for each event
 * (Disruptor's {@code AggregateEventHandler}); handlers on separate threads would need one per slot.
 */
final class OutboundBuffer {
    final ByteBuffer errorBytes;  // [errorCapacity] ERROR frames back to back
    final UnsafeBuffer errors;
    int errorLength;
    final ByteBuffer dataBytes;   // [dataCapacity] one data or control frame at offset 0
    final UnsafeBuffer data;
    final FloatBuffer dataFloats; // dataBytes as floats
    int dataLength;
    boolean dataTraced;           // the data frame carries a trace stamp to fill at send time
    final ByteBuffer[] gather;    // {errorBytes, dataBytes} for one gathering write

    OutboundBuffer(int dataCapacity, int errorCapacity) {
        errorBytes = ByteBuffer.allocateDirect(errorCapacity).order(ByteOrder.LITTLE_ENDIAN);
        errors = new UnsafeBuffer(errorBytes);
        dataBytes = ByteBuffer.allocateDirect(dataCapacity).order(ByteOrder.LITTLE_ENDIAN);
        data = new UnsafeBuffer(dataBytes);
        dataFloats = dataBytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        gather = new ByteBuffer[] {errorBytes, dataBytes};
    }

    void reset() {
        errorLength = 0;
        dataLength = 0;
        dataTraced = false;
    }

    boolean isEmpty() {
        return errorLength == 0 && dataLength == 0;
    }

    /** Queues an ERROR frame (error path: the message is encoded from a String; cut to fit if need be). */
    void error(long stepId, int microBatchId, ErrorCode code, int seqId, String message) {
        int room = errorBytes.capacity() - errorLength - FrameHeader.HEADER_LENGTH - 8;
        if (room < 16) {
            return; // more failures in one frame than the region holds: the first ones are reported
        }
        String m = message.length() * 3 > room ? message.substring(0, room / 3) : message;
        errorLength += FrameEncoder.encodeError(errors, errorLength, stepId, microBatchId, code, seqId, m);
    }

    /** Queues a copy of a frame received (a control frame passed on down the pipeline). */
    void forward(UnsafeBuffer src, int offset, int frameLength) {
        data.putBytes(0, src, offset, frameLength);
        dataLength = frameLength;
    }
}
