package io.tnsr.engine.net;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.ErrorPayload;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FrameValidator;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import java.io.EOFException;
import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Blocking frame I/O on socket channels, shared by stages and the coordinator: read exactly n bytes, write a
 * whole buffer, connect with retries until a deadline, and the HELLO handshake every connection starts with.
 *
 * <p>Reads here block without a timeout; callers that must not wait forever close the channel from another
 * thread (a watchdog), which makes the read throw.
 */
public final class FrameIo {
    private FrameIo() {
    }

    /**
     * Reads exactly {@code len} bytes into {@code dst} at {@code off}.
     *
     * @return false when the stream ended cleanly before the first byte; throws {@link EOFException} when it
     *         ended part-way
     */
    public static boolean readFully(SocketChannel ch, ByteBuffer dst, int off, int len) throws IOException {
        dst.limit(off + len).position(off);
        while (dst.hasRemaining()) {
            int n = ch.read(dst);
            if (n < 0) {
                if (dst.position() == off) {
                    return false;
                }
                throw new EOFException("connection closed after " + (dst.position() - off) + " of " + len + " bytes");
            }
        }
        return true;
    }

    /**
     * Writes, with one gathering write where the kernel takes it all, the first {@code len0} bytes of
     * {@code bufs[0]} then the first {@code len1} bytes of {@code bufs[1]}.
     */
    public static void writeFully(SocketChannel ch, ByteBuffer[] bufs, int len0, int len1) throws IOException {
        bufs[0].limit(len0).position(0);
        bufs[1].limit(len1).position(0);
        while (bufs[0].hasRemaining() || bufs[1].hasRemaining()) {
            ch.write(bufs);
        }
    }

    /** Writes dst[off, off+len) completely. */
    public static void writeFully(SocketChannel ch, ByteBuffer src, int off, int len) throws IOException {
        src.limit(off + len).position(off);
        while (src.hasRemaining()) {
            ch.write(src);
        }
    }

    /** A socket tuned for small, latency-sensitive frames. */
    public static void tune(SocketChannel ch) throws IOException {
        ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
        ch.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
    }

    /** Connects to host:port, retrying refused connections (the peer may still be starting) until the deadline. */
    public static SocketChannel connect(String host, int port, long timeoutMillis) throws IOException {
        return connect(host, port, timeoutMillis, 0);
    }

    /** {@link #connect(String, int, long)} with SO_SNDBUF set first when {@code sendBufferBytes} > 0. */
    public static SocketChannel connect(String host, int port, long timeoutMillis, int sendBufferBytes) throws IOException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        IOException last;
        do {
            try {
                SocketChannel ch = SocketChannel.open();
                try {
                    if (sendBufferBytes > 0) {
                        ch.setOption(StandardSocketOptions.SO_SNDBUF, sendBufferBytes);
                    }
                    ch.socket().connect(new InetSocketAddress(host, port), (int) Math.max(1, timeoutMillis));
                    tune(ch);
                    return ch;
                } catch (IOException e) {
                    ch.close();
                    throw e;
                }
            } catch (ConnectException e) {
                last = e;
                try {
                    Thread.sleep(50);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to " + host + ":" + port, ie);
                }
            }
        } while (System.nanoTime() < deadline);
        throw new IOException("cannot connect to " + host + ":" + port + " within " + timeoutMillis + " ms: "
                + last.getMessage(), last);
    }

    /**
     * Bounds a blocking read or write on {@code ch}: a daemon thread closes the channel unless interrupted
     * within the timeout, which makes the blocked call throw. Interrupt the returned thread when done in time.
     */
    public static Thread closeAfter(SocketChannel ch, long timeoutMillis, String what) {
        Thread t = new Thread(() -> {
            try {
                Thread.sleep(timeoutMillis);
                ch.close();
            } catch (InterruptedException | IOException ignored) {
                // done in time, or already closed
            }
        }, "timeout:" + what);
        t.setDaemon(true);
        t.start();
        return t;
    }

    /** The fields of a HELLO. */
    public record Hello(int protocolVersion, int role, int stageIndex, int stageCount, int layerFrom, int layerTo,
                        int hiddenDim, int maxTokensPerFrame) {
    }

    /** Sends a HELLO. Layer ranges are [layerFrom, layerTo), layerTo exclusive. */
    public static void sendHello(SocketChannel ch, Hello h) throws IOException {
        ByteBuffer bb = ByteBuffer.allocateDirect(FrameHeader.HEADER_LENGTH + 4 * HelloPayload.FIELD_COUNT).order(ByteOrder.LITTLE_ENDIAN);
        UnsafeBuffer b = new UnsafeBuffer(bb);
        int len = FrameEncoder.encodeHello(b, 0, 0, h.role(), h.stageIndex(), h.stageCount(), h.layerFrom(), h.layerTo(),
                h.hiddenDim(), h.maxTokensPerFrame());
        writeFully(ch, bb, 0, len);
    }

    /**
     * Reads the HELLO a connection must start with. An ERROR frame instead (the peer refused us) becomes an
     * {@link IOException} with the peer's message.
     */
    public static Hello readHello(SocketChannel ch, int maxFrameBytes) throws IOException {
        ByteBuffer bb = ByteBuffer.allocateDirect(64 * 1024).order(ByteOrder.LITTLE_ENDIAN);
        UnsafeBuffer b = new UnsafeBuffer(bb);
        if (!readFully(ch, bb, 0, FrameHeader.HEADER_LENGTH)) {
            throw new EOFException("connection closed before HELLO");
        }
        int len;
        try {
            len = FrameValidator.validateHeader(b, 0, 0, 0, Math.min(maxFrameBytes, bb.capacity()));
            readFully(ch, bb, FrameHeader.HEADER_LENGTH, len - FrameHeader.HEADER_LENGTH);
            FrameValidator.validateTrailer(b, 0, 0, 0);
        } catch (FrameFormatException e) {
            throw new IOException("malformed handshake: " + e.getMessage(), e);
        }
        MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(b, 0));
        if (type == MessageType.ERROR) {
            throw new IOException("peer refused the connection: " + ErrorCode.fromCode(ErrorPayload.errorCodeValue(b, 0))
                    + ": " + ErrorPayload.message(b, 0));
        }
        if (type != MessageType.HELLO) {
            throw new IOException("expected HELLO, got " + type);
        }
        return new Hello(HelloPayload.protocolVersion(b, 0), HelloPayload.role(b, 0), HelloPayload.stageIndex(b, 0),
                HelloPayload.stageCount(b, 0), HelloPayload.layerFrom(b, 0), HelloPayload.layerTo(b, 0),
                HelloPayload.hiddenDim(b, 0), HelloPayload.maxTokensPerFrame(b, 0));
    }

    /** Sends one ERROR frame (error path: allocates). */
    public static void sendError(SocketChannel ch, long stepId, int microBatchId, ErrorCode code, int seqId, String message)
            throws IOException {
        byte[] m = message.getBytes(java.nio.charset.StandardCharsets.UTF_8);
        ByteBuffer bb = ByteBuffer.allocateDirect(FrameHeader.HEADER_LENGTH + 8 + m.length + 16).order(ByteOrder.LITTLE_ENDIAN);
        int len = FrameEncoder.encodeError(new UnsafeBuffer(bb), 0, stepId, microBatchId, code, seqId, message);
        writeFully(ch, bb, 0, len);
    }
}
