package io.tnsr.engine.link;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.ErrorPayload;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The comparisons every link's handshake makes, over a real loopback connection: stage0 connects, stage1 answers.
 * Each mismatch is refused by whichever side sees it first, with a message naming both ends and both values, which
 * the other side receives as an ERROR frame. Where the answering side already refuses a mismatch, the test plays a
 * peer that does not check, so that the connecting side's own check is seen too.
 */
@Timeout(30)
class HandshakeTest {
    private static final LinkKey KEY = LinkKey.of("the pipeline's shared key, 32+ bytes".getBytes(StandardCharsets.UTF_8));
    private static final long LIVENESS_MILLIS = 3000;
    private static final long TIMEOUT_MILLIS = 5000;
    private static final byte[] FINGERPRINT = new byte[HelloPayload.DIGEST_BYTES];

    static {
        Arrays.fill(FINGERPRINT, (byte) 7);
    }

    /** What a HELLO says about the model and the frame limits; {@link #BASE} on both sides unless a test changes one. */
    private record Shape(int version, int hidden, int vocab, int layers, int tokens, int sequences, int frameBytes) {
        static final Shape BASE = new Shape(HelloPayload.PROTOCOL_VERSION, 64, 512, 4, 32, 8, 1 << 20);

        /** stage {@code index} of 2, holding half the layers; with the AUTH flag, since both sides hold the key. */
        Hello hello(int index) {
            return new Hello(version, HelloPayload.ROLE_STAGE, index, 2, index * layers / 2, (index + 1) * layers / 2, hidden, tokens,
                    vocab, layers, sequences, frameBytes, HelloPayload.FLAG_AUTH, (int) (LIVENESS_MILLIS / 5), FINGERPRINT,
                    new byte[HelloPayload.NONCE_BYTES], null);
        }
    }

    /** One field changed: its name in messages, the other side's shape, both values as messages show them. */
    static Stream<Arguments> mismatches() {
        Shape b = Shape.BASE;
        return Stream.of(
                Arguments.of("hidden size", new Shape(b.version, 128, b.vocab, b.layers, b.tokens, b.sequences, b.frameBytes), 64, 128),
                Arguments.of("vocabulary size", new Shape(b.version, b.hidden, 32000, b.layers, b.tokens, b.sequences, b.frameBytes),
                        512, 32000),
                Arguments.of("model layer count", new Shape(b.version, b.hidden, b.vocab, 6, b.tokens, b.sequences, b.frameBytes), 4, 6),
                Arguments.of("max_tokens_per_frame", new Shape(b.version, b.hidden, b.vocab, b.layers, 16, b.sequences, b.frameBytes),
                        32, 16),
                Arguments.of("max_sequences_per_frame", new Shape(b.version, b.hidden, b.vocab, b.layers, b.tokens, 4, b.frameBytes),
                        8, 4),
                Arguments.of("max_frame_bytes", new Shape(b.version, b.hidden, b.vocab, b.layers, b.tokens, b.sequences, 2 << 20),
                        1 << 20, 2 << 20));
    }

    private ServerSocketChannel server;
    private FrameChannel connecting;   // stage0's end
    private FrameChannel answering;    // stage1's end
    private String stage1Address;      // as stage0 names its peer
    private String stage0Address;      // as stage1 names its peer

    @BeforeEach
    void connect() throws Exception {
        server = ServerSocketChannel.open();
        server.bind(new InetSocketAddress("127.0.0.1", 0));
        SocketChannel c = SocketChannel.open(server.getLocalAddress());
        SocketChannel a = server.accept();
        stage1Address = "127.0.0.1:" + ((InetSocketAddress) server.getLocalAddress()).getPort();
        stage0Address = "127.0.0.1:" + ((InetSocketAddress) a.getRemoteAddress()).getPort();
        connecting = new FrameChannel(c, stage1Address, 1 << 20);
        answering = new FrameChannel(a, stage0Address, 1 << 20);
    }

    @AfterEach
    void close() throws Exception {
        connecting.closeQuietly();
        answering.closeQuietly();
        server.close();
    }

    /** stage1 answers as {@code own}, accepting whatever its place requires; its refusal, or null. */
    private CompletableFuture<String> answer(Shape own) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                Handshake.answer(answering, h -> own.hello(1), KEY, "stage1", LIVENESS_MILLIS, (h, n) -> null, TIMEOUT_MILLIS);
                return null;
            } catch (HandshakeException e) {
                return e.getMessage();
            }
        });
    }

    /** stage0 connects as {@code own}; its refusal, or null. */
    private String initiate(Shape own) {
        try {
            Handshake.initiate(connecting, own.hello(0), KEY, "stage0", LIVENESS_MILLIS, (h, n) -> null, TIMEOUT_MILLIS);
            return null;
        } catch (HandshakeException e) {
            return e.getMessage();
        }
    }

    /** The ERROR frame a raw peer got on {@code ch}: {code, message}. */
    private static Object[] errorOn(FrameChannel ch) throws Exception {
        ByteBuffer bb = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
        UnsafeBuffer b = new UnsafeBuffer(bb);
        assertTrue(ch.read(bb) > 0, "a frame came");
        assertEquals(MessageType.ERROR, MessageType.fromCode(FrameHeader.messageTypeCode(b, 0)));
        return new Object[] {ErrorCode.fromCode(ErrorPayload.errorCodeValue(b, 0)), ErrorPayload.message(b, 0)};
    }

    @Test
    void bothSidesAgreeOnTheSameShape() throws Exception {
        CompletableFuture<String> stage1 = answer(Shape.BASE);
        assertEquals(null, initiate(Shape.BASE));
        assertEquals(null, stage1.get(10, TimeUnit.SECONDS));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("mismatches")
    void theAnsweringSideRefusesAMismatchNamingBothEndsAndBothValues(String what, Shape other, long mine, long theirs)
            throws Exception {
        CompletableFuture<String> stage1 = answer(Shape.BASE);
        String seenByStage0 = initiate(other);
        String refusal = stage1.get(10, TimeUnit.SECONDS);
        assertEquals(what + " differs: stage1 has " + mine + ", stage0 (" + stage0Address + ") has " + theirs, refusal);
        assertTrue(seenByStage0 != null && seenByStage0.contains(stage1Address + " refused the connection: UNEXPECTED_MESSAGE: "
                + refusal), "stage0 is told the same: " + seenByStage0);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("mismatches")
    void theConnectingSideRefusesAMismatchedAnswerNamingBothEndsAndBothValues(String what, Shape other, long mine, long theirs)
            throws Exception {
        // stage1 here is a peer that checks nothing: it answers with its HELLO whatever stage0 said.
        CompletableFuture<Object[]> stage1 = CompletableFuture.supplyAsync(() -> {
            try {
                answering.readHello(TIMEOUT_MILLIS);
                answering.sendHello(other.hello(1));
                return errorOn(answering);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        String refusal = initiate(Shape.BASE);
        assertEquals(what + " differs: stage0 has " + mine + ", stage1 (" + stage1Address + ") has " + theirs, refusal);
        Object[] told = stage1.get(10, TimeUnit.SECONDS);
        assertEquals(ErrorCode.UNEXPECTED_MESSAGE, told[0]);
        assertEquals(refusal, told[1], "stage1 is told the same");
    }

    @Test
    void anotherProtocolVersionIsRefusedByTheAnsweringSide() throws Exception {
        Shape b = Shape.BASE;
        Shape v3 = new Shape(HelloPayload.PROTOCOL_VERSION + 1, b.hidden, b.vocab, b.layers, b.tokens, b.sequences, b.frameBytes);
        CompletableFuture<String> stage1 = answer(b);
        connecting.sendHello(v3.hello(0));   // as a peer speaking the next version would, without Handshake's checks
        Object[] told = errorOn(connecting);
        String refusal = stage1.get(10, TimeUnit.SECONDS);
        assertEquals("stage1 speaks protocol " + HelloPayload.PROTOCOL_VERSION + ", stage0 (" + stage0Address + ") protocol "
                + (HelloPayload.PROTOCOL_VERSION + 1), refusal);
        assertEquals(ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, told[0]);
        assertEquals(refusal, told[1]);
    }

    @Test
    void anotherProtocolVersionIsRefusedByTheConnectingSide() throws Exception {
        Shape b = Shape.BASE;
        Shape v3 = new Shape(HelloPayload.PROTOCOL_VERSION + 1, b.hidden, b.vocab, b.layers, b.tokens, b.sequences, b.frameBytes);
        CompletableFuture<Object[]> stage1 = CompletableFuture.supplyAsync(() -> {
            try {
                answering.readHello(TIMEOUT_MILLIS);
                answering.sendHello(v3.hello(1));
                return errorOn(answering);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        String refusal = initiate(b);
        assertEquals("protocol version differs: stage0 has " + HelloPayload.PROTOCOL_VERSION + ", stage1 (" + stage1Address + ") has "
                + (HelloPayload.PROTOCOL_VERSION + 1), refusal);
        assertEquals(refusal, stage1.get(10, TimeUnit.SECONDS)[1], "stage1 is told the same");
    }

    @Test
    void aHeartbeatTooSeldomForTheLivenessBoundIsRefused() throws Exception {
        CompletableFuture<String> stage1 = CompletableFuture.supplyAsync(() -> {
            try {
                Handshake.answer(answering, h -> Shape.BASE.hello(1), KEY, "stage1", 1000, (h, n) -> null, TIMEOUT_MILLIS);
                return null;
            } catch (HandshakeException e) {
                return e.getMessage();
            }
        });
        assertThrows(HandshakeException.class, () -> Handshake.initiate(connecting, Shape.BASE.hello(0), KEY, "stage0",
                LIVENESS_MILLIS, (h, n) -> null, TIMEOUT_MILLIS));
        assertEquals("stage0 (" + stage0Address + ") sends heartbeats every 600 ms, too seldom for stage1's liveness bound of 1000 ms"
                + " (at most half of it)", stage1.get(10, TimeUnit.SECONDS));
    }
}
