package io.tnsr.engine.metrics;

/**
 * What a metric's values are measured from, as far as coordinated omission goes (Gil Tene's term for a load
 * generator that waits for the system before sending, and so never measures the waits it caused).
 *
 * <ul>
 *   <li><b>corrected</b>: each value is measured from when the work was <i>meant</i> to start (a request's
 *       intended admission time), so time spent waiting behind a slow pipeline is counted, however long.</li>
 *   <li><b>uncorrected</b>: per-frame service or transport times recorded as they happened. In this pipeline
 *       a micro-batch sends its next frame only when its previous one came back (a closed loop), so a stall
 *       delays the frames that would have been sent rather than showing up in them: these figures describe
 *       the frames that ran, not the work that waited. There is no fixed expected interval between frames to
 *       correct them with ({@code recordValueWithExpectedInterval} would invent samples), so they are left
 *       uncorrected and marked so.</li>
 * </ul>
 *
 * @param corrected whether values are measured from an intended start time
 * @param note      one line for people: what the values are measured from, or why they are not corrected
 */
public record Correction(boolean corrected, String note) {

    /** Per-frame times of the pipeline's internals (hops, queue wait, compute, residence, step round trip). */
    public static final Correction PER_FRAME = new Correction(false,
            "per-frame time recorded as it happened; frames are sent when their micro-batch's previous frame returns "
                    + "(closed loop), so stalls delay frames instead of appearing in them");

    public Correction {
        if (note == null || note.isBlank() || note.indexOf('\n') >= 0 || note.indexOf(']') >= 0) {
            throw new IllegalArgumentException("a correction note is one non-empty line without ']': " + note);
        }
    }

    /** Values measured from each request's intended start, described by {@code from}. */
    public static Correction fromIntendedStart(String from) {
        return new Correction(true, from);
    }

    /** Values not corrected, for the reason given. */
    public static Correction uncorrected(String why) {
        return new Correction(false, why);
    }

    /** "corrected: NOTE" or "uncorrected: NOTE", as the logs and the report write it. */
    public String describe() {
        return (corrected ? "corrected: " : "uncorrected: ") + note;
    }

    /** The inverse of {@link #describe()}; null when {@code s} is not in that form. */
    public static Correction parse(String s) {
        if (s.startsWith("corrected: ")) {
            return new Correction(true, s.substring("corrected: ".length()));
        }
        if (s.startsWith("uncorrected: ")) {
            return new Correction(false, s.substring("uncorrected: ".length()));
        }
        return null;
    }
}
