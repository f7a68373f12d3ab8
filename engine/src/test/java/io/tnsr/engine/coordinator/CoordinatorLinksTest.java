package io.tnsr.engine.coordinator;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The coordinator between two real sockets whose far ends the test plays (the first and the last stage). */
@Timeout(30)
class CoordinatorLinksTest {
    private static final int VOCAB = 16;

    @Test
    void aValidHeaderFollowedByTheEndOfTheReturnLinkIsATruncatedFrameAndNoTokenIsChosen() throws Exception {
        try (ServerSocketChannel server = ServerSocketChannel.open()) {
            server.bind(new InetSocketAddress("127.0.0.1", 0));
            SocketChannel toFirstSocket = SocketChannel.open(server.getLocalAddress());
            SocketChannel firstStage = server.accept();
            SocketChannel fromLastSocket = SocketChannel.open(server.getLocalAddress());
            SocketChannel lastStage = server.accept();
            Sampler sampler = new Sampler(SamplingConfig.GREEDY, VOCAB);
            List<Integer> tokens = new ArrayList<>();
            Generator.Listener listener = (seq, token) -> tokens.add(token);
            LatencyMetric m = new LatencyMetric("m", "");
            Coordinator c = new Coordinator(new FrameChannel(toFirstSocket, "stage0", 1 << 20),
                    new FrameChannel(fromLastSocket, "the last stage (stage0)", 1 << 20), VOCAB,
                    new Coordinator.Options(1, 0, 32, 8, 1 << 20), listener, new Coordinator.Metrics(m, m, m, m, m));
            SequenceState seq = new SequenceState(0, "p", new int[] {1, 7, 7}, 4, 64, 1, t -> t == 2, sampler);

            // The stages: read the TOKENS step, answer with the header of its LOGITS frame, then end the stream.
            CompletableFuture<Long> pipeline = CompletableFuture.supplyAsync(() -> {
                try (FrameChannel in = new FrameChannel(firstStage, "the coordinator", 1 << 20);
                     FrameChannel out = new FrameChannel(lastStage, "the coordinator", 1 << 20)) {
                    ByteBuffer frame = ByteBuffer.allocateDirect(1 << 16).order(ByteOrder.LITTLE_ENDIAN);
                    UnsafeBuffer b = new UnsafeBuffer(frame);
                    in.read(frame);
                    long step = FrameHeader.stepId(b, 0);
                    int len = FrameEncoder.encodeLogits(b, 0, step, 0, new UnsafeBuffer(new byte[4 * VOCAB]), 0, 1, VOCAB, 1, 0);
                    FrameEncoder.putSequenceEntry(b, 0, 0, 0, 0, 3, SequenceTable.WANT_LOGITS);
                    assertEquals(MessageType.LOGITS.code(), FrameHeader.messageTypeCode(b, 0));
                    assertTrue(len > FrameHeader.HEADER_LENGTH);
                    out.write(frame, FrameHeader.HEADER_LENGTH);
                    return step;
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });

            PipelineException e = assertThrows(PipelineException.class, () -> c.run(List.of(seq)));
            FrameFormatException cause = assertInstanceOf(FrameFormatException.class, e.getCause(), e::getMessage);
            assertEquals(FrameFormatException.Reason.TRUNCATED_PAYLOAD, cause.reason());
            assertTrue(e.getMessage().contains("the last stage (stage0)"), e.getMessage());
            assertEquals(List.of(), tokens, "no token was chosen from a frame that never arrived whole");
            assertEquals(0, seq.generatedCount());
            assertEquals(1L, pipeline.get(10, TimeUnit.SECONDS));
            toFirstSocket.close();
            fromLastSocket.close();
        }
    }
}
