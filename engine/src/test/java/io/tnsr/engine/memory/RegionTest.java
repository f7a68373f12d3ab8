package io.tnsr.engine.memory;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorMask;
import jdk.incubator.vector.VectorSpecies;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The memory access of whichever build runs the test (ByteBuffers on JDK 17, MemorySegments on 22+): little-endian
 * scalars and vectors at byte offsets, zeroed allocations, copies, and mappings past 2 GiB where the JDK allows.
 */
class RegionTest {
    private static final VectorSpecies<Float> F = FloatVector.SPECIES_PREFERRED;
    private static final VectorSpecies<Short> S = ShortVector.SPECIES_PREFERRED;

    @Test
    void scalarsAndVectorsAreLittleEndianAtAnyByteOffset() {
        Region r = Region.allocate(1024);
        assertEquals(1024, r.byteSize());
        for (int off = 0; off < 1024; off += 4) {
            assertEquals(0f, r.getFloat(off), "allocations are zeroed");
        }
        float[] src = new float[F.length()];
        for (int i = 0; i < src.length; i++) {
            src[i] = 1.5f * i - 3;
        }
        r.putFloats(6, src, 0, src.length); // unaligned on purpose
        r.putFloats(512, src, 1, src.length - 1);
        float[] back = new float[F.length()];
        r.floats(F, 6).intoArray(back, 0);
        for (int i = 0; i < src.length; i++) {
            assertEquals(src[i], back[i]);
            assertEquals(src[i], r.getFloat(6 + 4L * i));
        }
        for (int i = 1; i < src.length; i++) {
            assertEquals(src[i], r.getFloat(512 + 4L * (i - 1)), "aligned bulk copy, from an offset in the array");
        }
        assertEquals(0f, r.getFloat(512 + 4L * (src.length - 1)), "nothing past the n floats is written");
        assertThrows(IndexOutOfBoundsException.class, () -> r.putFloats(1024 - 8, src, 0, 4), "past the region's end");
        ByteBuffer le = r.asByteBuffer();
        assertEquals(ByteOrder.LITTLE_ENDIAN, le.order());
        assertEquals(Float.floatToIntBits(src[1]), Integer.reverseBytes(le.order(ByteOrder.BIG_ENDIAN).getInt(10)));
        r.putFloat(700, 42f);
        assertEquals(42f, r.getFloat(700));
    }

    @Test
    void shortsLoadWholeOrMaskedWithoutReadingPastTheMask() {
        ByteBuffer src = ByteBuffer.allocate(2 * S.length()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < S.length(); i++) {
            src.putShort(2 * i, (short) (1000 + i));
        }
        Region r = Region.copyOf(src);
        assertEquals(2L * S.length(), r.byteSize());
        assertEquals((short) 1001, r.getShort(2));
        ShortVector all = r.shorts(S, 0);
        assertEquals((short) (1000 + S.length() - 1), all.lane(S.length() - 1));
        // The last two lanes masked off, loaded from 4 bytes in: the mask keeps the load inside the region.
        VectorMask<Short> m = S.indexInRange(0, S.length() - 2);
        ShortVector part = r.shorts(S, 4, m);
        assertEquals((short) 1002, part.lane(0));
        assertEquals((short) 0, part.lane(S.length() - 1));
    }

    @Test
    void aMappedFileIsReadInPlaceAndOver2GiBOnlyWhereTheJdkCanMapIt(@TempDir Path dir) throws Exception {
        Path file = dir.resolve("sparse.bin");
        long size = 3L << 30; // sparse: no disk or memory behind the holes
        long far = size - 64;
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putFloat(0, 7.25f), 16);
            ch.write(ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN).putFloat(0, -2.5f), far);
            ch.write(ByteBuffer.allocate(1), size - 1);
        }
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            MappedFile mapped = new MappedFile(ch, size);
            assertEquals(7.25f, mapped.region(16, 4).getFloat(0));
            assertEquals(-2.5f, mapped.region(far, 64).getFloat(0), "a small region past 2 GiB");
            if (MappedFile.MAX_REGION_BYTES > Integer.MAX_VALUE) {
                Region whole = mapped.region(0, size);
                assertEquals(size, whole.byteSize());
                assertEquals(-2.5f, whole.getFloat(far), "one region of 3 GiB");
                RegionTooLargeException e = assertThrows(RegionTooLargeException.class, whole::asByteBuffer);
                assertTrue(e.getMessage().contains("ByteBuffer"), e.getMessage());
            } else {
                RegionTooLargeException e = assertThrows(RegionTooLargeException.class, () -> mapped.region(0, size));
                assertEquals(size, e.bytes());
                assertTrue(e.getMessage().contains("JDK 22"), e.getMessage());
            }
        }
    }
}
