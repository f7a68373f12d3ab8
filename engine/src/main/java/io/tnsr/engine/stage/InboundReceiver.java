package io.tnsr.engine.stage;

import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.SleepingIdleStrategy;

/**
 * The stage's inbound network thread: accepts the upstream connection, checks its HELLO, then for each frame
 * claims a ring slot, reads the frame from the socket straight into the slot's buffer
 * ({@link FrameSlot#receive}: header, validate, rest, validate), and publishes it. Nothing is copied or allocated
 * per frame.
 *
 * <pre>
 * loop: accept -> HELLO -> { claim slot -> read 56 B -> validateHeader -> read rest -> validateTrailer -> publish }*
 * </pre>
 * Backpressure: when the ring is full no slot can be claimed, so the thread stops reading; the socket's
 * buffers fill and TCP flow control stops the upstream. Nothing is dropped.
 *
 * <p>A malformed frame gets an ERROR frame back on the same connection, which is then closed; the thread
 * goes back to accepting, so the stage keeps serving. One upstream connection is served at a time.
 */
final class InboundReceiver implements Runnable {
    /** Decides whether a HELLO may connect; returns null to accept, or the reason to refuse. */
    interface HelloCheck {
        String check(Hello hello);
    }

    private final ServerSocketChannel server;
    private final RingBuffer<FrameSlot> ring;
    private final int maxFrameBytes;
    private final Hello ownHello;
    private final HelloCheck helloCheck;
    private final LatencyMetric hop;
    private final String stageName;
    private final long helloTimeoutMillis;
    private final IdleStrategy fullRing = new SleepingIdleStrategy(TimeUnit.MICROSECONDS.toNanos(20));
    private volatile boolean running = true;
    private volatile SocketChannel current;

    /**
     * @param helloTimeoutMillis how long a new connection may take to send its HELLO before it is closed
     */
    InboundReceiver(ServerSocketChannel server, RingBuffer<FrameSlot> ring, int maxFrameBytes, Hello ownHello,
                    HelloCheck helloCheck, LatencyMetric hop, String stageName, long helloTimeoutMillis) {
        this.server = server;
        this.ring = ring;
        this.maxFrameBytes = maxFrameBytes;
        this.ownHello = ownHello;
        this.helloCheck = helloCheck;
        this.hop = hop;
        this.stageName = stageName;
        this.helloTimeoutMillis = helloTimeoutMillis;
    }

    void stop() {
        running = false;
        try {
            server.close();
            SocketChannel c = current;
            if (c != null) {
                c.close();
            }
        } catch (IOException ignored) {
            // closing to unblock the thread; nothing to recover
        }
    }

    @Override
    public void run() {
        while (running) {
            SocketChannel ch;
            try {
                ch = server.accept();
            } catch (ClosedChannelException e) {
                return;
            } catch (IOException e) {
                if (running) {
                    System.err.println("[" + stageName + "] accept failed: " + e.getMessage());
                }
                return;
            }
            current = ch;
            try {
                FrameChannel.tune(ch);
                serve(new FrameChannel(ch, "upstream " + ch.getRemoteAddress(), maxFrameBytes));
            } catch (IOException e) {
                if (running) {
                    System.err.println("[" + stageName + "] upstream connection ended: " + e.getMessage());
                }
            } finally {
                current = null;
                try {
                    ch.close();
                } catch (IOException ignored) {
                    // already broken
                }
            }
        }
    }

    private void serve(FrameChannel ch) throws IOException {
        Hello hello;
        try {
            hello = ch.readHello(helloTimeoutMillis);
        } catch (HandshakeException e) {
            refuse(ch, ErrorCode.MALFORMED_FRAME, "a connection must start with HELLO: " + e.getMessage());
            throw e;
        }
        if (hello.protocolVersion() != HelloPayload.PROTOCOL_VERSION) {
            refuse(ch, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "this stage speaks protocol " + HelloPayload.PROTOCOL_VERSION
                    + ", not " + hello.protocolVersion());
            throw new IOException("refused protocol version " + hello.protocolVersion());
        }
        String refusal = helloCheck.check(hello);
        if (refusal != null) {
            refuse(ch, ErrorCode.UNEXPECTED_MESSAGE, refusal);
            throw new IOException("refused upstream: " + refusal);
        }
        ch.sendHello(ownHello);
        while (running) {
            long seq = claim();
            if (seq < 0) {
                return;
            }
            FrameSlot slot = ring.get(seq);
            try {
                if (!slot.receive(ch, hop)) {
                    return; // upstream closed between frames
                }
            } catch (FrameFormatException e) {
                refuse(ch, e.reason().errorCode(), e.getMessage());
                throw new IOException("malformed frame from " + ch.peer() + ": " + e.getMessage(), e);
            } finally {
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
                fullRing.idle();
            }
        }
    }
}
