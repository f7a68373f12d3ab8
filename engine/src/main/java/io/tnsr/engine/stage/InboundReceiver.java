package io.tnsr.engine.stage;

import com.lmax.disruptor.InsufficientCapacityException;
import com.lmax.disruptor.RingBuffer;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.net.FrameIo;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.HelloPayload;
import java.io.IOException;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.locks.LockSupport;

/**
 * The stage's inbound network thread: accepts the upstream connection, checks its HELLO, then for each frame
 * claims a ring slot, reads the frame from the socket straight into the slot's buffer ({@link FrameReader}:
 * header, validate, rest, validate), and publishes it. Nothing is copied or allocated per frame.
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
        String check(FrameIo.Hello hello);
    }

    private final ServerSocketChannel server;
    private final RingBuffer<FrameSlot> ring;
    private final int maxFrameBytes;
    private final FrameIo.Hello ownHello;
    private final HelloCheck helloCheck;
    private final FrameReader reader;
    private final String stageName;
    private volatile boolean running = true;
    private volatile SocketChannel current;

    InboundReceiver(ServerSocketChannel server, RingBuffer<FrameSlot> ring, int maxFrameBytes, FrameIo.Hello ownHello,
                    HelloCheck helloCheck, LatencyMetric hop, String stageName) {
        this.server = server;
        this.ring = ring;
        this.maxFrameBytes = maxFrameBytes;
        this.ownHello = ownHello;
        this.helloCheck = helloCheck;
        this.reader = new FrameReader(maxFrameBytes, hop);
        this.stageName = stageName;
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
                FrameIo.tune(ch);
                serve(ch);
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

    private void serve(SocketChannel ch) throws IOException {
        FrameIo.Hello hello;
        try {
            hello = FrameIo.readHello(ch, maxFrameBytes);
        } catch (IOException e) {
            FrameIo.sendError(ch, 0, 0, ErrorCode.MALFORMED_FRAME, ErrorCode.SEQ_ID_NONE,
                    stageName + ": a connection must start with HELLO: " + e.getMessage());
            throw e;
        }
        if (hello.protocolVersion() != HelloPayload.PROTOCOL_VERSION) {
            FrameIo.sendError(ch, 0, 0, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, ErrorCode.SEQ_ID_NONE, stageName
                    + " speaks protocol " + HelloPayload.PROTOCOL_VERSION + ", not " + hello.protocolVersion());
            throw new IOException("refused protocol version " + hello.protocolVersion());
        }
        String refusal = helloCheck.check(hello);
        if (refusal != null) {
            FrameIo.sendError(ch, 0, 0, ErrorCode.UNEXPECTED_MESSAGE, ErrorCode.SEQ_ID_NONE, stageName + ": " + refusal);
            throw new IOException("refused upstream: " + refusal);
        }
        FrameIo.sendHello(ch, ownHello);
        reader.reset();
        while (running) {
            long seq = claim();
            if (seq < 0) {
                return;
            }
            FrameSlot slot = ring.get(seq);
            slot.status = FrameSlot.Status.EMPTY;
            try {
                if (!reader.read(ch, slot)) {
                    return; // upstream closed between frames
                }
            } catch (FrameFormatException e) {
                FrameIo.sendError(ch, 0, 0, e.reason().errorCode(), ErrorCode.SEQ_ID_NONE, stageName + ": " + e.getMessage());
                throw new IOException("malformed frame from upstream: " + e.getMessage(), e);
            } finally {
                ring.publish(seq);
            }
        }
    }

    /** Claims the next slot, waiting (without allocating) while the ring is full; -1 when stopping. */
    private long claim() {
        while (true) {
            try {
                return ring.tryNext();
            } catch (InsufficientCapacityException full) {
                if (!running) {
                    return -1;
                }
                LockSupport.parkNanos(20_000);
            }
        }
    }
}
