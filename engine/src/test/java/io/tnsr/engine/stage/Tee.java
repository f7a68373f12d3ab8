package io.tnsr.engine.stage;

import java.io.IOException;
import java.io.OutputStream;

/** Writes to two streams: a test's stderr stays visible while the test reads a copy of it. */
final class Tee extends OutputStream {
    private final OutputStream a;
    private final OutputStream b;

    Tee(OutputStream a, OutputStream b) {
        this.a = a;
        this.b = b;
    }

    @Override
    public synchronized void write(int c) throws IOException {
        a.write(c);
        b.write(c);
    }

    @Override
    public synchronized void write(byte[] bytes, int off, int len) throws IOException {
        a.write(bytes, off, len);
        b.write(bytes, off, len);
    }

    @Override
    public void flush() throws IOException {
        a.flush();
    }
}
