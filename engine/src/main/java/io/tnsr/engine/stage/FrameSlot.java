package io.tnsr.engine.stage;

import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * One slot of a stage's Disruptor ring: a preallocated off-heap buffer the inbound thread reads a whole frame
 * into, straight from the socket, plus what the stage notes about that frame. Allocated once per slot at
 * start-up; reused for every frame that passes through it.
 */
public final class FrameSlot {

    /** What the compute handler should do with the slot. */
    public enum Status {
        /** A complete, validated frame. */
        FRAME,
        /** Nothing: the connection ended while this slot was claimed. */
        EMPTY,
        /** A valid frame larger than the slot: only its header was kept; it fails its micro-batch. */
        TOO_LARGE,
        /**
         * Not a frame: a session begins ({@link #sessionDownstream} is its downstream link) or ends (null). The
         * compute thread drops every sequence's KV cache and the outbound handler switches links, in ring order.
         */
        SESSION
    }

    final ByteBuffer bytes;      // [capacity] direct, little-endian
    final UnsafeBuffer buffer;   // the same memory, for the codec
    final FloatBuffer floats;    // the same memory as floats (activation payloads start 4-byte aligned)
    final IntBuffer ints;        // the same memory as u32s (token payloads)
    Status status = Status.EMPTY;
    int length;                  // bytes of the frame
    long frameLength;            // declared length (differs from length only when TOO_LARGE)
    long receivedNanos;          // when the inbound thread finished decoding it
    FrameChannel sessionDownstream; // with SESSION: the new session's downstream link, or null when the session ended
    long hopNanos;               // one-way hop latency measured on arrival, or -1 when the frame had no trace stamp

    public FrameSlot(int capacity) {
        bytes = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
        buffer = new UnsafeBuffer(bytes);
        floats = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        ints = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
    }

    /**
     * Reads the connection's next frame into this slot, the way a stage's inbound thread does
     * ({@link FrameChannel#read}: header, validate, rest, validate; a valid frame larger than the slot is skipped and
     * marked {@link Status#TOO_LARGE}), stamps when it arrived, and records the one-way hop of a trace-stamped frame.
     * Nothing is copied or allocated.
     *
     * @return false at a clean end of the stream between frames (the slot is then {@link Status#EMPTY})
     * @throws FrameFormatException a malformed frame, or the stream ended inside one: nothing is in the slot
     */
    public boolean receive(FrameChannel channel, LatencyMetric hop) throws IOException, FrameFormatException {
        status = Status.EMPTY;
        int frame = channel.read(bytes);
        if (frame == FrameChannel.END_OF_STREAM) {
            return false;
        }
        frameLength = frame;
        if (frame > bytes.capacity()) {
            status = Status.TOO_LARGE;
            length = FrameHeader.HEADER_LENGTH;
        } else {
            status = Status.FRAME;
            length = frame;
        }
        long now = System.nanoTime();
        receivedNanos = now;
        if (status == Status.FRAME && (FrameHeader.flags(buffer, 0) & FrameHeader.FLAG_TRACE) != 0) {
            hopNanos = now - FrameHeader.traceNanos(buffer, 0);
            hop.record(hopNanos);
        } else {
            hopNanos = -1;
        }
        return true;
    }

    /** The slot's memory as a little-endian direct buffer (the same bytes as {@link #buffer()}). */
    public ByteBuffer bytes() {
        return bytes;
    }

    public UnsafeBuffer buffer() {
        return buffer;
    }

    public Status status() {
        return status;
    }

    public int length() {
        return length;
    }

    public int capacity() {
        return bytes.capacity();
    }
}
