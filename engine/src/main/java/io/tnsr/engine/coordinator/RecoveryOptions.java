package io.tnsr.engine.coordinator;

/**
 * How the coordinator replaces a lost stage.
 *
 * @param timeoutMillis   how long one recovery may take before it gives up (0: no recovery, a lost stage ends the run)
 * @param restartAttempts most restarts of one stage within one recovery (a stage the coordinator started)
 * @param probeMillis     bound on asking one stage whether it is alive (a handshake with flag PROBE)
 */
public record RecoveryOptions(long timeoutMillis, int restartAttempts, long probeMillis) {
    public static final long DEFAULT_TIMEOUT_MILLIS = 60_000;
    public static final int DEFAULT_RESTART_ATTEMPTS = 3;
    public static final long DEFAULT_PROBE_MILLIS = 2000;

    public RecoveryOptions {
        if (timeoutMillis < 0 || timeoutMillis > 3_600_000) {
            throw new IllegalArgumentException("the recovery timeout must be 0..3600 s, got " + timeoutMillis / 1000.0 + " s");
        }
        if (restartAttempts < 1 || restartAttempts > 100) {
            throw new IllegalArgumentException("restart attempts must be 1..100, got " + restartAttempts);
        }
        if (probeMillis < 100) {
            throw new IllegalArgumentException("the probe bound must be >= 100 ms, got " + probeMillis);
        }
    }

    /** Recovery with the default bounds. */
    public static RecoveryOptions defaults() {
        return new RecoveryOptions(DEFAULT_TIMEOUT_MILLIS, DEFAULT_RESTART_ATTEMPTS, DEFAULT_PROBE_MILLIS);
    }

    /** No recovery: a lost stage ends the run. */
    public static RecoveryOptions off() {
        return new RecoveryOptions(0, 1, DEFAULT_PROBE_MILLIS);
    }

    public boolean enabled() {
        return timeoutMillis > 0;
    }
}
