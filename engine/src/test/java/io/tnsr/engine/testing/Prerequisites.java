package io.tnsr.engine.testing;

import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * The project's rule for a test whose prerequisite (shared data, a tool, root for network namespaces) is not on this
 * machine: with the environment variable {@code CI=true} the test fails (CI must have it); otherwise it is skipped.
 * Either way the reason is printed to stderr, so that a skip is never silent.
 */
public final class Prerequisites {
    private Prerequisites() {
    }

    /**
     * Fails (CI) or skips (elsewhere) the calling test; never returns normally.
     *
     * @param msg  what is missing and where it was looked for
     * @param inCi what the failure message adds in CI: "[CI=true: IN_CI]", e.g. "missing data is a failure"
     */
    public static <T> T missing(String msg, String inCi) {
        if ("true".equalsIgnoreCase(System.getenv("CI"))) {
            System.err.println("FAIL: " + msg);
            return Assertions.fail(msg + " [CI=true: " + inCi + "]");
        }
        System.err.println("SKIPPED: " + msg);
        Assumptions.abort(msg);
        throw new AssertionError("unreachable");
    }
}
