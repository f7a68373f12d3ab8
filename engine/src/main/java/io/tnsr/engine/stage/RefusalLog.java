package io.tnsr.engine.stage;

import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * The log lines of refused connections, so that a peer opening connection after connection cannot flood the log.
 * A refusal after a quiet interval is reported at once, with its address and reason; the ones after it within the
 * interval are counted per address and reported together in one line once the interval is over (at the next
 * refusal, or when {@link #flush} is called), each address with its count and its latest reason. At most
 * {@value #MAX_ADDRESSES} addresses are named per line; the rest are counted.
 *
 * <p>Thread-safe: the acceptor and the handshake threads report, the liveness thread flushes.
 */
final class RefusalLog {
    static final int MAX_ADDRESSES = 8;

    private record Count(long n, String why) {
    }

    private final long intervalNanos;
    private final Map<String, Count> unreported = new LinkedHashMap<>();
    private long unreportedOthers;
    private long unreportedSinceNanos;
    private long total;
    private long lastLineNanos;
    private boolean anyLine;

    RefusalLog(long intervalNanos) {
        this.intervalNanos = intervalNanos;
    }

    /**
     * Notes a refused connection from {@code address} (a host: refusals are counted per host) at {@code peer} (host
     * and port, for a line of its own); {@code why} says why. Returns the line to log now, or null when it is held for
     * the next summary.
     */
    synchronized String refused(String address, String peer, String why, long nowNanos) {
        total++;
        boolean quiet = !anyLine || nowNanos - lastLineNanos >= intervalNanos;
        if (quiet && unreported.isEmpty() && unreportedOthers == 0) {
            anyLine = true;
            lastLineNanos = nowNanos;
            return "refused a connection from " + peer + ": " + why;
        }
        if (unreported.isEmpty() && unreportedOthers == 0) {
            unreportedSinceNanos = nowNanos;
        }
        Count c = unreported.get(address);
        if (c != null || unreported.size() < MAX_ADDRESSES) {
            unreported.put(address, new Count(c == null ? 1 : c.n() + 1, why));
        } else {
            unreportedOthers++;
        }
        return flush(nowNanos);
    }

    /** The summary of the refusals held back, once the interval since the last line is over; else null. */
    synchronized String flush(long nowNanos) {
        if ((unreported.isEmpty() && unreportedOthers == 0) || nowNanos - lastLineNanos < intervalNanos) {
            return null;
        }
        long n = unreportedOthers;
        StringBuilder perAddress = new StringBuilder();
        for (Map.Entry<String, Count> e : unreported.entrySet()) {
            n += e.getValue().n();
            perAddress.append(perAddress.length() == 0 ? "" : "; ").append(e.getValue().n()).append(" from ").append(e.getKey())
                    .append(" (").append(e.getValue().why()).append(')');
        }
        if (unreportedOthers > 0) {
            perAddress.append("; ").append(unreportedOthers).append(" from other addresses");
        }
        String line = String.format(Locale.ROOT, "refused %d more connection%s in %.1f s (%d in all): %s", n, n == 1 ? "" : "s",
                (nowNanos - unreportedSinceNanos) / 1e9, total, perAddress);
        unreported.clear();
        unreportedOthers = 0;
        lastLineNanos = nowNanos;
        return line;
    }
}
