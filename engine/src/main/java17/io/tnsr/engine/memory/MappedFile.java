package io.tnsr.engine.memory;

import java.io.IOException;
import java.nio.channels.FileChannel;

/**
 * A file opened for reading, handing out {@link Region}s of it in place (the page cache's memory, nothing copied).
 *
 * <p>JDK 17 build: each region is its own mapping ({@link FileChannel#map}), so one region is at most 2 GiB; a
 * larger one is refused with {@link RegionTooLargeException}. The JDK 22+ build maps the whole file once.
 */
public final class MappedFile {
    /** What one region of this build can hold. */
    public static final long MAX_REGION_BYTES = Integer.MAX_VALUE;

    private final FileChannel channel;

    /** {@code channel} stays owned by the caller, who closes it; regions stay valid after that. */
    public MappedFile(FileChannel channel, long size) {
        this.channel = channel;
    }

    /** Bytes [offset, offset + bytes) of the file, read-only. */
    public Region region(long offset, long bytes) throws IOException {
        if (bytes > MAX_REGION_BYTES) {
            throw new RegionTooLargeException(bytes, MAX_REGION_BYTES,
                    "the 2 GiB of one mapping on JDK 17 (JDK 22 and later have no such limit)");
        }
        return new Region(channel.map(FileChannel.MapMode.READ_ONLY, offset, bytes));
    }
}
