package io.tnsr.engine.memory;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorSpecies;

/**
 * A run of little-endian memory that kernels read with vector loads: a KV-cache page, a tensor of a mapped model
 * file. Offsets are bytes from the region's start; callers keep them in bounds (checked by the JDK on every access).
 *
 * <p>JDK 17 build: the region is a direct or mapped {@link ByteBuffer}, at most 2 GiB, read with the Vector API's
 * ByteBuffer loads. The JDK 22+ build ({@code src/main/java22}) holds a {@code MemorySegment} instead, with the same
 * methods; the engine's other classes compile unchanged against either.
 */
public final class Region {
    private static final ByteOrder LE = ByteOrder.LITTLE_ENDIAN;

    private final ByteBuffer buf;
    /** The same bytes as floats, for bulk copies at 4-byte-aligned offsets. */
    private final FloatBuffer floatView;

    Region(ByteBuffer buf) {
        this.buf = buf.order(LE);
        this.floatView = this.buf.asFloatBuffer();
    }

    /** {@code bytes} zeroed bytes off the heap, freed when the region is no longer reachable. */
    public static Region allocate(long bytes) {
        if (bytes < 0 || bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("cannot allocate " + bytes + " bytes as one region: the JDK 17 build's "
                    + "limit is 2 GiB (the JDK 22+ build has none)");
        }
        return new Region(ByteBuffer.allocateDirect((int) bytes));
    }

    /** A new off-heap region holding a copy of {@code src}'s remaining bytes. */
    public static Region copyOf(ByteBuffer src) {
        ByteBuffer b = ByteBuffer.allocateDirect(src.remaining());
        b.put(src.duplicate()).clear();
        return new Region(b);
    }

    public long byteSize() {
        return buf.capacity();
    }

    /** The {@code bytes} bytes from {@code offset} as a region of their own, sharing this one's memory. */
    public Region slice(long offset, long bytes) {
        if (offset < 0 || bytes < 0 || offset + bytes > buf.capacity()) {
            throw new IndexOutOfBoundsException("slice of " + bytes + " bytes at " + offset + " of a " + buf.capacity()
                    + "-byte region");
        }
        return new Region(buf.slice((int) offset, (int) bytes));
    }

    /** A little-endian view of the whole region, for reading it once at load (repacking); at most 2 GiB. */
    public ByteBuffer asByteBuffer() {
        return buf.duplicate().order(LE);
    }

    public float getFloat(long offset) {
        return buf.getFloat((int) offset);
    }

    public void putFloat(long offset, float v) {
        buf.putFloat((int) offset, v);
    }

    public void putShort(long offset, short v) {
        buf.putShort((int) offset, v);
    }

    public short getShort(long offset) {
        return buf.getShort((int) offset);
    }

    /** The floats of one vector of species {@code s} from {@code offset}. */
    public FloatVector floats(VectorSpecies<Float> s, long offset) {
        return FloatVector.fromByteBuffer(s, buf, (int) offset, LE);
    }

    /**
     * Copies {@code n} floats of {@code src} from {@code so} to {@code offset}: a bulk copy, no vector crosses a call
     * (a vector passed to a method C2 does not inline is boxed: 96 bytes each at 512 bits). Offsets that are not a
     * multiple of 4 are copied a float at a time.
     */
    public void putFloats(long offset, float[] src, int so, int n) {
        if ((offset & 3) == 0) {
            floatView.put((int) (offset >>> 2), src, so, n);
        } else {
            for (int i = 0; i < n; i++) {
                buf.putFloat((int) offset + 4 * i, src[so + i]);
            }
        }
    }

    /** The shorts of one vector of species {@code s} from {@code offset}. */
    public ShortVector shorts(VectorSpecies<Short> s, long offset) {
        return ShortVector.fromByteBuffer(s, buf, (int) offset, LE);
    }

    /** The shorts of the lanes of {@code m} from {@code offset} (others zero; nothing past them is read). */
    public ShortVector shorts(VectorSpecies<Short> s, long offset, VectorMask<Short> m) {
        return ShortVector.fromByteBuffer(s, buf, (int) offset, LE, m);
    }
}
