package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;

/**
 * Hyper-parameters of a llama-architecture model, read once from GGUF metadata.
 *
 * @param dim           embedding length (hidden size)
 * @param layers        block count
 * @param heads         attention (query) heads
 * @param kvHeads       key/value heads (grouped-query attention when smaller than heads)
 * @param headDim       dimension of one head: dim / heads
 * @param ffnDim        feed-forward hidden size
 * @param vocabSize     vocabulary size (rows of token_embd)
 * @param contextLength maximum positions per sequence
 * @param rmsEps        RMSNorm epsilon
 * @param ropeTheta     RoPE frequency base
 * @param ropeDim       RoPE dimension count (rotated dims at the start of each head; = headDim usually)
 */
public record LlamaConfig(int dim, int layers, int heads, int kvHeads, int headDim, int ffnDim, int vocabSize,
                          int contextLength, float rmsEps, float ropeTheta, int ropeDim) {

    public LlamaConfig {
        require(dim > 0 && layers > 0 && heads > 0 && kvHeads > 0 && ffnDim > 0 && vocabSize > 0 && contextLength > 0,
                "every size must be positive");
        require(heads % kvHeads == 0, "head count " + heads + " is not a multiple of KV head count " + kvHeads);
        require(headDim > 0 && headDim * heads == dim, "head dim " + headDim + " x " + heads + " heads != dim " + dim);
        require(ropeDim > 0 && ropeDim <= headDim && ropeDim % 2 == 0,
                "RoPE dimension count " + ropeDim + " must be even and at most the head dim " + headDim);
        require(rmsEps > 0 && ropeTheta > 0, "epsilon and RoPE base must be positive");
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new IllegalArgumentException("invalid llama config: " + what);
        }
    }

    /** Width of the K and V projections: kvHeads x headDim. */
    public int kvDim() {
        return kvHeads * headDim;
    }

    /** Query heads sharing one KV head. */
    public int groupSize() {
        return heads / kvHeads;
    }

    /** Reads the config of a {@code llama} GGUF file; errors name the file and the key. */
    public static LlamaConfig fromGguf(GgufFile file) {
        GgufMetadata m = file.metadata();
        String arch = m.getString("general.architecture", "(none)");
        if (!arch.equals("llama")) {
            throw new GgufException(file.path(), "architecture '" + arch + "' is not supported (only 'llama')");
        }
        int dim = m.getInt("llama.embedding_length");
        int heads = m.getInt("llama.attention.head_count");
        int kvHeads = m.getInt("llama.attention.head_count_kv", heads);
        if (heads <= 0 || dim % heads != 0) {
            throw new GgufException(file.path(), "llama.embedding_length " + dim
                    + " is not a multiple of llama.attention.head_count " + heads);
        }
        int headDim = dim / heads;
        int vocab;
        if (m.has("llama.vocab_size")) {
            vocab = m.getInt("llama.vocab_size");
        } else if (file.hasTensor("token_embd.weight")) {
            vocab = (int) file.tensor("token_embd.weight").dim(1);
        } else {
            vocab = m.arrayLength("tokenizer.ggml.tokens");
        }
        try {
            return new LlamaConfig(dim,
                    m.getInt("llama.block_count"),
                    heads, kvHeads, headDim,
                    m.getInt("llama.feed_forward_length"),
                    vocab,
                    m.getInt("llama.context_length"),
                    m.getFloat("llama.attention.layer_norm_rms_epsilon", 1e-5f),
                    m.getFloat("llama.rope.freq_base", 10000f),
                    m.getInt("llama.rope.dimension_count", headDim));
        } catch (IllegalArgumentException e) {
            throw new GgufException(file.path(), e.getMessage(), e);
        }
    }

    /** One line for logs: "dim 64, 5 layers, 8 heads (4 KV), FFN 172, vocab 512, context 2048". */
    public String describe() {
        return "dim " + dim + ", " + layers + " layers, " + heads + " heads (" + kvHeads + " KV), FFN " + ffnDim
                + ", vocab " + vocabSize + ", context " + contextLength;
    }
}
