package io.tnsr.engine.gguf;

import java.util.Arrays;

/**
 * One entry of a GGUF file's tensor table.
 *
 * @param name       tensor name, e.g. {@code blk.0.attn_q.weight}
 * @param dims       ggml dimensions, innermost first: a matrix of R rows of C columns is {@code [C, R]}
 * @param type       element type
 * @param dataOffset offset of the tensor's bytes from the start of the file
 * @param byteSize   number of bytes the tensor occupies
 */
public record GgufTensorInfo(String name, long[] dims, GgmlType type, long dataOffset, long byteSize) {

    public GgufTensorInfo {
        dims = dims.clone();
    }

    /** Product of all dimensions. */
    public long elementCount() {
        long n = 1;
        for (long d : dims) {
            n *= d;
        }
        return n;
    }

    /** ggml dimension {@code i} (innermost first), 1 beyond the tensor's rank. */
    public long dim(int i) {
        return i < dims.length ? dims[i] : 1;
    }

    @Override
    public long[] dims() {
        return dims.clone();
    }

    /** Shape as ggml prints it, innermost first, e.g. {@code [64, 512]}. */
    public String shapeString() {
        return Arrays.toString(dims);
    }

    @Override
    public String toString() {
        return name + " " + type + " " + shapeString() + " @" + dataOffset;
    }
}
