package io.tnsr.engine.stage;

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
        TOO_LARGE
    }

    final ByteBuffer bytes;      // [capacity] direct, little-endian
    final UnsafeBuffer buffer;   // the same memory, for the codec
    final FloatBuffer floats;    // the same memory as floats (activation payloads start 4-byte aligned)
    final IntBuffer ints;        // the same memory as u32s (token payloads)
    Status status = Status.EMPTY;
    int length;                  // bytes of the frame
    long frameLength;            // declared length (differs from length only when TOO_LARGE)
    long receivedNanos;          // when the inbound thread finished decoding it
    long hopNanos;               // one-way hop latency measured on arrival, or -1 when the frame had no trace stamp

    public FrameSlot(int capacity) {
        bytes = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
        buffer = new UnsafeBuffer(bytes);
        floats = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        ints = bytes.duplicate().order(ByteOrder.LITTLE_ENDIAN).asIntBuffer();
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
