package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * A quantized tensor repacked at load into heap arrays: its quants ({@code quants}, block after block) and its
 * block scales (and, for the types with mins, mins) as floats, the K-quants' integer scales among the quants. The
 * values, and so every decoded bit, are the file's; only the layout changes, to one the one-token kernels stream
 * from plain arrays:
 * <ul>
 * <li>Q8_0, Q4_0 ({@code [d: f16][payload]} blocks of 32): the payload bytes as they are (32 int8, or 16 bytes
 * of nibbles), {@code scales[b]} = d;</li>
 * <li>Q4_K: per super-block its eight 6-bit sc and eight m as bytes, then its 128 bytes of nibbles as they are;
 * {@code scales[k]} = d and {@code mins[k]} = dmin per super-block ({@link Q4KMatrix#repack});</li>
 * <li>Q6_K: each element's 6-bit value minus 32 as one int8, in element order; per 16-element group g,
 * {@code scales[g]} = d * scales_int8[g] ({@link Q6KBlocks#repack});</li>
 * <li>Q5_0, IQ4_NL, IQ4_XS: likewise one int8 per element and one float per 32 elements, the scale as ggml's
 * dequantizer computes it ({@link Int8Blocks}); {@link Q5_0Matrix} then keeps Q5_0's as 4 bits and a bit plane;</li>
 * <li>Q4_1: the 16 bytes of nibbles of each block as they are, {@code scales[b]} = d, {@code mins[b]} = -m
 * ({@link Q4KMatrix#repackQ4_1});</li>
 * <li>Q5_K: per super-block its eight 6-bit sc and eight m as bytes, then each element's 5-bit q minus 16 as one
 * int8, in element order; {@code scales[k]} = d and {@code mins[k]} = dmin per super-block ({@link Q5KMatrix#repack});</li>
 * <li>Q2_K: the 80 bytes of scales and 2-bit quants of each super-block as they are, {@code scales[k]} = d and
 * {@code mins[k]} = dmin per super-block ({@link Q2KMatrix#repack}); Q3_K: per super-block the integer scales of its
 * 16 sub-blocks and a nibble per element, and d ({@link Q3KMatrix#repack}).</li>
 * </ul>
 * Every product above is the float product the decoder computed before (the same bits).
 *
 * <p>Why: the one-token kernels are bound by the work per weight, not by memory, and in JDK 17 the Vector API
 * loads fastest from a plain array. Reading a 34-byte-stride row (Q8_0) meant one row copy per row plus
 * unaligned scale reads in the loop; the packed arrays stream 1.5x faster (a 32000 x 768 Q8_0 matvec, one
 * thread, this machine: 8-9 G weights/s from the row copy, 12-14 from the packed arrays), and the K-quants,
 * whose 6-bit scales cost ~10 scalar operations each to unpack, gain more. llama.cpp repacks Q4_0 for its
 * AVX/NEON kernels for the same reason. Cost: the tensor's bytes live on the heap, not in the page cache, and
 * take more room: per 256 elements, Q8_0 288 bytes (file: 272), Q4_0 160 (144), Q4_K 152 (144), Q6_K 320 (210),
 * Q5_0 192 (176), IQ4_NL 288 (144), IQ4_XS 288 (136), Q3_K 148 (110), Q4_1 192 (160), Q5_K 280 (176), Q2_K 88 (84),
 * so a process needs a heap of up to {@link WeightMatrix#HEAP_PER_FILE_BYTE} x its layers' quantized tensors
 * (the stage launcher sizes it from the file).
 *
 * @param quants [blocks * payload bytes]: the payloads, in the file's block order
 * @param scales [blocks]: each block's (sub-block's, group's) scale
 * @param mins   [blocks] for Q4_K, Q5_K, Q2_K (each super-block's dmin) and Q4_1
 *               (-m), else empty
 */
record PackedBlocks(byte[] quants, float[] scales, float[] mins) {
    PackedBlocks {
        Objects.requireNonNull(quants, "quants");
        Objects.requireNonNull(scales, "scales");
        Objects.requireNonNull(mins, "mins");
        if (scales.length == 0 ? quants.length != 0 : quants.length % scales.length != 0) {
            throw new IllegalArgumentException(quants.length + " quant bytes for " + scales.length + " blocks");
        }
        if (mins.length != 0 && mins.length != scales.length) {
            throw new IllegalArgumentException(mins.length + " mins for " + scales.length + " blocks");
        }
    }

    /** Blocks without mins (every type but Q4_K). */
    PackedBlocks(byte[] quants, float[] scales) {
        this(quants, scales, new float[0]);
    }

    /** Checks that these are {@code blocksPerRow} blocks of {@code payload} bytes for each of {@code rows} rows. */
    void requireShape(String name, int rows, int blocksPerRow, int payload) {
        if (scales.length != (long) rows * blocksPerRow || quants.length != (long) rows * blocksPerRow * payload) {
            throw new IllegalArgumentException(name + ": " + scales.length + " blocks for " + rows + " rows of "
                    + blocksPerRow + " blocks");
        }
    }

    /**
     * Repacks {@code blocks} blocks (super-blocks for the K-quants) of {@code type} from {@code data}
     * (little-endian, from position 0).
     */
    static PackedBlocks unpack(ByteBuffer data, GgmlType type, int blocks) {
        if ((long) blocks * type.blockBytes() > data.capacity()) {
            throw new IllegalArgumentException(blocks + " blocks of " + type + " need " + (long) blocks * type.blockBytes()
                    + " bytes; the buffer has " + data.capacity());
        }
        return switch (type) {
            case Q8_0, Q4_0 -> scaleFirst(data, type.blockBytes(), blocks);
            case Q4_K -> Q4KMatrix.repack(data, blocks);
            case Q6_K -> Q6KBlocks.repack(data, blocks);
            case Q5_0 -> Int8Blocks.q5_0(data, blocks);
            case IQ4_NL -> Int8Blocks.iq4_nl(data, blocks);
            case IQ4_XS -> Int8Blocks.iq4_xs(data, blocks);
            case Q3_K -> Q3KMatrix.repack(data, blocks);
            case Q4_1 -> Q4KMatrix.repackQ4_1(data, blocks);
            case Q5_K -> Q5KMatrix.repack(data, blocks);
            case Q2_K -> Q2KMatrix.repack(data, blocks);
            default -> throw new IllegalArgumentException(type + " is not a repacked type");
        };
    }

    /** Blocks of {@code [d: f16][payload]}, {@code bytes} each. */
    private static PackedBlocks scaleFirst(ByteBuffer data, int bytes, int blocks) {
        int payload = bytes - 2;
        byte[] quants = new byte[Math.multiplyExact(blocks, payload)];
        float[] scales = new float[blocks];
        for (int b = 0; b < blocks; b++) {
            scales[b] = Blocks.half(data.getShort(b * bytes));
            data.get(b * bytes + 2, quants, b * payload, payload);
        }
        return new PackedBlocks(quants, scales);
    }

    /** Heap bytes {@code blocks} blocks of {@code type} take once repacked. */
    static long heapBytes(GgmlType type, long blocks) {
        return switch (type) {
            case Q8_0, Q5_0, IQ4_NL -> blocks * (32 + Float.BYTES);
            case Q4_0 -> blocks * (16 + Float.BYTES);
            case Q4_K -> blocks * (128 + 16 + 2 * Float.BYTES);
            case Q6_K -> blocks * (256 + 16 * Float.BYTES);
            case Q3_K -> blocks * (144 + Float.BYTES);
            case IQ4_XS -> blocks * (256 + 8 * Float.BYTES);
            case Q4_1 -> blocks * (16 + 2 * Float.BYTES);
            case Q5_K -> blocks * (256 + 16 + 2 * Float.BYTES);
            case Q2_K -> blocks * (80 + 2 * Float.BYTES);
            default -> throw new IllegalArgumentException(type + " is not a repacked type");
        };
    }

    /**
     * Splits tensor {@code t} of {@code file} (mapped as {@code data}); a heap too small for it is a
     * {@link GgufException} naming the tensor, its size and the heap limit, not an OutOfMemoryError later.
     */
    static PackedBlocks unpack(GgufFile file, GgufTensorInfo t, ByteBuffer data) {
        long blocks = t.elementCount() / t.type().blockSize();
        long need = heapBytes(t.type(), blocks);
        try {
            return unpack(data, t.type(), Math.toIntExact(blocks));
        } catch (OutOfMemoryError e) {
            throw WeightMatrix.heapTooSmall(file, t, need, e);
        }
    }
}
