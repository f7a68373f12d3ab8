package io.tnsr.wire;

import io.tnsr.wire.FrameFormatException.Reason;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.net.ConnectException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.AsynchronousCloseException;
import java.nio.channels.GatheringByteChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.tnsr.wire.FrameHeader.HEADER_LENGTH;

/**
 * Whole TNSR frames over one byte stream: a socket between two stages or between the coordinator and a stage, or
 * a file or stdin that {@code tnsr-dump} reads. Every frame read goes through here:
 * <pre>
 *   read 56 B -> validateHeader -> read the rest -> validateTrailer
 * </pre>
 * straight into the caller's buffer (a ring slot, a receive buffer), with nothing copied or allocated per frame.
 * A stream that ends between frames is a clean end ({@link #END_OF_STREAM}); one that ends inside a header or a
 * payload is a {@link FrameFormatException} ({@link Reason#TRUNCATED_HEADER}, {@link Reason#TRUNCATED_PAYLOAD}),
 * so no caller ever sees the rest of a previous frame as this one's payload. After any {@code FrameFormatException}
 * framing is lost: the channel refuses further reads.
 *
 * <p>Waits: reads and writes block. The handshake ({@link #readHello}) is bounded by closing the channel when its
 * time is up; {@link #closeAfter} bounds any other wait the same way, from one shared timer thread.
 *
 * <p>One reading thread and one writing thread at most; error offsets count from the start of the stream.
 */
public final class FrameChannel implements AutoCloseable
{
    /** {@link #read} at a clean end of stream, before the first byte of a frame. */
    public static final int END_OF_STREAM = -1;

    private static final ScheduledThreadPoolExecutor TIMER = timer();

    private final ReadableByteChannel in;
    private final GatheringByteChannel out;
    private final String peer;
    private final int maxFrameBytes;
    private final UnsafeBuffer view = new UnsafeBuffer(0, 0);
    private ByteBuffer viewOf;
    private ByteBuffer handshakeBytes;
    private long frameOffset;
    private long frameIndex = -1;
    private long nextOffset;
    private int pendingLength;
    private boolean failed;

    /**
     * A channel over a connected socket.
     *
     * @param peer          who is at the other end, named in every error ("stage 2", "upstream 10.0.0.2:7001")
     * @param maxFrameBytes the largest frame accepted ({@link FrameValidator#validateHeader})
     */
    public FrameChannel(final SocketChannel socket, final String peer, final int maxFrameBytes)
    {
        this(socket, socket, peer, maxFrameBytes);
    }

    private FrameChannel(
        final ReadableByteChannel in, final GatheringByteChannel out, final String peer, final int maxFrameBytes)
    {
        if (maxFrameBytes < FrameHeader.MIN_FRAME_SIZE || maxFrameBytes > FrameHeader.MAX_FRAME_SIZE_LIMIT)
        {
            throw new IllegalArgumentException("maxFrameBytes " + maxFrameBytes + " not in [" + FrameHeader.MIN_FRAME_SIZE +
                ", " + FrameHeader.MAX_FRAME_SIZE_LIMIT + "]");
        }
        this.in = in;
        this.out = out;
        this.peer = peer;
        this.maxFrameBytes = maxFrameBytes;
    }

    /** A read-only channel over any byte stream (a file, stdin). */
    public static FrameChannel reading(final ReadableByteChannel in, final String name, final int maxFrameBytes)
    {
        return new FrameChannel(in, null, name, maxFrameBytes);
    }

    /** Ends the writing side of a socket (the peer reads the end of the stream); reading goes on. */
    public void shutdownOutput() throws IOException
    {
        if (out instanceof SocketChannel socket)
        {
            socket.shutdownOutput();
        }
        else
        {
            throw new UnsupportedOperationException("not a socket: " + peer);
        }
    }

    /**
     * Ends a connection that is being refused: no more writes (the peer reads what was sent, then the end), whatever
     * the peer still sends is read and dropped for at most {@code millis}, then the channel is closed. Closing with
     * unread bytes would reset the connection and could destroy the ERROR just sent before the peer reads it.
     */
    public void drainAndClose(final long millis)
    {
        try
        {
            if (out instanceof SocketChannel socket && socket.isOpen())
            {
                socket.shutdownOutput();
                final ScheduledFuture<?> timer = closeAfter(millis);
                final ByteBuffer scratch = ByteBuffer.allocate(4096);
                try
                {
                    while (in.read(scratch.clear()) >= 0)
                    {
                        // dropped
                    }
                }
                finally
                {
                    timer.cancel(false);
                }
            }
        }
        catch (final IOException ignored)
        {
            // closed by the timer, or the peer is gone: either way it ends here
        }
        closeQuietly();
    }

    /**
     * Bytes that can be read now without blocking (0 for a channel that is not a socket): lets a thread that is not
     * waiting for a frame see whether one (a heartbeat, an error) has arrived. Does not allocate.
     */
    public int available() throws IOException
    {
        if (in instanceof SocketChannel socket)
        {
            return socket.socket().getInputStream().available();
        }
        return 0;
    }

    /** Whether the channel is still open here (not {@link #close}d, nor closed when a time limit ran out). */
    public boolean isOpen()
    {
        return in.isOpen();
    }

    /** Who is at the other end, as given. */
    public String peer()
    {
        return peer;
    }

    /**
     * Reads the next frame into {@code dst} from index 0 (absolute: position and limit are left anywhere). A valid
     * frame longer than {@code dst} (but within the maximum frame size) has its bytes after the header read and
     * discarded through {@code dst}; only its header is there then, and the length returned is larger than
     * {@code dst.capacity()}.
     *
     * @return the frame's length, or {@link #END_OF_STREAM} when the stream ended cleanly before it.
     * @throws FrameFormatException an invalid frame, or the stream ended inside one (framing is lost).
     * @throws IOException          the channel failed or was closed.
     */
    public int read(final ByteBuffer dst) throws IOException, FrameFormatException
    {
        final int length = readHeader(dst);
        if (length == END_OF_STREAM)
        {
            return END_OF_STREAM;
        }
        if (length <= dst.capacity())
        {
            readRest(dst);
        }
        else
        {
            skipRest(dst);
        }
        return length;
    }

    /**
     * The first half of {@link #read}, for a reader that sizes its buffer by the frame: reads and validates the next
     * header into {@code dst[0, 56)}. Then {@link #readRest} (into a buffer that holds the frame and has this header
     * at index 0) or {@link #skipRest} must follow before the next frame.
     *
     * @return the frame's length, or {@link #END_OF_STREAM} when the stream ended cleanly before it.
     */
    public int readHeader(final ByteBuffer dst) throws IOException, FrameFormatException
    {
        if (failed)
        {
            throw new IllegalStateException("framing with " + peer + " was lost at stream offset " + nextOffset +
                "; no frame can be read after it");
        }
        if (pendingLength != 0)
        {
            throw new IllegalStateException("the rest of the previous frame was neither read nor skipped");
        }
        if (dst.capacity() < HEADER_LENGTH)
        {
            throw new IllegalArgumentException("a frame buffer holds at least the " + HEADER_LENGTH + " header bytes");
        }
        try
        {
            final int headerBytes = fill(dst, 0, HEADER_LENGTH);
            if (headerBytes == 0)
            {
                return END_OF_STREAM;
            }
            if (headerBytes < HEADER_LENGTH)
            {
                throw new FrameFormatException(Reason.TRUNCATED_HEADER, frameIndex + 1, nextOffset, headerBytes,
                    "stream from " + peer + " ended after " + headerBytes + " of the " + HEADER_LENGTH + " header bytes");
            }
            pendingLength = FrameValidator.validateHeader(view(dst), 0, nextOffset, frameIndex + 1, maxFrameBytes);
            return pendingLength;
        }
        catch (final FrameFormatException ex)
        {
            failed = true;
            throw ex;
        }
    }

    /** Reads the rest of the frame whose header {@link #readHeader} read into {@code dst}, and validates it. */
    public void readRest(final ByteBuffer dst) throws IOException, FrameFormatException
    {
        final int length = pending(dst);
        final UnsafeBuffer b = view(dst);
        try
        {
            final int rest = length - HEADER_LENGTH;
            final int got = fill(dst, HEADER_LENGTH, rest);
            if (got < rest)
            {
                throw truncated(b, length, HEADER_LENGTH + got);
            }
            FrameValidator.validateTrailer(b, 0, nextOffset, frameIndex + 1);
        }
        catch (final FrameFormatException ex)
        {
            failed = true;
            throw ex;
        }
        advance(length);
    }

    /** Reads and discards the rest of the frame whose header {@link #readHeader} read into {@code dst}, through dst. */
    public void skipRest(final ByteBuffer dst) throws IOException, FrameFormatException
    {
        final int length = pendingLength;
        if (length == 0)
        {
            throw new IllegalStateException("no frame header was read");
        }
        final int chunk = dst.capacity() - HEADER_LENGTH;
        if (chunk <= 0)
        {
            throw new IllegalArgumentException("skipping a frame needs a buffer larger than its " + HEADER_LENGTH + "-byte header");
        }
        int read = HEADER_LENGTH;
        while (read < length)
        {
            final int n = Math.min(chunk, length - read);
            final int got = fill(dst, HEADER_LENGTH, n);
            read += got;
            if (got < n)
            {
                failed = true;
                throw truncated(view(dst), length, read);
            }
        }
        advance(length);
    }

    private int pending(final ByteBuffer dst)
    {
        if (pendingLength == 0)
        {
            throw new IllegalStateException("no frame header was read");
        }
        if (pendingLength > dst.capacity())
        {
            throw new IllegalArgumentException("a " + pendingLength + "-byte frame does not fit in " + dst.capacity() + " bytes");
        }
        return pendingLength;
    }

    private void advance(final int length)
    {
        pendingLength = 0;
        frameIndex++;
        frameOffset = nextOffset;
        nextOffset += length;
    }

    /** Index of the last frame {@link #read} returned (0 for the first). */
    public long frameIndex()
    {
        return frameIndex;
    }

    /** Stream offset of the first byte of the last frame {@link #read} returned. */
    public long frameStreamOffset()
    {
        return frameOffset;
    }

    /** Writes {@code src[0, length)} completely. */
    public void write(final ByteBuffer src, final int length) throws IOException
    {
        src.limit(length).position(0);
        while (src.hasRemaining())
        {
            out.write(src);
        }
    }

    /**
     * Writes the first {@code length0} bytes of {@code bufs[0]} then the first {@code length1} bytes of
     * {@code bufs[1]}, in one gathering write where the kernel takes it all.
     */
    public void write(final ByteBuffer[] bufs, final int length0, final int length1) throws IOException
    {
        bufs[0].limit(length0).position(0);
        bufs[1].limit(length1).position(0);
        while (bufs[0].hasRemaining() || bufs[1].hasRemaining())
        {
            out.write(bufs);
        }
    }

    /** Sends a HELLO (handshake: allocates). */
    public void sendHello(final Hello hello) throws IOException
    {
        final ByteBuffer bb = ByteBuffer.allocateDirect(HEADER_LENGTH + 4 * HelloPayload.FIELD_COUNT).order(ByteOrder.LITTLE_ENDIAN);
        write(bb, FrameEncoder.encodeHello(new UnsafeBuffer(bb), 0, 0, hello));
    }

    /** Sends an AUTH frame with a 32-byte MAC (handshake: allocates). */
    public void sendAuth(final byte[] mac) throws IOException
    {
        final ByteBuffer bb = ByteBuffer.allocateDirect(HEADER_LENGTH + 4 * FrameValidator.AUTH_WORDS).order(ByteOrder.LITTLE_ENDIAN);
        write(bb, FrameEncoder.encodeAuth(new UnsafeBuffer(bb), 0, mac));
    }

    /** Sends a ROUTE or READY frame (session set-up: allocates). */
    public void sendText(final MessageType type, final String text) throws IOException
    {
        final byte[] t = text.getBytes(StandardCharsets.UTF_8);
        final ByteBuffer bb = ByteBuffer.allocateDirect(HEADER_LENGTH + t.length + 16).order(ByteOrder.LITTLE_ENDIAN);
        write(bb, FrameEncoder.encodeText(new UnsafeBuffer(bb), 0, type, text));
    }

    /**
     * Reads the HELLO a connection starts with, waiting at most {@code timeoutMillis} (the channel is closed when
     * the time is up). An ERROR frame instead (the peer refused us), any other frame, a malformed one, the end of
     * the stream or the time running out is a {@link HandshakeException} naming the peer.
     */
    public Hello readHello(final long timeoutMillis) throws HandshakeException
    {
        return Hello.from(readControl(MessageType.HELLO, timeoutMillis), 0);
    }

    /** Reads an AUTH frame's MAC, as {@link #readHello} reads a HELLO. */
    public byte[] readAuth(final long timeoutMillis) throws HandshakeException
    {
        final byte[] mac = new byte[4 * FrameValidator.AUTH_WORDS];
        readControl(MessageType.AUTH, timeoutMillis).getBytes(HEADER_LENGTH, mac);
        return mac;
    }

    /** Reads a ROUTE or READY frame's text, as {@link #readHello} reads a HELLO. */
    public String readText(final MessageType type, final long timeoutMillis) throws HandshakeException
    {
        final UnsafeBuffer b = readControl(type, timeoutMillis);
        return b.getStringWithoutLengthUtf8(HEADER_LENGTH, (int)FrameHeader.payloadLength(b, 0));
    }

    /**
     * Reads the next frame, which must be of type {@code expected} (HEARTBEAT frames before it are skipped), within
     * {@code timeoutMillis}; returns a view of it, valid until the next read.
     */
    private UnsafeBuffer readControl(final MessageType expected, final long timeoutMillis) throws HandshakeException
    {
        final ByteBuffer bb = handshakeBuffer();
        final AtomicBoolean timedOut = new AtomicBoolean();
        final ScheduledFuture<?> timer = closeAfter(timeoutMillis, timedOut);
        try
        {
            while (true)
            {
                final int length = readHeader(bb);
                if (length == END_OF_STREAM)
                {
                    throw new HandshakeException(peer + " closed the connection before its " + expected);
                }
                if (length > bb.capacity())
                {
                    throw new HandshakeException(peer + " sent a " + length + "-byte frame where its " + expected + " belongs");
                }
                readRest(bb);
                final UnsafeBuffer b = view(bb);
                final MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(b, 0));
                if (type == MessageType.HEARTBEAT && expected != MessageType.HEARTBEAT)
                {
                    continue;
                }
                if (type == MessageType.ERROR)
                {
                    throw new HandshakeException(peer + " refused the connection: " +
                        ErrorCode.fromCode(ErrorPayload.errorCodeValue(b, 0)) + ": " + ErrorPayload.message(b, 0));
                }
                if (type != expected)
                {
                    throw new HandshakeException("expected " + expected + " from " + peer + ", got " + type);
                }
                return b;
            }
        }
        catch (final FrameFormatException ex)
        {
            throw new HandshakeException("malformed handshake from " + peer + ": " + ex.getMessage(), ex);
        }
        catch (final IOException ex)
        {
            if (timedOut.get() || ex instanceof AsynchronousCloseException)
            {
                throw new HandshakeException("no " + expected + " from " + peer + " within " + timeoutMillis + " ms", ex);
            }
            throw ex instanceof HandshakeException h ? h :
                new HandshakeException("handshake with " + peer + " failed: " + ex.getMessage(), ex);
        }
        finally
        {
            timer.cancel(false);
        }
    }

    /** Sends one ERROR frame (error path: allocates). */
    public void sendError(final long stepId, final int microBatchId, final ErrorCode code, final int seqId, final String message)
        throws IOException
    {
        final byte[] m = message.getBytes(StandardCharsets.UTF_8);
        final ByteBuffer bb = ByteBuffer.allocateDirect(HEADER_LENGTH + ErrorPayload.MESSAGE_OFFSET + m.length + 16)
            .order(ByteOrder.LITTLE_ENDIAN);
        write(bb, FrameEncoder.encodeError(new UnsafeBuffer(bb), 0, stepId, microBatchId, code, seqId, message));
    }

    /**
     * Bounds a blocking read or write on this channel: closes it unless the returned future is cancelled within
     * {@code timeoutMillis} (which makes the blocked call throw). One timer thread serves every channel.
     */
    public ScheduledFuture<?> closeAfter(final long timeoutMillis)
    {
        return closeAfter(timeoutMillis, new AtomicBoolean());
    }

    private ScheduledFuture<?> closeAfter(final long timeoutMillis, final AtomicBoolean fired)
    {
        return TIMER.schedule(() ->
        {
            fired.set(true);
            closeQuietly();
        }, timeoutMillis, TimeUnit.MILLISECONDS);
    }

    @Override
    public void close() throws IOException
    {
        try
        {
            in.close();
        }
        finally
        {
            if (out != null && out != in)
            {
                out.close();
            }
        }
    }

    /** Closes, ignoring errors (used to unblock a thread). */
    public void closeQuietly()
    {
        try
        {
            close();
        }
        catch (final IOException ignored)
        {
            // closing to unblock a read or write; nothing to recover
        }
    }

    /** Sets a socket up for small, latency-sensitive frames: TCP_NODELAY, keep-alive. */
    public static void tune(final SocketChannel socket) throws IOException
    {
        socket.setOption(StandardSocketOptions.TCP_NODELAY, true);
        socket.setOption(StandardSocketOptions.SO_KEEPALIVE, true);
    }

    /**
     * Connects to host:port, retrying refused connections (the peer may still be starting) until the timeout; sets
     * SO_SNDBUF and SO_RCVBUF first when {@code sendBufferBytes} > 0, then {@link #tune}s the socket.
     */
    public static SocketChannel connect(final String host, final int port, final long timeoutMillis, final int sendBufferBytes)
        throws IOException
    {
        final long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        IOException last;
        do
        {
            final SocketChannel ch = SocketChannel.open();
            try
            {
                if (sendBufferBytes > 0)
                {
                    ch.setOption(StandardSocketOptions.SO_SNDBUF, sendBufferBytes);
                    ch.setOption(StandardSocketOptions.SO_RCVBUF, sendBufferBytes);
                }
                ch.socket().connect(new InetSocketAddress(host, port), (int)Math.max(1, timeoutMillis));
                tune(ch);
                return ch;
            }
            catch (final ConnectException ex)
            {
                ch.close();
                last = ex;
                try
                {
                    Thread.sleep(50);
                }
                catch (final InterruptedException ie)
                {
                    Thread.currentThread().interrupt();
                    throw new IOException("interrupted while connecting to " + host + ":" + port, ie);
                }
            }
            catch (final IOException | RuntimeException ex)
            {
                ch.close();
                throw ex;
            }
        }
        while (System.nanoTime() < deadline);
        throw new IOException("cannot connect to " + host + ":" + port + " within " + timeoutMillis + " ms: " +
            last.getMessage(), last);
    }

    /** Reads up to {@code length} bytes into dst at {@code offset}; fewer only when the stream ended. */
    private int fill(final ByteBuffer dst, final int offset, final int length) throws IOException
    {
        dst.limit(offset + length).position(offset);
        while (dst.hasRemaining())
        {
            if (in.read(dst) < 0)
            {
                break;
            }
        }
        return dst.position() - offset;
    }

    private FrameFormatException truncated(final UnsafeBuffer b, final int length, final int got)
    {
        final MessageType type = MessageType.fromCode(FrameHeader.messageTypeCode(b, 0));
        return new FrameFormatException(Reason.TRUNCATED_PAYLOAD, frameIndex + 1, nextOffset, got,
            "stream from " + peer + " ended after " + got + " of the " + length + " frame bytes (" + type.printName() +
            ", payload_len " + FrameHeader.payloadLength(b, 0) + ", " + FrameHeader.sequenceCount(b, 0) +
            " sequence entries" + (FrameHeader.flags(b, 0) != 0 ? ", trace" : "") + ")");
    }

    private UnsafeBuffer view(final ByteBuffer bb)
    {
        if (viewOf != bb)
        {
            view.wrap(bb);
            viewOf = bb;
        }
        return view;
    }

    private ByteBuffer handshakeBuffer()
    {
        if (handshakeBytes == null)
        {
            handshakeBytes = ByteBuffer.allocateDirect(Math.min(64 * 1024, maxFrameBytes)).order(ByteOrder.LITTLE_ENDIAN);
        }
        return handshakeBytes;
    }

    private static ScheduledThreadPoolExecutor timer()
    {
        final ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r ->
        {
            final Thread thread = new Thread(r, "tnsr-frame-channel-timer");
            thread.setDaemon(true);
            return thread;
        });
        t.setRemoveOnCancelPolicy(true);
        return t;
    }
}
