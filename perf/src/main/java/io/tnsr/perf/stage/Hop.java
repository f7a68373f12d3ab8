package io.tnsr.perf.stage;

import io.tnsr.wire.FrameChannel;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import net.openhft.affinity.Affinity;

/**
 * A loopback TCP ping-pong between the benchmark thread and an echo thread, each side moving frames through an
 * {@link Endpoint}. One round trip ({@link #roundTrip()}) is two one-way hops: benchmark thread to echo thread
 * and back. Sockets are blocking, with TCP_NODELAY ({@link FrameChannel#tune}), as between stages.
 */
public final class Hop implements AutoCloseable {

    /** How one side of a hop moves a frame; each side has its own instance (its own buffers). */
    public interface Endpoint {
        /** Sends the frame this endpoint holds (the one it built, or the one it last received). */
        void send(SocketChannel ch) throws IOException;

        /** Receives one frame; false at a clean end of stream. */
        boolean receive(SocketChannel ch) throws IOException;
    }

    private final ServerSocketChannel server;
    private final SocketChannel client;
    private final Endpoint near;
    private final Thread echo;
    private volatile Throwable echoFailure;
    private final int cpu;
    private boolean pinned;

    /**
     * Connects a client endpoint {@code near} to an echo thread running {@code far}. With {@code cpu >= 0} both
     * threads are pinned to that CPU (the echo thread at start, the caller's thread at its first round trip), so
     * each hop is a wake-up on the same core: on a small shared machine that removes most of the run-to-run
     * spread that cross-core wake-ups and other processes add, which is what a regression gate needs.
     */
    public Hop(Endpoint near, Endpoint far, int cpu) throws Exception {
        this.near = near;
        this.cpu = cpu;
        server = ServerSocketChannel.open();
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        int port = ((InetSocketAddress) server.getLocalAddress()).getPort();
        CompletableFuture<SocketChannel> accepted = CompletableFuture.supplyAsync(() -> {
            try {
                SocketChannel ch = server.accept();
                FrameChannel.tune(ch);
                return ch;
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        });
        client = FrameChannel.connect("127.0.0.1", port, 5000, 0);
        SocketChannel echoSide = accepted.get(10, TimeUnit.SECONDS);
        echo = new Thread(() -> {
            try (SocketChannel ch = echoSide) {
                pin(cpu);
                while (far.receive(ch)) {
                    far.send(ch);
                }
            } catch (Throwable t) {
                if (client.isOpen()) {
                    echoFailure = t;
                }
            }
        }, "hop-echo");
        echo.setDaemon(true);
        echo.start();
    }

    /** One frame there and back. */
    public void roundTrip() throws IOException {
        if (!pinned) {
            pinned = true;
            pin(cpu);
        }
        near.send(client);
        if (!near.receive(client)) {
            throw new IOException("echo side closed the connection", echoFailure);
        }
    }

    /** Pins the calling thread to {@code cpu} (no-op when negative); fails loudly when the OS did not take it. */
    static void pin(int cpu) {
        if (cpu < 0) {
            return;
        }
        Affinity.setAffinity(cpu);
        java.util.BitSet now = Affinity.getAffinity();
        if (now.cardinality() != 1 || !now.get(cpu)) {
            throw new IllegalStateException("cannot pin " + Thread.currentThread().getName() + " to CPU " + cpu
                    + " (affinity is " + now + "); run with cpu=any");
        }
    }

    /**
     * The CPU a benchmark's {@code cpu} parameter names: "any" (not pinned: -1), "last" (the highest-numbered
     * CPU), or a CPU number.
     */
    public static int cpu(String param) {
        return switch (param) {
            case "any" -> -1;
            case "last" -> Runtime.getRuntime().availableProcessors() - 1;
            default -> Integer.parseInt(param);
        };
    }

    @Override
    public void close() throws Exception {
        if (pinned && cpu >= 0) {
            Affinity.resetToBaseAffinity();
        }
        client.close();
        server.close();
        echo.join(5000);
        if (echoFailure != null) {
            throw new IllegalStateException("echo thread failed", echoFailure);
        }
    }
}
