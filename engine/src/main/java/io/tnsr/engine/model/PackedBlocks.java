package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufTensorInfo;
import java.nio.ByteBuffer;
import java.util.Locale;
import java.util.Objects;

/**
 * ggml blocks of the form {@code [d: f16][payload]} (Q8_0, Q4_0) split at load into two heap arrays: every
 * block's payload, block after block ({@code quants}), and every block's scale as a float ({@code scales}).
 * The values are the file's, bit for bit (a half converts to a float exactly); only the layout changes.
 *
 * <p>Why: the one-token kernels are bound by the work per weight, not by memory, and in JDK 17 the Vector API
 * loads fastest from a plain array. Reading a 34-byte-stride row (Q8_0) meant one row copy per row plus
 * unaligned scale reads in the loop; the packed arrays stream 1.5x faster (a 32000 x 768 Q8_0 matvec, one
 * thread, this machine: 8-9 G weights/s from the row copy, 12-14 from the packed arrays). llama.cpp repacks Q4_0
 * for its AVX/NEON kernels for the same reason. Cost: the tensor's bytes live on the heap (a GGUF file's
 * Q8_0 tensor of 34 bytes per block takes 36 here, Q4_0's 18 takes 20), not in the page cache, so a process
 * needs a heap as large as its layers' quantized tensors (the stage launcher sizes it from the file).
 *
 * @param quants [blocks * payload bytes]: the payloads, in the file's block order
 * @param scales [blocks]: each block's {@code d}
 */
record PackedBlocks(byte[] quants, float[] scales) {
    PackedBlocks {
        Objects.requireNonNull(quants, "quants");
        Objects.requireNonNull(scales, "scales");
        if (scales.length == 0 ? quants.length != 0 : quants.length % scales.length != 0) {
            throw new IllegalArgumentException(quants.length + " quant bytes for " + scales.length + " blocks");
        }
    }

    /** Checks that these are {@code blocksPerRow} blocks of {@code payload} bytes for each of {@code rows} rows. */
    void requireShape(String name, int rows, int blocksPerRow, int payload) {
        if (scales.length != (long) rows * blocksPerRow || quants.length != (long) rows * blocksPerRow * payload) {
            throw new IllegalArgumentException(name + ": " + scales.length + " blocks for " + rows + " rows of "
                    + blocksPerRow + " blocks");
        }
    }

    /** Splits {@code blocks} blocks of {@code type} from {@code data} (little-endian, from position 0). */
    static PackedBlocks unpack(ByteBuffer data, GgmlType type, int blocks) {
        int bytes = type.blockBytes();
        int payload = bytes - 2;
        if ((long) blocks * bytes > data.capacity()) {
            throw new IllegalArgumentException(blocks + " blocks of " + type + " need " + (long) blocks * bytes
                    + " bytes; the buffer has " + data.capacity());
        }
        byte[] quants = new byte[Math.multiplyExact(blocks, payload)];
        float[] scales = new float[blocks];
        for (int b = 0; b < blocks; b++) {
            scales[b] = Blocks.half(data.getShort(b * bytes));
            data.get(b * bytes + 2, quants, b * payload, payload);
        }
        return new PackedBlocks(quants, scales);
    }

    /**
     * Splits tensor {@code t} of {@code file} (mapped as {@code data}); a heap too small for it is a
     * {@link GgufException} naming the tensor, its size and the heap limit, not an OutOfMemoryError later.
     */
    static PackedBlocks unpack(GgufFile file, GgufTensorInfo t, ByteBuffer data) {
        long blocks = t.elementCount() / t.type().blockSize();
        long need = blocks * (t.type().blockBytes() - 2 + Float.BYTES);
        try {
            return unpack(data, t.type(), Math.toIntExact(blocks));
        } catch (OutOfMemoryError e) {
            String size = String.format(Locale.ROOT, "%.1f MiB", need / 1048576.0);
            throw new GgufException(file.path(), "tensor '" + t.name() + "' (" + t.type() + ", " + size
                    + " once repacked) does not fit in the Java heap (max " + (Runtime.getRuntime().maxMemory() >> 20)
                    + " MiB): raise the heap limit to at least the size of the model's quantized tensors"
                    + " (java -Xmx<size>; for the tools/ commands, TNSR_JAVA_OPTS=-Xmx<size>)", e);
        }
    }
}
