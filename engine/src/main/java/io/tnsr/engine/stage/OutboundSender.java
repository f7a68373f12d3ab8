package io.tnsr.engine.stage;

import com.lmax.disruptor.EventHandler;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import java.io.IOException;

/**
 * Writes what the compute handler queued for an event to the next stage (or, from the last stage, to the
 * coordinator), stamping the data frame's trace field with the send time just before the write, and records
 * the frame's residence in the stage (decoded to written).
 *
 * <p>The write blocks while the downstream's TCP window is full: that is how backpressure reaches this
 * stage's ring and, through it, the upstream. A failed write means the pipeline is broken; the stage stops.
 */
final class OutboundSender implements EventHandler<FrameSlot> {
    /** What the stage does when the downstream is gone or the pipeline is shut down. */
    interface Listener {
        void downstreamFailed(IOException e);

        void shutdownForwarded();
    }

    private final OutboundBuffer out;
    private final FrameChannel downstream;
    private final LatencyMetric residence;
    private final Listener listener;
    boolean shutdownQueued;    // set by the compute handler when the event is a SHUTDOWN frame

    OutboundSender(OutboundBuffer out, FrameChannel downstream, LatencyMetric residence, Listener listener) {
        this.out = out;
        this.downstream = downstream;
        this.residence = residence;
        this.listener = listener;
    }

    @Override
    public void onEvent(FrameSlot slot, long sequence, boolean endOfBatch) {
        if (out.isEmpty()) {
            return;
        }
        try {
            if (out.dataTraced) {
                FrameEncoder.stampTrace(out.data, 0, System.nanoTime());
            }
            downstream.write(out.gather, out.errorLength, out.dataLength);
            residence.record(System.nanoTime() - slot.receivedNanos);
        } catch (IOException e) {
            listener.downstreamFailed(e);
            return;
        }
        if (shutdownQueued) {
            shutdownQueued = false;
            listener.shutdownForwarded();
        }
    }
}
