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

/** Q8_0 and Q4_0 blocks split into quants and float scales keep the file's values, and bad shapes are refused. */
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
        WeightMatrix m = new Q8_0Matrix("w", 3, 64, PackedBlocks.unpack(b, GgmlType.Q8_0, 6));
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
}
