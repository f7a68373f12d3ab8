package io.tnsr.engine.memory;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.channels.FileChannel;

/**
 * A file opened for reading, handing out {@link Region}s of it in place (the page cache's memory, nothing copied).
 *
 * <p>JDK 22+ build: the whole file is one mapping, of any size, and a region is a slice of it. The mapping lives
 * as long as a region of it is reachable (an automatic arena), so closing the file's channel never invalidates
 * weights still in use. The JDK 17 build maps each region on its own, at most 2 GiB.
 */
public final class MappedFile {
    /** What one region of this build can hold: anything a file can. */
    public static final long MAX_REGION_BYTES = Long.MAX_VALUE;

    private final MemorySegment whole;

    /** Maps the file's first {@code size} bytes; {@code channel} stays owned by the caller, who closes it. */
    public MappedFile(FileChannel channel, long size) throws IOException {
        this.whole = channel.map(FileChannel.MapMode.READ_ONLY, 0, size, Arena.ofAuto());
    }

    /** Bytes [offset, offset + bytes) of the file, read-only. */
    public Region region(long offset, long bytes) {
        return new Region(whole.asSlice(offset, bytes));
    }
}
