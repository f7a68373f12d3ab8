package io.tnsr.engine.stage;

import com.lmax.disruptor.EventHandler;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHeader;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Writes what the compute handler queued for an event to the session's downstream link (the next stage, or, from
 * the last stage, the coordinator's return link), stamping the data frame's trace field with the send time just
 * before the write, and records the frame's residence in the stage (decoded to written).
 *
 * <p>The write blocks while the downstream's TCP window is full: that is how backpressure reaches this stage's
 * ring and, through it, the upstream. A failed write means the session's pipeline is broken.
 *
 * <p>Liveness: when the link has carried nothing for a heartbeat interval, the stage's liveness thread writes a
 * HEARTBEAT ({@link #heartbeatIfIdle}); a lock keeps its frames and the compute thread's whole. The compute
 * thread's lock is uncontended except at those moments, and nothing is allocated per frame.
 */
final class OutboundSender implements EventHandler<FrameSlot> {
    /** What the stage does when the downstream is gone or the pipeline is shut down. */
    interface Listener {
        /** A write to {@code link} failed: the downstream of the session it belongs to (maybe one that has ended). */
        void downstreamFailed(FrameChannel link, IOException e);

        void shutdownForwarded();
    }

    private final OutboundBuffer out;
    private final LatencyMetric residence;
    private final Listener listener;
    private final ReentrantLock writing = new ReentrantLock();
    private final ByteBuffer heartbeatBytes = ByteBuffer.allocateDirect(FrameHeader.HEADER_LENGTH + 64).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer heartbeat = new UnsafeBuffer(heartbeatBytes);
    private volatile FrameChannel downstream;
    private final AtomicLong lastWriteNanos = new AtomicLong(System.nanoTime());   // release writes: no fence per frame
    boolean shutdownQueued;    // set by the compute handler when the event is a SHUTDOWN frame

    OutboundSender(OutboundBuffer out, LatencyMetric residence, Listener listener) {
        this.out = out;
        this.residence = residence;
        this.listener = listener;
    }

    @Override
    public void onEvent(FrameSlot slot, long sequence, boolean endOfBatch) {
        if (slot.status == FrameSlot.Status.SESSION) {
            switchTo(slot.sessionDownstream);
            return;
        }
        FrameChannel d = downstream;
        if (out.isEmpty() || d == null) {
            return;
        }
        writing.lock();
        try {
            if (out.dataTraced) {
                FrameEncoder.stampTrace(out.data, 0, System.nanoTime());
            }
            d.write(out.gather, out.errorLength, out.dataLength);
            long now = System.nanoTime();
            lastWriteNanos.lazySet(now);
            residence.record(now - slot.receivedNanos);
        } catch (IOException e) {
            listener.downstreamFailed(d, e);
            return;
        } finally {
            writing.unlock();
        }
        if (shutdownQueued) {
            shutdownQueued = false;
            listener.shutdownForwarded();
        }
    }

    /**
     * Closes the current downstream link without waiting for a write in progress, which then fails: how a stopping
     * stage frees a handler stuck writing to a downstream that stopped reading ({@link #switchTo} would wait for it).
     */
    void abort() {
        FrameChannel d = downstream;
        if (d != null) {
            d.closeQuietly();
        }
    }

    /** Makes {@code next} the downstream link (null: none), closing the previous one. */
    void switchTo(FrameChannel next) {
        FrameChannel old;
        writing.lock();
        try {
            old = downstream;
            downstream = next;
            lastWriteNanos.set(System.nanoTime());
        } finally {
            writing.unlock();
        }
        if (old != null && old != next) {
            old.closeQuietly();
        }
    }

    /**
     * Writes a HEARTBEAT when the link has been idle for {@code intervalNanos} and the compute thread is not writing
     * (liveness thread). A failed write is left to the compute thread's next write to report.
     */
    void heartbeatIfIdle(long now, long intervalNanos, int framesDone, int busyMillis) {
        FrameChannel d = downstream;
        if (d == null || now - lastWriteNanos.get() < intervalNanos || !writing.tryLock()) {
            return;
        }
        try {
            if (downstream == d) {
                d.write(heartbeatBytes, FrameEncoder.encodeHeartbeat(heartbeat, 0, framesDone, busyMillis));
                lastWriteNanos.set(now);
            }
        } catch (IOException ignored) {
            // the compute thread's next write fails too and reports it
        } finally {
            writing.unlock();
        }
    }

    /** Sends an ERROR about the whole session downstream, waiting at most a second for the link (liveness thread). */
    void sendError(String message) {
        FrameChannel d = downstream;
        if (d == null) {
            return;
        }
        try {
            if (writing.tryLock(1, TimeUnit.SECONDS)) {
                try {
                    d.sendError(0, 0, ErrorCode.INTERNAL, ErrorCode.SEQ_ID_NONE, message);
                    lastWriteNanos.set(System.nanoTime());
                } finally {
                    writing.unlock();
                }
            }
        } catch (IOException ignored) {
            // the downstream is gone too; the message is in this stage's log
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
