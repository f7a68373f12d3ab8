package io.tnsr.wire;

import java.nio.ByteOrder;
import java.util.Arrays;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * The fields of a HELLO frame, which every connection starts with in both directions. Layer ranges are
 * [layerFrom, layerTo), layerTo exclusive. The codec does not interpret the values; the handshake does.
 *
 * @param protocolVersion      {@link HelloPayload#PROTOCOL_VERSION} of the sender
 * @param role                 {@link HelloPayload#ROLE_COORDINATOR} or {@link HelloPayload#ROLE_STAGE}
 * @param stageIndex           0-based position of the sender in the pipeline
 * @param stageCount           stages in the pipeline
 * @param layerFrom            first layer the sender holds
 * @param layerTo              one past the last layer the sender holds
 * @param hiddenDim            width of the activations the sender reads or writes
 * @param maxTokensPerFrame    most token rows per frame the sender accepts
 * @param vocabSize            the model's vocabulary size
 * @param modelLayers          the model's layer count
 * @param maxSequencesPerFrame most sequences per frame the sender accepts
 * @param maxFrameBytes        largest frame the sender accepts
 * @param flags                {@link HelloPayload#FLAG_AUTH}, {@link HelloPayload#FLAG_RETURN_LINK}
 * @param heartbeatMillis      the longest the sender leaves the link silent (it sends HEARTBEAT frames when idle)
 * @param fingerprint          32 bytes identifying the model file the sender loaded
 * @param nonce                16 random bytes, fresh for each connection
 * @param mac                  32 bytes: the answering side's HMAC over both HELLOs (zero in the first HELLO)
 */
public record Hello(int protocolVersion, int role, int stageIndex, int stageCount, int layerFrom, int layerTo,
                    int hiddenDim, int maxTokensPerFrame, int vocabSize, int modelLayers, int maxSequencesPerFrame,
                    int maxFrameBytes, int flags, int heartbeatMillis, byte[] fingerprint, byte[] nonce, byte[] mac)
{
    private static final ByteOrder ORDER = ByteOrder.LITTLE_ENDIAN;

    public Hello
    {
        fingerprint = sized(fingerprint, HelloPayload.DIGEST_BYTES, "fingerprint");
        nonce = sized(nonce, HelloPayload.NONCE_BYTES, "nonce");
        mac = sized(mac, HelloPayload.DIGEST_BYTES, "mac");
    }

    private static byte[] sized(final byte[] b, final int n, final String what)
    {
        if (b == null)
        {
            return new byte[n];
        }
        if (b.length != n)
        {
            throw new IllegalArgumentException("a HELLO " + what + " has " + n + " bytes, got " + b.length);
        }
        return b.clone();
    }

    /** Reads the HELLO frame at {@code frameOffset} (already validated). */
    public static Hello from(final DirectBuffer buffer, final int frameOffset)
    {
        final int p = frameOffset + FrameHeader.HEADER_LENGTH;
        final int[] w = new int[HelloPayload.FINGERPRINT_INDEX];
        for (int i = 0; i < w.length; i++)
        {
            w[i] = buffer.getInt(p + 4 * i, ORDER);
        }
        final byte[] fp = new byte[HelloPayload.DIGEST_BYTES];
        final byte[] nonce = new byte[HelloPayload.NONCE_BYTES];
        final byte[] mac = new byte[HelloPayload.DIGEST_BYTES];
        buffer.getBytes(p + 4 * HelloPayload.FINGERPRINT_INDEX, fp);
        buffer.getBytes(p + 4 * HelloPayload.NONCE_INDEX, nonce);
        buffer.getBytes(p + 4 * HelloPayload.MAC_INDEX, mac);
        return new Hello(w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8], w[9], w[10], w[11], w[12], w[13], fp, nonce, mac);
    }

    /** Writes the payload words at {@code payloadOffset}. */
    public void writePayload(final MutableDirectBuffer buffer, final int payloadOffset)
    {
        final int[] w = {protocolVersion, role, stageIndex, stageCount, layerFrom, layerTo, hiddenDim, maxTokensPerFrame,
            vocabSize, modelLayers, maxSequencesPerFrame, maxFrameBytes, flags, heartbeatMillis};
        for (int i = 0; i < w.length; i++)
        {
            buffer.putInt(payloadOffset + 4 * i, w[i], ORDER);
        }
        buffer.putBytes(payloadOffset + 4 * HelloPayload.FINGERPRINT_INDEX, fingerprint);
        buffer.putBytes(payloadOffset + 4 * HelloPayload.NONCE_INDEX, nonce);
        buffer.putBytes(payloadOffset + 4 * HelloPayload.MAC_INDEX, mac);
    }

    /** The payload as it goes on the wire, with the MAC field zeroed when {@code withMac} is false (what a MAC covers). */
    public byte[] payloadBytes(final boolean withMac)
    {
        final byte[] b = new byte[4 * HelloPayload.FIELD_COUNT];
        (withMac ? this : withMac(null)).writePayload(new UnsafeBuffer(b), 0);
        return b;
    }

    /** This HELLO with another MAC (null: zero). */
    public Hello withMac(final byte[] newMac)
    {
        return new Hello(protocolVersion, role, stageIndex, stageCount, layerFrom, layerTo, hiddenDim, maxTokensPerFrame,
            vocabSize, modelLayers, maxSequencesPerFrame, maxFrameBytes, flags, heartbeatMillis, fingerprint, nonce, newMac);
    }

    /** @return whether {@code flag} is set. */
    public boolean has(final int flag)
    {
        return (flags & flag) != 0;
    }

    @Override
    public byte[] fingerprint()
    {
        return fingerprint.clone();
    }

    @Override
    public byte[] nonce()
    {
        return nonce.clone();
    }

    @Override
    public byte[] mac()
    {
        return mac.clone();
    }

    @Override
    public boolean equals(final Object o)
    {
        return o instanceof Hello h && Arrays.equals(payloadBytes(true), h.payloadBytes(true));
    }

    @Override
    public int hashCode()
    {
        return Arrays.hashCode(payloadBytes(true));
    }

    @Override
    public String toString()
    {
        return "HELLO{version " + protocolVersion + ", " + (role == HelloPayload.ROLE_COORDINATOR ? "coordinator" : "stage " + stageIndex) +
            " of " + stageCount + ", layers [" + layerFrom + ", " + layerTo + ") of " + modelLayers + ", hidden " + hiddenDim +
            ", vocab " + vocabSize + ", frames <= " + maxTokensPerFrame + " tokens / " + maxSequencesPerFrame + " sequences / " +
            maxFrameBytes + " bytes, flags " + flags + ", heartbeat " + heartbeatMillis + " ms}";
    }
}
