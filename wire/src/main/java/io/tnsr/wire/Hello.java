package io.tnsr.wire;

import org.agrona.DirectBuffer;

/**
 * The fields of a HELLO frame, which every connection starts with in both directions. Layer ranges are
 * [layerFrom, layerTo), layerTo exclusive.
 *
 * @param protocolVersion   {@link HelloPayload#PROTOCOL_VERSION} of the sender
 * @param role              {@link HelloPayload#ROLE_COORDINATOR} or {@link HelloPayload#ROLE_STAGE}
 * @param stageIndex        0-based position of the sender in the pipeline
 * @param stageCount        stages in the pipeline
 * @param layerFrom         first layer the sender holds
 * @param layerTo           one past the last layer the sender holds
 * @param hiddenDim         width of the activations the sender reads or writes
 * @param maxTokensPerFrame most token rows per frame the sender accepts
 */
public record Hello(int protocolVersion, int role, int stageIndex, int stageCount, int layerFrom, int layerTo,
                    int hiddenDim, int maxTokensPerFrame)
{
    /** Reads the HELLO frame at {@code frameOffset} (already validated). */
    public static Hello from(final DirectBuffer buffer, final int frameOffset)
    {
        return new Hello(HelloPayload.protocolVersion(buffer, frameOffset), HelloPayload.role(buffer, frameOffset),
            HelloPayload.stageIndex(buffer, frameOffset), HelloPayload.stageCount(buffer, frameOffset),
            HelloPayload.layerFrom(buffer, frameOffset), HelloPayload.layerTo(buffer, frameOffset),
            HelloPayload.hiddenDim(buffer, frameOffset), HelloPayload.maxTokensPerFrame(buffer, frameOffset));
    }
}
