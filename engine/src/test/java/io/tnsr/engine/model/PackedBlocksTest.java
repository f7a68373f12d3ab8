package io.tnsr.engine.model;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.kernels.Float16;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Quantized blocks split into quants and float scales keep the file's values, and bad shapes are refused. */
class PackedBlocksTest {

    /** Blocks of {@code type} with random payloads and scale i * 0.25 - 1 (exact in half precision). */
    private static ByteBuffer blocks(GgmlType type, int n, SplittableRandom rnd) {
        ByteBuffer b = ByteBuffer.allocate(n * type.blockBytes()).order(ByteOrder.LITTLE_ENDIAN);
        for (int i = 0; i < n; i++) {
            b.putShort(i * type.blockBytes(), Float16.fromFloat(i * 0.25f - 1));
            for (int j = 2; j < type.blockBytes(); j++) {
                b.put(i * type.blockBytes() + j, (byte) rnd.nextInt(256));
            }
        }
        return b;
    }

    @Test
    void payloadsAndScalesAreTheFilesBlockByBlock() {
        for (GgmlType type : new GgmlType[] {GgmlType.Q8_0, GgmlType.Q4_0}) {
            ByteBuffer b = blocks(type, 7, new SplittableRandom(3));
            PackedBlocks p = PackedBlocks.unpack(b, type, 7);
            int payload = type.blockBytes() - 2;
            assertEquals(7 * payload, p.quants().length);
            for (int i = 0; i < 7; i++) {
                assertEquals(i * 0.25f - 1, p.scales()[i], 0f, type + " scale " + i);
                for (int j = 0; j < payload; j++) {
                    assertEquals(b.get(i * type.blockBytes() + 2 + j), p.quants()[i * payload + j], type + " block " + i);
                }
            }
        }
    }

    @Test
    void aMatrixDecodesTheSameRowsFromPackedBlocks() {
        // 3 rows of 64 (2 blocks each): row r decodes to quant * scale of its own blocks.
        ByteBuffer b = blocks(GgmlType.Q8_0, 6, new SplittableRandom(5));
        WeightMatrix m = Int8PanelMatrix.q8_0("w", 3, 64, PackedBlocks.unpack(b, GgmlType.Q8_0, 6));
        float[] row = new float[64];
        m.readRow(2, row, 0);
        for (int e = 0; e < 64; e++) {
            int block = 4 + e / 32;
            assertEquals(b.get(block * 34 + 2 + e % 32) * (block * 0.25f - 1), row[e], 0f, "element " + e);
        }
    }

    @Test
    void tooFewBytesOrMismatchedShapesAreRefused() {
        ByteBuffer b = blocks(GgmlType.Q4_0, 2, new SplittableRandom(1));
        IllegalArgumentException short_ = assertThrows(IllegalArgumentException.class,
                () -> PackedBlocks.unpack(b, GgmlType.Q4_0, 3));
        assertTrue(short_.getMessage().contains("3 blocks of Q4_0 need 54 bytes; the buffer has 36"), short_.getMessage());
        PackedBlocks two = PackedBlocks.unpack(b, GgmlType.Q4_0, 2);
        IllegalArgumentException shape = assertThrows(IllegalArgumentException.class,
                () -> new Q4_0Matrix("w", 2, 64, two));
        assertTrue(shape.getMessage().contains("w: 2 blocks for 2 rows of 2 blocks"), shape.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new PackedBlocks(new byte[33], new float[2]));
        assertArrayEquals(new float[0], new PackedBlocks(new byte[0], new float[0]).scales());
    }

    @Test
    void everyRepackedTypeTakesTheHeapItsSizeFormulaSaysWithinTheLaunchersBound() {
        for (GgmlType type : new GgmlType[] {GgmlType.Q8_0, GgmlType.Q4_0, GgmlType.Q4_K, GgmlType.Q6_K, GgmlType.Q5_0,
                GgmlType.IQ4_NL, GgmlType.IQ4_XS}) {
            int cols = 2 * type.blockSize();
            PackedBlocks p = PackedBlocks.unpack(BlockDecoderTest.randomMatrix(type, 3, cols, 9), type, 6);
            long heap = p.quants().length + (long) Float.BYTES * (p.scales().length + p.mins().length);
            assertEquals(PackedBlocks.heapBytes(type, 6), heap, type.toString());
            assertTrue(heap <= WeightMatrix.HEAP_PER_FILE_BYTE * 6 * type.blockBytes(),
                    type + ": " + heap + " heap bytes for " + 6 * type.blockBytes() + " in the file");
            assertEquals(type == GgmlType.Q4_K ? p.scales().length : 0, p.mins().length, type + " mins");
        }
        IllegalArgumentException short_ = assertThrows(IllegalArgumentException.class,
                () -> PackedBlocks.unpack(BlockDecoderTest.randomMatrix(GgmlType.Q6_K, 1, 256, 1), GgmlType.Q6_K, 2));
        assertTrue(short_.getMessage().contains("2 blocks of Q6_K need 420 bytes; the buffer has 210"), short_.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new PackedBlocks(new byte[32], new float[2], new float[1]));
        PackedBlocks noMins = PackedBlocks.unpack(BlockDecoderTest.randomMatrix(GgmlType.Q6_K, 1, 256, 1), GgmlType.Q6_K, 1);
        IllegalArgumentException q4k = assertThrows(IllegalArgumentException.class,
                () -> new Q4KMatrix("w", 1, 256, new PackedBlocks(new byte[144], new float[1])));
        assertTrue(q4k.getMessage().contains("w: Q4_K needs a min per super-block"), q4k.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Int8PanelMatrix.q6_K("w", 2, 256, noMins));
    }
}
