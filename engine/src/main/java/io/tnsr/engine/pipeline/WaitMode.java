package io.tnsr.engine.pipeline;

/** How a stage's compute thread waits for the next frame. */
public enum WaitMode {
    /** Sleeps until signalled: no CPU burnt, some microseconds of wake-up latency. */
    BLOCK,
    /** Busy-spins on its own pinned core: lowest latency, one core fully used. */
    SPIN,
    /** Spins briefly, then yields, then parks: for spinning threads that cannot have a core of their own. */
    BACKOFF;

    public static WaitMode parse(String s) {
        return switch (s.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "block", "blocking" -> BLOCK;
            case "spin", "busy-spin", "busyspin" -> SPIN;
            case "backoff", "phased-backoff" -> BACKOFF;
            default -> throw new IllegalArgumentException("unknown wait strategy '" + s + "' (block, spin, backoff)");
        };
    }
}
