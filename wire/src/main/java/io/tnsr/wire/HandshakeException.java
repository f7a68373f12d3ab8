package io.tnsr.wire;

import java.io.IOException;

/**
 * A connection's HELLO exchange failed: the peer refused us (its ERROR frame's message is in ours), sent something
 * other than a HELLO, sent a malformed frame, closed the connection, or said nothing within the time allowed. The
 * message names the peer.
 */
public final class HandshakeException extends IOException
{
    private static final long serialVersionUID = 1L;

    public HandshakeException(final String message)
    {
        super(message);
    }

    public HandshakeException(final String message, final Throwable cause)
    {
        super(message, cause);
    }
}
