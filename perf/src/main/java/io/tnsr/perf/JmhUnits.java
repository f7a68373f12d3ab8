package io.tnsr.perf;

/** JMH's score units. */
public final class JmhUnits {
    private JmhUnits() {
    }

    /** Nanoseconds in one unit of a JMH time score ("ns/op", "us/op", "ms/op", "s/op"). */
    public static double nanosPer(String unit) {
        int slash = unit.indexOf('/');
        String u = slash < 0 ? unit : unit.substring(0, slash);
        return switch (u) {
            case "ns" -> 1;
            case "us" -> 1e3;
            case "ms" -> 1e6;
            case "s" -> 1e9;
            case "min" -> 60e9;
            default -> throw new IllegalArgumentException("not a time per operation: " + unit);
        };
    }
}
