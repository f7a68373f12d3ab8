package io.tnsr.perf.stage;

import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;

/** The floor: a fixed number of bytes read and written with plain channel loops, no framing, no checks. */
public final class RawEndpoint implements Hop.Endpoint {
    private final ByteBuffer buf;
    private final int length;

    public RawEndpoint(int length) {
        this.length = length;
        this.buf = ByteBuffer.allocateDirect(length).order(ByteOrder.LITTLE_ENDIAN);
    }

    @Override
    public void send(SocketChannel ch) throws IOException {
        buf.clear().limit(length);
        while (buf.hasRemaining()) {
            ch.write(buf);
        }
    }

    @Override
    public boolean receive(SocketChannel ch) throws IOException {
        buf.clear().limit(length);
        while (buf.hasRemaining()) {
            if (ch.read(buf) < 0) {
                if (buf.position() == 0) {
                    return false;
                }
                throw new EOFException();
            }
        }
        return true;
    }
}
