package io.tnsr.engine.stage;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.coordinator.PipelineException;
import io.tnsr.engine.coordinator.PipelineLinks;
import io.tnsr.engine.link.Handshake;
import io.tnsr.engine.link.LinkKey;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.synth.ModelSpec;
import io.tnsr.engine.testing.TestModels;
import io.tnsr.wire.ErrorPayload;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A stage service with a shared key, serving a session, while hostile or mistaken peers connect: each is refused
 * with a message saying why, and the running session goes on undisturbed (a frame still round-trips after each).
 */
@Timeout(60)
class HostilePeerTest {
    private static final LinkKey KEY = LinkKey.of("the pipeline's shared key, 32+ bytes".getBytes(StandardCharsets.UTF_8));
    private static final LinkOptions LINKS = new LinkOptions(KEY, 3000, 800, 5000, null);

    private final List<StageRuntime> stages = new ArrayList<>();
    private final List<AutoCloseable> fakes = new java.util.concurrent.CopyOnWriteArrayList<>();
    private final ByteBuffer in = ByteBuffer.allocateDirect(1 << 20).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer inBuf = new UnsafeBuffer(in);
    private final ByteBuffer out = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
    private final UnsafeBuffer outBuf = new UnsafeBuffer(out);
    private Path model;
    private LlamaConfig config;
    private StageRuntime stage;
    private int port;
    private PipelineLinks.Links session;
    private long step;

    @BeforeEach
    void start() throws Exception {
        model = TestModels.get(ModelSpec.tiny());
        stage = stage(model, 0, 4, LINKS);
        port = stage.listen();
        stage.start();
        config = stage.range().config();
        session = PipelineLinks.open(List.of("127.0.0.1:" + port), pipeline(0, 4), config, stage.fingerprint().bytes(), LINKS, 10_000);
        assertRoundTrip();
    }

    @AfterEach
    void stop() throws IOException {
        if (session != null) {
            session.toFirst().close();
            session.fromLast().close();
        }
        for (StageRuntime s : stages) {
            s.close();
        }
        for (AutoCloseable f : fakes) {
            try {
                f.close();
            } catch (Exception ignored) {
                // the test is over
            }
        }
    }

    private StageRuntime stage(Path file, int from, int to, LinkOptions links) throws IOException {
        return stage(file, from, to, -1, 1, links);
    }

    /** A stage service; {@code index} >= 0: started for that place of {@code count}, as run-pipeline starts its stages. */
    private StageRuntime stage(Path file, int from, int to, int index, int count, LinkOptions links) throws IOException {
        StageRuntime s = new StageRuntime(StageOptions.builder(file, from, to).stage(index, count).ringSize(8).maxFrameBytes(1 << 20)
                .frameLimits(32, 8).kvCacheTokens(4096).metricsDir(Files.createTempDirectory("hostile")).once(false).link(links).build());
        stages.add(s);
        return s;
    }

    private static PipelineConfig pipeline(int... bounds) {
        List<StageSpec> specs = new ArrayList<>();
        for (int i = 0; i + 1 < bounds.length; i++) {
            specs.add(new StageSpec(bounds[i], bounds[i + 1], 0, List.of(), null));
        }
        return new PipelineConfig("127.0.0.1", specs, 8, 1 << 20, 32, 8, WaitMode.BLOCK, 4096, 0);
    }

    /** One TOKENS frame through the running session, its LOGITS back: the session is undisturbed. */
    private void assertRoundTrip() throws Exception {
        long id = ++step;
        int len = FrameEncoder.encodeTokens(outBuf, 0, id, 0, new int[] {1, 5}, 0, 2, 1, 0);
        FrameEncoder.putSequenceEntry(outBuf, 0, 0, (int) id, 0, 2, SequenceTable.WANT_LOGITS);
        session.toFirst().write(out, len);
        assertEquals(MessageType.LOGITS, read(session.fromLast()));
        assertEquals(id, FrameHeader.stepId(inBuf, 0));
        session.toFirst().write(out, FrameEncoder.encodeEndSequence(outBuf, 0, ++step, 0, new int[] {(int) id}, 0, 1));
        assertEquals(MessageType.END_SEQUENCE, read(session.fromLast()));
    }

    /** The next frame's type, heartbeats skipped; null at the end of the stream. */
    private MessageType read(FrameChannel ch) throws Exception {
        while (true) {
            int n = ch.read(in);
            MessageType t = n < 0 ? null : MessageType.fromCode(FrameHeader.messageTypeCode(inBuf, 0));
            if (t != MessageType.HEARTBEAT) {
                return t;
            }
        }
    }

    private FrameChannel raw() throws IOException {
        return new FrameChannel(FrameChannel.connect("127.0.0.1", port, 5000, 0), "the stage", 1 << 20);
    }

    /** The ERROR the stage answered with (the connection then ends). */
    private String refusal(FrameChannel ch) throws Exception {
        MessageType t = read(ch);
        assertEquals(MessageType.ERROR, t, "the stage answers a refused peer with ERROR");
        String msg = ErrorPayload.message(inBuf, 0);
        assertEquals(FrameChannel.END_OF_STREAM, ch.read(in), "and closes the connection");
        return msg;
    }

    private Hello coordinatorHello(byte[] fingerprint) {
        return new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_COORDINATOR, 0, 1, 0, 0, config.dim(), 32, config.vocabSize(),
                config.layers(), 8, 1 << 20, HelloPayload.FLAG_AUTH, LINKS.heartbeatMillis(), fingerprint, new byte[16], null);
    }

    @Test
    void aWrongKeyIsRefusedOnBothSides() throws Exception {
        LinkOptions wrong = new LinkOptions(LinkKey.of("another key, just as long as it".getBytes(StandardCharsets.UTF_8)), 3000, 800,
                5000, null);
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(List.of("127.0.0.1:" + port),
                pipeline(0, 4), config, stage.fingerprint().bytes(), wrong, 5000));
        assertTrue(e.getMessage().contains("did not prove the shared key"), e.getMessage());
        assertTrue(e.getMessage().contains("stage0"), e.getMessage());
        assertRoundTrip();
    }

    @Test
    void noKeyIsRefusedByAStageThatHasOne() throws Exception {
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(List.of("127.0.0.1:" + port),
                pipeline(0, 4), config, stage.fingerprint().bytes(), LinkOptions.defaults(), 5000));
        assertTrue(e.getMessage().contains("did not authenticate") && e.getMessage().contains("requires the shared key"),
                e.getMessage());
        assertRoundTrip();
    }

    @Test
    void aReplayedHandshakeIsRefused() throws Exception {
        // A legitimate handshake, recorded: HELLO and AUTH as the coordinator sent them (for a return link, which waits
        // for a session rather than replacing the running one).
        ByteArrayOutputStream recorded = new ByteArrayOutputStream();
        Hello h = coordinatorHello(stage.fingerprint().bytes());
        Hello first = new Hello(h.protocolVersion(), h.role(), 0, 1, 0, 0, h.hiddenDim(), 32, h.vocabSize(), h.modelLayers(), 8,
                1 << 20, HelloPayload.FLAG_AUTH | HelloPayload.FLAG_RETURN_LINK, h.heartbeatMillis(), h.fingerprint(), new byte[16], null);
        try (FrameChannel ch = raw()) {
            byte[] hello = frame(b -> FrameEncoder.encodeHello(b, 0, 0, first));
            ch.write(ByteBuffer.allocateDirect(hello.length).put(hello), hello.length);
            recorded.write(hello);
            assertEquals(MessageType.HELLO, read(ch));
            Hello answer = Hello.from(inBuf, 0);
            byte[] mac = KEY.mac("TNSR-HELLO-CONFIRM".getBytes(StandardCharsets.US_ASCII), first.payloadBytes(false),
                    answer.payloadBytes(true));
            byte[] auth = frame(b -> FrameEncoder.encodeAuth(b, 0, mac));
            ch.write(ByteBuffer.allocateDirect(auth.length).put(auth), auth.length);
            recorded.write(auth);
        }
        // Replayed on a new connection: the stage's nonce is new, so the recorded AUTH proves nothing.
        try (FrameChannel ch = raw()) {
            byte[] replay = recorded.toByteArray();
            ch.write(ByteBuffer.allocateDirect(replay.length).put(replay), replay.length);
            assertEquals(MessageType.HELLO, read(ch));
            String why = refusal(ch);
            assertTrue(why.contains("did not prove the shared key") && why.contains("replayed"), why);
        }
        assertRoundTrip();
    }

    @Test
    void framesFromAConnectionThatDidNotAuthenticateAreRefused() throws Exception {
        try (FrameChannel ch = raw()) {   // data straight away, no HELLO
            int len = FrameEncoder.encodeTokens(outBuf, 0, 1, 0, new int[] {1}, 0, 1, 1, 0);
            FrameEncoder.putSequenceEntry(outBuf, 0, 0, 99, 0, 1, SequenceTable.WANT_LOGITS);
            ch.write(out, len);
            String why = refusal(ch);
            assertTrue(why.contains("must start with HELLO"), why);
        }
        try (FrameChannel ch = raw()) {   // a HELLO without the key, then SHUTDOWN
            Hello h = coordinatorHello(stage.fingerprint().bytes());
            Hello noAuth = new Hello(h.protocolVersion(), h.role(), 0, 1, 0, 0, h.hiddenDim(), 32, h.vocabSize(), h.modelLayers(), 8,
                    1 << 20, 0, h.heartbeatMillis(), h.fingerprint(), new byte[16], null);
            ch.sendHello(noAuth);
            ch.write(out, FrameEncoder.encodeShutdown(outBuf, 0, 1, 0));
            String why = refusal(ch);
            assertTrue(why.contains("did not authenticate"), why);
        }
        assertRoundTrip();
        assertEquals(StageRuntime.State.RUNNING, stage.state());
    }

    @Test
    void anIdleConnectionIsClosedAfterTheHandshakeBoundAndHoldsNothingUp() throws Exception {
        try (FrameChannel idle = raw()) {
            long t0 = System.nanoTime();
            assertRoundTrip();   // served while the idle connection says nothing
            assertEquals(FrameChannel.END_OF_STREAM, idle.read(in), "the stage closed the silent connection");
            double s = (System.nanoTime() - t0) / 1e9;
            assertTrue(s >= 0.7 && s < 5, "closed after " + s + " s (handshake bound 0.8 s)");
        }
        assertRoundTrip();
    }

    @Test
    void aFloodOfConnectionsIsShedAndTheSessionGoesOn() throws Exception {
        List<SocketChannel> flood = new ArrayList<>();
        try {
            for (int i = 0; i < 64; i++) {
                flood.add(FrameChannel.connect("127.0.0.1", port, 5000, 0));
            }
            assertRoundTrip();
            Thread.sleep(200);
            int closedAtOnce = 0;
            for (SocketChannel s : flood) {
                s.configureBlocking(false);
                int n = s.read(ByteBuffer.allocate(1));
                closedAtOnce += n < 0 ? 1 : 0;
            }
            assertTrue(closedAtOnce >= 64 - StageRuntime.MAX_PENDING_HANDSHAKES, closedAtOnce + " of 64 closed at once");
        } finally {
            for (SocketChannel s : flood) {
                s.close();
            }
        }
        assertRoundTrip();
    }

    @Test
    void aFloodOfSilentConnectionsFromOneAddressDoesNotKeepOutACoordinatorAtAnother() throws Exception {
        try (SocketChannel probe = SocketChannel.open()) {
            try {
                probe.bind(new InetSocketAddress("127.0.0.2", 0));
            } catch (IOException e) {
                Assumptions.assumeTrue(false, "cannot use 127.0.0.2 as a source address here (Linux routes all of 127/8): " + e);
            }
        }
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        PrintStream err = System.err;
        AtomicBoolean flooding = new AtomicBoolean(true);
        AtomicInteger connections = new AtomicInteger();
        Thread flooder = new Thread(() -> flood(flooding, connections), "flood-from-127.0.0.2");
        System.setErr(new PrintStream(new Tee(err, log), true, StandardCharsets.UTF_8));
        try {
            flooder.start();
            while (connections.get() < 64) {   // every place the stage would give is taken, and more keep coming
                Thread.sleep(10);
            }
            long t0 = System.nanoTime();
            PipelineLinks.Links old = session;
            session = PipelineLinks.open(List.of("127.0.0.1:" + port), pipeline(0, 4), config, stage.fingerprint().bytes(), LINKS, 5000);
            old.toFirst().close();
            old.fromLast().close();
            assertRoundTrip();
            double s = (System.nanoTime() - t0) / 1e9;
            assertTrue(s < 3, "a new session and a frame took " + s + " s while 127.0.0.2 flooded");
            assertTrue(flooder.isAlive(), "the flood went on all along");
        } finally {
            flooding.set(false);
            flooder.join(5000);
            System.setErr(err);
        }
        assertRoundTrip();
        String lines = log.toString(StandardCharsets.UTF_8);
        assertTrue(lines.contains("refused a connection from 127.0.0.2:") && lines.contains("from this address already pending"),
                lines);
        long refusalLines = lines.lines().filter(l -> l.contains("refused ")).count();
        assertTrue(refusalLines <= 3, "refusals of " + connections.get() + " connections logged in " + refusalLines + " lines:\n" + lines);
    }

    /** Keeps 16 silent connections from 127.0.0.2 open, opening a new one for each the stage closes. */
    private void flood(AtomicBoolean flooding, AtomicInteger connections) {
        List<SocketChannel> open = new ArrayList<>();
        ByteBuffer sink = ByteBuffer.allocate(4096);
        try {
            while (flooding.get()) {
                open.removeIf(s -> {
                    try {
                        int n;
                        do {
                            sink.clear();
                            n = s.read(sink);
                        } while (n > 0);
                        if (n == 0) {
                            return false;
                        }
                    } catch (IOException e) {
                        // reset by the stage: as closed
                    }
                    closeQuietly(s);
                    return true;
                });
                while (open.size() < 16) {
                    SocketChannel s = SocketChannel.open();
                    s.bind(new InetSocketAddress("127.0.0.2", 0));
                    s.connect(new InetSocketAddress("127.0.0.1", port));
                    s.configureBlocking(false);
                    open.add(s);
                    connections.incrementAndGet();
                }
                Thread.sleep(20);
            }
        } catch (IOException | InterruptedException e) {
            throw new IllegalStateException("the flood stopped: " + e, e);
        } finally {
            open.forEach(HostilePeerTest::closeQuietly);
        }
    }

    private static void closeQuietly(SocketChannel s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // the flood's end
        }
    }

    @Test
    void aSameShapeModelWithOtherWeightsIsRefusedNamingBothFingerprints() throws Exception {
        Path other = TestModels.get(ModelSpec.tiny().withSeed(99));
        StageRuntime first = stage(model, 0, 2, LINKS);
        StageRuntime last = stage(other, 2, 4, LINKS);
        int p0 = first.listen();
        int p1 = last.listen();
        first.start();
        last.start();
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(
                List.of("127.0.0.1:" + p0, "127.0.0.1:" + p1), pipeline(0, 2, 4), config, first.fingerprint().bytes(), LINKS, 5000));
        String msg = e.getMessage();
        assertTrue(msg.contains("model fingerprint differs"), msg);
        assertTrue(msg.contains(first.fingerprint().shortHex()) && msg.contains(last.fingerprint().shortHex()), msg);
        assertTrue(msg.contains("stage1"), msg);
        assertRoundTrip();
    }

    @Test
    void stagesWhoseLayerRangesDoNotMeetAreRefused() throws Exception {
        StageRuntime first = stage(model, 0, 2, LINKS);
        StageRuntime last = stage(model, 3, 4, LINKS);
        int p0 = first.listen();
        int p1 = last.listen();
        first.start();
        last.start();
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(
                List.of("127.0.0.1:" + p0, "127.0.0.1:" + p1), pipeline(0, 2, 4), config, first.fingerprint().bytes(), LINKS, 5000));
        assertTrue(e.getMessage().contains("layer ranges do not meet"), e.getMessage());
        assertTrue(e.getMessage().contains("[3, 4)"), e.getMessage());
        assertRoundTrip();
    }

    @Test
    void aStageStartedForAnotherPlaceIsRefusedNamingBothPlaces() throws Exception {
        StageRuntime first = stage(model, 0, 2, LINKS);
        StageRuntime third = stage(model, 2, 4, 1, 3, LINKS);   // started as stage 1 of 3, reached as stage 1 of 2
        int p0 = first.listen();
        int p1 = third.listen();
        first.start();
        third.start();
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(
                List.of("127.0.0.1:" + p0, "127.0.0.1:" + p1), pipeline(0, 2, 4), config, first.fingerprint().bytes(), LINKS, 5000));
        String msg = e.getMessage();
        assertTrue(msg.contains("the coordinator (127.0.0.1:") && msg.contains("takes stage1 for stage 1 of 2, but it is stage 1 of 3"),
                msg);
        assertRoundTrip();
    }

    @Test
    void aStageAnsweringAsAnotherPlaceIsRefusedByTheCoordinator() throws Exception {
        int fake = fakeStage(0, 4, h -> new int[] {5, 7});
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(List.of("127.0.0.1:" + fake),
                pipeline(0, 4), config, stage.fingerprint().bytes(), LINKS, 5000));
        assertEquals("the coordinator expects stage 0 of 1 there, but stage5 (stage0 at 127.0.0.1:" + fake + ") answered as stage 5 of 7",
                e.getMessage());
        assertRoundTrip();
    }

    @Test
    void aNextStageAnsweringAsAnotherPlaceIsRefusedByTheStageBeforeIt() throws Exception {
        StageRuntime first = stage(model, 0, 2, LINKS);
        int p0 = first.listen();
        first.start();
        // The coordinator's return link is answered as the place it asks for; the stage before it is told 4 of 9.
        int fake = fakeStage(2, 4, h -> h.role() == HelloPayload.ROLE_COORDINATOR ? new int[] {1, 2} : new int[] {4, 9});
        PipelineException e = assertThrows(PipelineException.class, () -> PipelineLinks.open(
                List.of("127.0.0.1:" + p0, "127.0.0.1:" + fake), pipeline(0, 2, 4), config, first.fingerprint().bytes(), LINKS, 5000));
        assertTrue(e.getMessage().contains("stage-layers-0-2 expects stage 1 of 2 after it, but stage4 (stage1 at 127.0.0.1:" + fake
                + ") answered as stage 4 of 9"), e.getMessage());
        assertRoundTrip();
    }

    /**
     * A peer playing a stage service that holds layers [from, to) of this test's model, with its key and frame
     * limits, but answers every handshake as the place {@code place} gives ({index, count}); returns its port.
     */
    private int fakeStage(int from, int to, java.util.function.Function<Hello, int[]> place) throws IOException {
        ServerSocketChannel server = ServerSocketChannel.open();
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        fakes.add(server);
        Thread t = new Thread(() -> {
            while (server.isOpen()) {
                FrameChannel ch;
                try {
                    SocketChannel s = server.accept();
                    ch = new FrameChannel(s, String.valueOf(s.getRemoteAddress()), 1 << 20);
                } catch (IOException e) {
                    return;   // closed: the test is over
                }
                fakes.add(ch);
                try {
                    Handshake.answer(ch, h -> {
                        int[] p = place.apply(h);
                        return new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_STAGE, p[0], p[1], from, to, config.dim(), 32,
                                config.vocabSize(), config.layers(), 8, 1 << 20, 0, LINKS.heartbeatMillis(), stage.fingerprint().bytes(),
                                null, null);
                    }, KEY, "the fake stage", LINKS.livenessMillis(), (h, n) -> null, 5000);
                } catch (HandshakeException e) {
                    // the other side refused this answer: what the test looks at, on that side
                }
            }
        }, "fake-stage");
        t.setDaemon(true);
        t.start();
        return ((InetSocketAddress) server.getLocalAddress()).getPort();
    }

    @Test
    void aNewAuthenticatedUpstreamReplacesTheSessionAndItsCachesAreDropped() throws Exception {
        PipelineLinks.Links old = session;
        session = PipelineLinks.open(List.of("127.0.0.1:" + port), pipeline(0, 4), config, stage.fingerprint().bytes(), LINKS, 10_000);
        MessageType last = read(old.fromLast());
        assertEquals(MessageType.ERROR, last, "the old coordinator is told why its session ended");
        assertTrue(ErrorPayload.message(inBuf, 0).contains("newer session"), ErrorPayload.message(inBuf, 0));
        assertEquals(null, read(old.fromLast()), "then its return link is closed");
        old.toFirst().close();
        old.fromLast().close();
        assertRoundTrip();
        assertEquals(0, stage.range().cache().liveSequences(), "nothing of either session is left in the KV cache");
    }

    private interface Encoder {
        int encode(UnsafeBuffer b);
    }

    private static byte[] frame(Encoder e) {
        UnsafeBuffer b = new UnsafeBuffer(new byte[4096]);
        int len = e.encode(b);
        byte[] bytes = new byte[len];
        b.getBytes(0, bytes);
        return bytes;
    }
}
