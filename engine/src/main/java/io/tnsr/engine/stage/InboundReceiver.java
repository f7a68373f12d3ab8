package io.tnsr.engine.stage;

import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import java.io.IOException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingIdleStrategy;

/**
 * The stage's inbound side, run by its session thread: for each frame of the session's upstream link, claims a
 * ring slot, reads the frame from the socket straight into the slot's buffer ({@link FrameSlot#receive}: header,
 * validate, rest, validate), and publishes it. Nothing is copied or allocated per frame.
 *
 * <pre>
 * session: publish SESSION(downstream) -> { claim slot -> read 56 B -> validateHeader -> read rest -> validateTrailer
 *          -> HEARTBEAT? read again into the same slot : publish }* -> publish SESSION(null)
 * </pre>
 * Backpressure: when the ring is full no slot can be claimed, so the thread stops reading; the socket's
 * buffers fill and TCP flow control stops the upstream. Nothing is dropped.
 *
 * <p>HEARTBEAT frames only prove the upstream alive ({@link #lastHeardNanos}); they never reach the ring. A
 * malformed frame gets an ERROR frame back on the same connection, which is then closed, ending the session.
 */
final class InboundReceiver {
    private final RingBuffer<FrameSlot> ring;
    private final LatencyMetric hop;
    private final String stageName;
    private final IdleStrategy fullRing = new SleepingIdleStrategy(TimeUnit.MICROSECONDS.toNanos(20));
    private volatile boolean running = true;
    private final AtomicLong lastHeardNanos = new AtomicLong(System.nanoTime());   // written with release only: no fence per frame
    private volatile boolean serving;
    private volatile int upstreamFrames;      // frames_done of the upstream's last heartbeat
    private volatile int upstreamBusyMillis;  // busy_ms of the upstream's last heartbeat
    private volatile long shutdownSequence = -1; // ring sequence of the SHUTDOWN read from the current upstream, or -1

    InboundReceiver(RingBuffer<FrameSlot> ring, LatencyMetric hop, String stageName) {
        this.ring = ring;
        this.hop = hop;
        this.stageName = stageName;
    }

    void stop() {
        running = false;
    }

    /** When the last frame or heartbeat arrived from the upstream. */
    long lastHeardNanos() {
        return lastHeardNanos.get();
    }

    /**
     * How long the upstream said it has been working on one frame, in its last heartbeat (0: idle, or a frame has come
     * from it since: a busy link carries no heartbeats, so that figure would otherwise go stale).
     */
    int upstreamBusyMillis() {
        return upstreamBusyMillis;
    }

    /** Frames the upstream said it had processed, in its last heartbeat. */
    int upstreamFrames() {
        return upstreamFrames;
    }

    /** Publishes a session boundary: from here on frames go to {@code downstream} (null: the session ended). */
    void publishSession(FrameChannel downstream) {
        long seq = claim();
        if (seq < 0) {
            return;
        }
        FrameSlot slot = ring.get(seq);
        slot.status = FrameSlot.Status.SESSION;
        slot.sessionDownstream = downstream;
        ring.publish(seq);
    }

    /** Whether frames of a session are being read now (the liveness check applies only then, not during set-up). */
    boolean serving() {
        return serving;
    }

    /**
     * The ring sequence of the SHUTDOWN frame the session read, or -1 if none: a session whose upstream closes right
     * after SHUTDOWN ended normally once the compute thread has passed that slot, which may be after the end of the
     * stream was seen here.
     */
    long shutdownSequence() {
        return shutdownSequence;
    }

    /** Reads the upstream's frames into the ring until it ends (normally: returns; malformed: throws). */
    void serve(FrameChannel ch) throws IOException {
        shutdownSequence = -1;
        lastHeardNanos.set(System.nanoTime());
        serving = true;
        try {
            serveFrames(ch);
        } finally {
            serving = false;
        }
    }

    private void serveFrames(FrameChannel ch) throws IOException {
        while (running) {
            long seq = claim();
            if (seq < 0) {
                return;
            }
            FrameSlot slot = ring.get(seq);
            slot.sessionDownstream = null;
            try {
                while (true) {
                    if (!slot.receive(ch, hop)) {
                        return; // upstream closed between frames
                    }
                    lastHeardNanos.lazySet(slot.receivedNanos);
                    int type = slot.status == FrameSlot.Status.FRAME ? FrameHeader.messageTypeCode(slot.buffer, 0) : -1;
                    if (type != MessageType.HEARTBEAT.code()) {
                        if (type == MessageType.SHUTDOWN.code()) {
                            shutdownSequence = seq;
                        }
                        if (upstreamBusyMillis != 0) {
                            upstreamBusyMillis = 0;   // a frame came out: the long one is done, so its busy time no longer holds
                        }
                        break;
                    }
                    upstreamFrames = slot.buffer.getInt(FrameHeader.HEADER_LENGTH, FrameHeader.ORDER);
                    upstreamBusyMillis = slot.buffer.getInt(FrameHeader.HEADER_LENGTH + 4, FrameHeader.ORDER);
                }
            } catch (FrameFormatException e) {
                refuse(ch, e.reason().errorCode(), e.getMessage());
                throw new IOException("malformed frame from " + ch.peer() + ": " + e.getMessage(), e);
            } finally {
                if (slot.status == FrameSlot.Status.SESSION) {
                    slot.status = FrameSlot.Status.EMPTY;
                }
                ring.publish(seq);
            }
        }
    }

    /** Tells the upstream why it is dropped, if it still listens (the connection is closed right after). */
    private void refuse(FrameChannel ch, ErrorCode code, String why) {
        if (!ch.isOpen()) {
            return;
        }
        try {
            ch.sendError(0, 0, code, ErrorCode.SEQ_ID_NONE, stageName + ": " + why);
        } catch (IOException ignored) {
            // the peer is gone already; the connection is dropped either way
        }
    }

    /** Claims the next slot, waiting (without allocating) while the ring is full; -1 when stopping. */
    private long claim() {
        fullRing.reset();
        while (true) {
            try {
                return ring.tryNext();
            } catch (InsufficientCapacityException full) {
                if (!running) {
                    return -1;
                }
                lastHeardNanos.lazySet(System.nanoTime());   // holding the upstream back is not the upstream falling silent
                fullRing.idle();
            }
        }
    }
}
