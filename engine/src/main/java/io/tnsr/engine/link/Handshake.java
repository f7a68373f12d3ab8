package io.tnsr.engine.link;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * The start of every link, both sides checking each other:
 * <pre>
 *   connecting side                                   answering side
 *   HELLO (its fields, nonce A, mac 0)        --->    check fields; refuse with ERROR, or
 *                                             <---    HELLO (its fields, nonce B, mac = HMAC(key, "answer" | A's | B's))
 *   check fields and B's mac; refuse, or
 *   AUTH (HMAC(key, "confirm" | A's | B's))   --->    check A's mac; refuse with ERROR, or serve
 * </pre>
 * HELLO payloads enter the MACs as sent, the MAC field zeroed (B's complete in "confirm"); each side's nonce is fresh
 * per connection, so a recorded handshake replayed later does not match. Without a key (both sides
 * {@link LinkKey#NONE}) the MACs and AUTH are left out; one side with a key and the other without is refused.
 *
 * <p>What is compared ({@link #compare}): protocol version, model fingerprint, hidden size, vocabulary size, layer
 * count, frame limits, and the heartbeat interval against the liveness bound; the caller adds what depends on the
 * link's place (layer ranges, stage index). A refusal names both ends and both values, and is sent to the peer as
 * an ERROR frame before the connection closes, so both sides log the same reason.
 */
public final class Handshake {
    private static final SecureRandom RANDOM = new SecureRandom();
    /** How long a refused peer's remaining bytes are read and dropped before the connection closes. */
    private static final long REFUSAL_DRAIN_MILLIS = 200;
    private static final byte[] ANSWER = "TNSR-HELLO-ANSWER".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] CONFIRM = "TNSR-HELLO-CONFIRM".getBytes(StandardCharsets.US_ASCII);

    /** The link-specific checks of one side; returns null to accept, or the reason to refuse. */
    public interface Check {
        String refusal(Hello peer, String peerName);
    }

    private Handshake() {
    }

    /**
     * The connecting side: sends {@code own} (with a fresh nonce and the AUTH flag when there is a key), reads and
     * checks the answer, sends AUTH. Returns the peer's HELLO.
     *
     * @param self    this side's name in messages ("stage1", "the coordinator")
     * @param livenessMillis this side's liveness bound: the peer must send at least every half of it
     */
    public static Hello initiate(FrameChannel ch, Hello own, LinkKey key, String self, long livenessMillis, Check check,
                                 long timeoutMillis) throws HandshakeException {
        Hello mine = prepare(own, key, null);
        try {
            ch.sendHello(mine);
        } catch (IOException e) {
            throw new HandshakeException("cannot send HELLO to " + ch.peer() + ": " + e.getMessage(), e);
        }
        Hello peer = ch.readHello(timeoutMillis);
        String peerName = name(peer, ch.peer());
        String refusal = compare(mine, peer, self, peerName, key, livenessMillis);
        if (refusal == null) {
            refusal = check.refusal(peer, peerName);
        }
        if (refusal == null && key.present()
                && !LinkKey.same(peer.mac(), key.mac(ANSWER, mine.payloadBytes(false), peer.payloadBytes(false)))) {
            refusal = peerName + " did not prove the shared key (its HELLO's MAC is wrong): the two ends hold different keys";
        }
        if (refusal != null) {
            throw refuse(ch, refusal);
        }
        if (key.present()) {
            try {
                ch.sendAuth(key.mac(CONFIRM, mine.payloadBytes(false), peer.payloadBytes(true)));
            } catch (IOException e) {
                throw new HandshakeException("cannot send AUTH to " + peerName + ": " + e.getMessage(), e);
            }
        }
        return peer;
    }

    /**
     * The answering side: reads the connecting side's HELLO within the timeout, checks it, answers with {@code own}
     * (fresh nonce, MAC), reads and checks AUTH. Returns the peer's HELLO.
     */
    public static Hello answer(FrameChannel ch, java.util.function.Function<Hello, Hello> ownFor, LinkKey key, String self,
                               long livenessMillis, Check check, long timeoutMillis) throws HandshakeException {
        Hello peer;
        try {
            peer = ch.readHello(timeoutMillis);
        } catch (HandshakeException e) {
            sendError(ch, ErrorCode.UNEXPECTED_MESSAGE, self + ": a connection must start with HELLO: " + e.getMessage());
            ch.drainAndClose(REFUSAL_DRAIN_MILLIS);
            throw e;
        }
        String peerName = name(peer, ch.peer());
        if (peer.protocolVersion() != HelloPayload.PROTOCOL_VERSION) {
            String why = self + " speaks protocol " + HelloPayload.PROTOCOL_VERSION + ", " + peerName + " protocol " + peer.protocolVersion();
            sendError(ch, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, why);
            ch.drainAndClose(REFUSAL_DRAIN_MILLIS);
            throw new HandshakeException(why);
        }
        Hello mine = prepare(ownFor.apply(peer), key, null);
        String refusal = compare(mine, peer, self, peerName, key, livenessMillis);
        if (refusal == null) {
            refusal = check.refusal(peer, peerName);
        }
        if (refusal != null) {
            throw refuse(ch, refusal);
        }
        if (key.present()) {
            mine = mine.withMac(key.mac(ANSWER, peer.payloadBytes(false), mine.payloadBytes(false)));
        }
        try {
            ch.sendHello(mine);
        } catch (IOException e) {
            throw new HandshakeException("cannot answer " + peerName + ": " + e.getMessage(), e);
        }
        if (key.present()) {
            byte[] mac = ch.readAuth(timeoutMillis);
            if (!LinkKey.same(mac, key.mac(CONFIRM, peer.payloadBytes(false), mine.payloadBytes(true)))) {
                throw refuse(ch, peerName + " did not prove the shared key (wrong key, or a replayed handshake)");
            }
        }
        return peer;
    }

    private static Hello prepare(Hello own, LinkKey key, byte[] mac) {
        byte[] nonce = new byte[HelloPayload.NONCE_BYTES];
        RANDOM.nextBytes(nonce);
        int flags = key.present() ? own.flags() | HelloPayload.FLAG_AUTH : own.flags() & ~HelloPayload.FLAG_AUTH;
        return new Hello(HelloPayload.PROTOCOL_VERSION, own.role(), own.stageIndex(), own.stageCount(), own.layerFrom(),
                own.layerTo(), own.hiddenDim(), own.maxTokensPerFrame(), own.vocabSize(), own.modelLayers(),
                own.maxSequencesPerFrame(), own.maxFrameBytes(), flags, own.heartbeatMillis(), own.fingerprint(), nonce, mac);
    }

    /** "stage1 (10.0.0.3:7001)" or "the coordinator (10.0.0.1:40312)". */
    public static String name(Hello h, String address) {
        String who = h.role() == HelloPayload.ROLE_COORDINATOR ? "the coordinator" : "stage" + h.stageIndex();
        return who + " (" + address + ")";
    }

    /** The comparisons every link makes; null when they all agree. */
    static String compare(Hello mine, Hello peer, String self, String peerName, LinkKey key, long livenessMillis) {
        if (peer.protocolVersion() != HelloPayload.PROTOCOL_VERSION) {
            return differs("protocol version", self, HelloPayload.PROTOCOL_VERSION, peerName, peer.protocolVersion());
        }
        if (peer.has(HelloPayload.FLAG_AUTH) != key.present()) {
            return key.present()
                    ? peerName + " did not authenticate, and " + self + " requires the shared key (give it the same key file)"
                    : peerName + " authenticates with a key, and " + self + " has none (give both ends the same key file)";
        }
        if (!java.util.Arrays.equals(mine.fingerprint(), peer.fingerprint())) {
            return "model fingerprint differs: " + self + " loaded " + hex(mine.fingerprint()) + ", " + peerName + " loaded "
                    + hex(peer.fingerprint()) + " (another model file, or the same shape with other weights)";
        }
        if (mine.hiddenDim() != peer.hiddenDim()) {
            return differs("hidden size", self, mine.hiddenDim(), peerName, peer.hiddenDim());
        }
        if (mine.vocabSize() != peer.vocabSize()) {
            return differs("vocabulary size", self, mine.vocabSize(), peerName, peer.vocabSize());
        }
        if (mine.modelLayers() != peer.modelLayers()) {
            return differs("model layer count", self, mine.modelLayers(), peerName, peer.modelLayers());
        }
        if (mine.maxTokensPerFrame() != peer.maxTokensPerFrame()) {
            return differs("max_tokens_per_frame", self, mine.maxTokensPerFrame(), peerName, peer.maxTokensPerFrame());
        }
        if (mine.maxSequencesPerFrame() != peer.maxSequencesPerFrame()) {
            return differs("max_sequences_per_frame", self, mine.maxSequencesPerFrame(), peerName, peer.maxSequencesPerFrame());
        }
        if (mine.maxFrameBytes() != peer.maxFrameBytes()) {
            return differs("max_frame_bytes", self, mine.maxFrameBytes(), peerName, peer.maxFrameBytes());
        }
        if (peer.heartbeatMillis() <= 0 || 2L * peer.heartbeatMillis() > livenessMillis) {
            return peerName + " sends heartbeats every " + peer.heartbeatMillis() + " ms, too seldom for " + self
                    + "'s liveness bound of " + livenessMillis + " ms (at most half of it)";
        }
        return null;
    }

    private static String differs(String what, String self, long mine, String peerName, long theirs) {
        return what + " differs: " + self + " has " + mine + ", " + peerName + " has " + theirs;
    }

    /** The first 12 hex digits of a fingerprint, as messages show it. */
    public static String hex(byte[] fingerprint) {
        return HexFormat.of().formatHex(fingerprint, 0, 6);
    }

    private static HandshakeException refuse(FrameChannel ch, String why) {
        sendError(ch, ErrorCode.UNEXPECTED_MESSAGE, why);
        ch.drainAndClose(REFUSAL_DRAIN_MILLIS);
        return new HandshakeException(why);
    }

    private static void sendError(FrameChannel ch, ErrorCode code, String why) {
        try {
            ch.sendError(0, 0, code, ErrorCode.SEQ_ID_NONE, why);
        } catch (IOException ignored) {
            // the peer is gone already; the connection is dropped either way
        }
    }
}
