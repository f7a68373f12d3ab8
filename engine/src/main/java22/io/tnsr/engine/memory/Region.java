package io.tnsr.engine.memory;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorSpecies;

/**
 * A run of little-endian memory that kernels read with vector loads: a KV-cache page, a tensor of a mapped model
 * file. Offsets are bytes from the region's start; callers keep them in bounds (checked by the JDK on every access).
 *
 * <p>JDK 22+ build: the region is a {@link MemorySegment} (off-heap or mapped, any size), read with the Vector API's
 * segment loads. The JDK 17 build ({@code src/main/java17}) holds a ByteBuffer instead, with the same methods; the
 * engine's other classes compile unchanged against either.
 */
public final class Region {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;
    private static final ValueLayout.OfFloat FLOAT = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(LE);
    private static final ValueLayout.OfShort SHORT = ValueLayout.JAVA_SHORT_UNALIGNED.withOrder(LE);
    /** Page alignment for allocations: vector loads of a KV page never straddle a cache line needlessly. */
    private static final long ALIGNMENT = 64;

    private final MemorySegment seg;

    Region(MemorySegment seg) {
        this.seg = seg;
    }

    /** {@code bytes} zeroed bytes off the heap, freed when the region is no longer reachable. */
    public static Region allocate(long bytes) {
        if (bytes < 0) {
            throw new IllegalArgumentException("cannot allocate " + bytes + " bytes");
        }
        return new Region(Arena.ofAuto().allocate(bytes, ALIGNMENT));
    }

    /** A new off-heap region holding a copy of {@code src}'s remaining bytes. */
    public static Region copyOf(ByteBuffer src) {
        MemorySegment m = Arena.ofAuto().allocate(src.remaining(), ALIGNMENT);
        m.copyFrom(MemorySegment.ofBuffer(src));
        return new Region(m);
    }

    public long byteSize() {
        return seg.byteSize();
    }

    /** The {@code bytes} bytes from {@code offset} as a region of their own, sharing this one's memory. */
    public Region slice(long offset, long bytes) {
        return new Region(seg.asSlice(offset, bytes));
    }

    /** A little-endian view of the whole region, for reading it once at load (repacking); at most 2 GiB. */
    public ByteBuffer asByteBuffer() {
        if (seg.byteSize() > Integer.MAX_VALUE) {
            throw new RegionTooLargeException(seg.byteSize(), Integer.MAX_VALUE, "the 2 GiB of one ByteBuffer");
        }
        return seg.asByteBuffer().order(LE);
    }

    public float getFloat(long offset) {
        return seg.get(FLOAT, offset);
    }

    public void putFloat(long offset, float v) {
        seg.set(FLOAT, offset, v);
    }

    public void putShort(long offset, short v) {
        seg.set(SHORT, offset, v);
    }

    public short getShort(long offset) {
        return seg.get(SHORT, offset);
    }

    /** The floats of one vector of species {@code s} from {@code offset}. */
    public FloatVector floats(VectorSpecies<Float> s, long offset) {
        return FloatVector.fromMemorySegment(s, seg, offset, LE);
    }

    /**
     * Copies {@code n} floats of {@code src} from {@code so} to {@code offset}: a bulk copy, no vector crosses a call
     * (a vector passed to a method C2 does not inline is boxed: 96 bytes each at 512 bits).
     */
    public void putFloats(long offset, float[] src, int so, int n) {
        MemorySegment.copy(src, so, seg, FLOAT, offset, n);
    }

    /** The shorts of one vector of species {@code s} from {@code offset}. */
    public ShortVector shorts(VectorSpecies<Short> s, long offset) {
        return ShortVector.fromMemorySegment(s, seg, offset, LE);
    }

    /** The shorts of the lanes of {@code m} from {@code offset} (others zero; nothing past them is read). */
    public ShortVector shorts(VectorSpecies<Short> s, long offset, VectorMask<Short> m) {
        return ShortVector.fromMemorySegment(s, seg, offset, LE, m);
    }
}
