package io.tnsr.engine.stage;

import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.net.FrameIo;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FrameValidator;
import java.io.IOException;
import java.nio.channels.SocketChannel;

/**
 * Reads one connection's frames into {@link FrameSlot}s, the way a stage's inbound thread does:
 * <pre>
 *   read 56 B into the slot -> validateHeader -> read the rest into the slot -> validateTrailer
 *   -> stamp receivedNanos, record the one-way hop from the trace stamp
 * </pre>
 * A valid frame larger than the slot is drained through it and marked {@link FrameSlot.Status#TOO_LARGE}.
 * Nothing is copied or allocated per frame. Single-threaded; {@link #reset()} at each new connection, since error
 * offsets count from the start of the connection's stream.
 */
public final class FrameReader {
    private final int maxFrameBytes;
    private final LatencyMetric hop;
    private long streamOffset;
    private long frameIndex;

    /**
     * @param maxFrameBytes the largest frame accepted ({@link FrameValidator#validateHeader})
     * @param hop           where the one-way hop of each trace-stamped frame is recorded
     */
    public FrameReader(int maxFrameBytes, LatencyMetric hop) {
        this.maxFrameBytes = maxFrameBytes;
        this.hop = hop;
    }

    /** A new connection: its stream starts at offset 0, frame 0. */
    public void reset() {
        streamOffset = 0;
        frameIndex = 0;
    }

    /** Reads one frame into the slot; false on a clean end of stream before it. */
    public boolean read(SocketChannel ch, FrameSlot slot) throws IOException, FrameFormatException {
        if (!FrameIo.readFully(ch, slot.bytes, 0, FrameHeader.HEADER_LENGTH)) {
            return false;
        }
        int length = FrameValidator.validateHeader(slot.buffer, 0, streamOffset, frameIndex, maxFrameBytes);
        slot.frameLength = length;
        if (length > slot.capacity()) {
            drain(ch, slot, length - FrameHeader.HEADER_LENGTH);
            slot.status = FrameSlot.Status.TOO_LARGE;
            slot.length = FrameHeader.HEADER_LENGTH;
        } else {
            FrameIo.readFully(ch, slot.bytes, FrameHeader.HEADER_LENGTH, length - FrameHeader.HEADER_LENGTH);
            FrameValidator.validateTrailer(slot.buffer, 0, streamOffset, frameIndex);
            slot.status = FrameSlot.Status.FRAME;
            slot.length = length;
        }
        long now = System.nanoTime();
        slot.receivedNanos = now;
        if (slot.status == FrameSlot.Status.FRAME && (FrameHeader.flags(slot.buffer, 0) & FrameHeader.FLAG_TRACE) != 0) {
            slot.hopNanos = now - FrameHeader.traceNanos(slot.buffer, 0);
            hop.record(slot.hopNanos);
        } else {
            slot.hopNanos = -1;
        }
        streamOffset += length;
        frameIndex++;
        return true;
    }

    /** Reads and discards n bytes through the slot's buffer after its header (frame too large for the slot). */
    private static void drain(SocketChannel ch, FrameSlot slot, long n) throws IOException {
        int chunk = slot.capacity() - FrameHeader.HEADER_LENGTH;
        while (n > 0) {
            int len = (int) Math.min(chunk, n);
            FrameIo.readFully(ch, slot.bytes, FrameHeader.HEADER_LENGTH, len);
            n -= len;
        }
    }
}
