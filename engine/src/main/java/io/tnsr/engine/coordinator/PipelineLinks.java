package io.tnsr.engine.coordinator;

import io.tnsr.engine.link.Handshake;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import java.io.IOException;
import java.util.List;

/**
 * Opens a session over a pipeline's stages, from the coordinator:
 * <pre>
 *   1. return link: connect to the last stage, handshake (flag RETURN_LINK): the last stage will write here
 *   2. data link:   connect to stage 0, handshake
 *   3. ROUTE (stage 1..n-1 addresses) to stage 0; each stage connects the next and passes the rest on;
 *      READY comes back once the whole chain is connected, one line per stage
 * </pre>
 * The coordinator opens both of its links itself, so every stage, the last included, may be on another host behind
 * an address the config names; nothing needs to reach a port that only the coordinator knows. Any refusal on the
 * way (another model, a layer gap, a wrong key, an unreachable stage) comes back as the error of the stage that saw it.
 */
public final class PipelineLinks {
    /** The coordinator's two links and the chain's READY report. */
    public record Links(FrameChannel toFirst, FrameChannel fromLast, String ready) {
    }

    private PipelineLinks() {
    }

    /**
     * Opens the session over the stages at {@code addresses} ("host:port", in pipeline order), within the link
     * options' bounds; {@code readyMillis} bounds the whole chain's set-up.
     */
    public static Links open(List<String> addresses, PipelineConfig cfg, LlamaConfig model, byte[] fingerprint, LinkOptions link,
                             long readyMillis) {
        int n = addresses.size();
        FrameChannel fromLast = null;
        FrameChannel toFirst = null;
        try {
            String lastName = "stage" + (n - 1) + " at " + addresses.get(n - 1);
            fromLast = connect(addresses.get(n - 1), lastName, cfg, link);
            Handshake.initiate(fromLast, hello(n - 1, n, HelloPayload.FLAG_RETURN_LINK, cfg, model, fingerprint, link), link.key(),
                    "the coordinator", link.livenessMillis(), (h, peer) -> expect(h, peer, n - 1, n, model), link.handshakeMillis());
            toFirst = connect(addresses.get(0), "stage0 at " + addresses.get(0), cfg, link);
            Handshake.initiate(toFirst, hello(0, n, 0, cfg, model, fingerprint, link), link.key(), "the coordinator",
                    link.livenessMillis(), (h, peer) -> expect(h, peer, 0, n, model), link.handshakeMillis());
            toFirst.sendText(MessageType.ROUTE, String.join("\n", addresses.subList(1, n)));
            String ready = toFirst.readText(MessageType.READY, readyMillis);
            Links links = new Links(toFirst, fromLast, ready);
            toFirst = null;
            fromLast = null;
            return links;
        } catch (IOException e) {
            throw new PipelineException((e instanceof HandshakeException ? "" : "connecting the pipeline: ") + e.getMessage(), e);
        } finally {
            if (toFirst != null) {
                toFirst.closeQuietly();
            }
            if (fromLast != null) {
                fromLast.closeQuietly();
            }
        }
    }

    /**
     * Asks the stage at {@code address} whether it is alive and the one expected there: a handshake with flag PROBE
     * (the stage answers and closes; its session, if any, is untouched), within {@code timeoutMillis}.
     *
     * @return null when it answered as stage {@code index}, else why not (unreachable, silent, refused)
     */
    public static String probe(String address, int index, int count, PipelineConfig cfg, LlamaConfig model, byte[] fingerprint,
                               LinkOptions link, long timeoutMillis) {
        String name = "stage" + index + " at " + address;
        int colon = address.lastIndexOf(':');
        FrameChannel ch = null;
        try {
            // One attempt: a refused connection means the stage is gone (no retrying as at start-up).
            java.nio.channels.SocketChannel socket = java.nio.channels.SocketChannel.open();
            try {
                socket.socket().connect(new java.net.InetSocketAddress(address.substring(0, colon),
                        Integer.parseInt(address.substring(colon + 1))), (int) timeoutMillis);
                FrameChannel.tune(socket);
            } catch (IOException | RuntimeException e) {
                socket.close();
                throw new IOException("cannot connect: " + e.getMessage(), e);
            }
            ch = new FrameChannel(socket, name, cfg.maxFrameBytes());
            Handshake.initiate(ch, hello(index, count, HelloPayload.FLAG_PROBE, cfg, model, fingerprint, link), link.key(),
                    "the coordinator", link.livenessMillis(), (h, peer) -> h.role() == HelloPayload.ROLE_STAGE
                            && h.layerFrom() < h.layerTo() ? null : peer + " is not a stage", timeoutMillis);
            return null;
        } catch (IOException | RuntimeException e) {
            return e.getMessage();
        } finally {
            if (ch != null) {
                ch.closeQuietly();
            }
        }
    }

    private static FrameChannel connect(String address, String name, PipelineConfig cfg, LinkOptions link) throws IOException {
        int colon = address.lastIndexOf(':');
        try {
            return new FrameChannel(FrameChannel.connect(address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)),
                    link.connectMillis(), cfg.socketBufferBytes()), name, cfg.maxFrameBytes());
        } catch (IOException e) {
            throw new IOException("the coordinator cannot reach " + name + ": " + e.getMessage(), e);
        }
    }

    /** The coordinator's HELLO; its stage index is the place it expects the stage at the other end to take. */
    static Hello hello(int index, int count, int flags, PipelineConfig cfg, LlamaConfig model, byte[] fingerprint, LinkOptions link) {
        return new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_COORDINATOR, index, count, 0, 0, model.dim(),
                cfg.maxTokensPerFrame(), model.vocabSize(), model.layers(), cfg.maxSequencesPerFrame(), cfg.maxFrameBytes(), flags,
                link.heartbeatMillis(), fingerprint, null, null);
    }

    private static String expect(Hello h, String peer, int index, int count, LlamaConfig model) {
        if (h.role() != HelloPayload.ROLE_STAGE || h.stageIndex() != index || h.stageCount() != count) {
            return "the coordinator expects stage " + index + " of " + count + " there, but " + peer + " answered as "
                    + (h.role() == HelloPayload.ROLE_STAGE ? "stage " + h.stageIndex() + " of " + h.stageCount() : "a coordinator");
        }
        if (index == 0 && h.layerFrom() != 0) {
            return peer + " holds layers [" + h.layerFrom() + ", " + h.layerTo() + "); the first stage must start at layer 0";
        }
        if (index == count - 1 && h.layerTo() != model.layers()) {
            return peer + " holds layers [" + h.layerFrom() + ", " + h.layerTo() + "); the last stage must end at layer " + model.layers();
        }
        return null;
    }
}
