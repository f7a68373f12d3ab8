package io.tnsr.engine.memory;

/** A region larger than this build can hold in one piece, or hand out as one ByteBuffer. */
public final class RegionTooLargeException extends RuntimeException {
    private final long bytes;

    /** @param what what the limit is, for the message ("a ByteBuffer's limit", ...) */
    public RegionTooLargeException(long bytes, long limit, String what) {
        super(bytes + " bytes in one piece, over " + what + " (" + limit + " bytes)");
        this.bytes = bytes;
    }

    public long bytes() {
        return bytes;
    }
}
