package io.tnsr.engine.link;

import io.tnsr.engine.gguf.ModelFingerprint;
import java.nio.file.Path;

/**
 * How a process's pipeline links are set up and watched (a stage's, the coordinator's).
 *
 * @param key              the pipeline's shared key ({@link LinkKey#NONE}: links are not authenticated)
 * @param livenessMillis   a link silent for longer than this (no frame, no heartbeat) is reported as down; the
 *                         stage's own links carry a heartbeat at least every {@link #heartbeatMillis()}
 * @param handshakeMillis  bound on a new connection's handshake (an idle connection is closed after it)
 * @param connectMillis    bound on connecting to the next stage (or, for the coordinator, to a stage)
 * @param fingerprintCache where model fingerprints are cached (null: {@link ModelFingerprint}'s default)
 */
public record LinkOptions(LinkKey key, long livenessMillis, long handshakeMillis, long connectMillis, Path fingerprintCache) {
    public static final long DEFAULT_LIVENESS_MILLIS = 3000;
    public static final long DEFAULT_HANDSHAKE_MILLIS = 5000;
    public static final long DEFAULT_CONNECT_MILLIS = 20_000;

    public LinkOptions {
        if (livenessMillis < 200 || livenessMillis > 3_600_000) {
            throw new IllegalArgumentException("the liveness bound must be 200..3600000 ms, got " + livenessMillis);
        }
        if (handshakeMillis < 100 || handshakeMillis > 600_000) {
            throw new IllegalArgumentException("the handshake time limit must be 100..600000 ms, got " + handshakeMillis);
        }
        if (connectMillis < 1 || connectMillis > 3_600_000) {
            throw new IllegalArgumentException("the connect time limit must be 1..3600000 ms, got " + connectMillis);
        }
    }

    /** No key, the default bounds. */
    public static LinkOptions defaults() {
        return new LinkOptions(LinkKey.NONE, DEFAULT_LIVENESS_MILLIS, DEFAULT_HANDSHAKE_MILLIS, DEFAULT_CONNECT_MILLIS, null);
    }

    /** The key file, to pass on to the stages this side starts (null: none, or a key given directly). */
    public Path keyFile() {
        return key.file();
    }

    /** The longest a link this side writes stays silent: a fifth of the liveness bound. */
    public int heartbeatMillis() {
        return (int) Math.max(40, livenessMillis / 5);
    }
}

