package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.gguf.GgufMetadata;

/**
 * Hyper-parameters of a model of one of the {@link Architecture}s (llama, qwen2, qwen3), read once from GGUF
 * metadata (keys prefixed by the architecture's name: {@code llama.block_count}, {@code qwen2.block_count}, ...).
 *
 * @param arch          the architecture: RoPE mode, Q/K/V biases, per-head Q/K norms
 * @param dim           embedding length (hidden size): the width of the residual stream, what crosses stages
 * @param layers        block count
 * @param heads         attention (query) heads
 * @param kvHeads       key/value heads (grouped-query attention when smaller than heads)
 * @param headDim       dimension of one head: {@code <arch>.attention.key_length}, else dim / heads
 * @param ffnDim        feed-forward hidden size
 * @param vocabSize     vocabulary size (rows of token_embd)
 * @param contextLength maximum positions per sequence
 * @param rmsEps        RMSNorm epsilon (also of the per-head Q/K norms)
 * @param ropeTheta     RoPE frequency base
 * @param ropeDim       RoPE dimension count (rotated dims at the start of each head; = headDim usually)
 */
public record LlamaConfig(Architecture arch, int dim, int layers, int heads, int kvHeads, int headDim, int ffnDim,
                          int vocabSize, int contextLength, float rmsEps, float ropeTheta, int ropeDim) {

    public LlamaConfig {
        require(arch != null, "no architecture");
        require(dim > 0 && layers > 0 && heads > 0 && kvHeads > 0 && ffnDim > 0 && vocabSize > 0 && contextLength > 0,
                "every size must be positive, got dim " + dim + ", layers " + layers + ", heads " + heads + ", KV heads " + kvHeads
                        + ", FFN " + ffnDim + ", vocab " + vocabSize + ", context " + contextLength);
        require(heads % kvHeads == 0, "head count " + heads + " is not a multiple of KV head count " + kvHeads);
        require(headDim > 0, "head dim " + headDim + " must be positive");
        require(ropeDim > 0 && ropeDim <= headDim && ropeDim % 2 == 0,
                "RoPE dimension count " + ropeDim + " must be even and at most the head dim " + headDim);
        require(rmsEps > 0 && ropeTheta > 0, "epsilon and RoPE base must be positive");
    }

    /** A llama-architecture config. */
    public LlamaConfig(int dim, int layers, int heads, int kvHeads, int headDim, int ffnDim, int vocabSize,
                       int contextLength, float rmsEps, float ropeTheta, int ropeDim) {
        this(Architecture.LLAMA, dim, layers, heads, kvHeads, headDim, ffnDim, vocabSize, contextLength, rmsEps,
                ropeTheta, ropeDim);
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new IllegalArgumentException("invalid model config: " + what);
        }
    }

    /** Width of the K and V projections, and of one position of one layer in the KV cache: kvHeads x headDim. */
    public int kvDim() {
        return kvHeads * headDim;
    }

    /** Width of the Q projection and of the attention output (wo's input): heads x headDim, which may differ from dim. */
    public int qDim() {
        return heads * headDim;
    }

    /** Query heads sharing one KV head. */
    public int groupSize() {
        return heads / kvHeads;
    }

    /**
     * Reads the config of a GGUF file of a supported architecture; errors name the file and the key, and a file
     * of another architecture is refused naming the ones supported.
     */
    public static LlamaConfig fromGguf(GgufFile file) {
        GgufMetadata m = file.metadata();
        String name = m.getString("general.architecture", "(none)");
        Architecture arch = Architecture.fromGgufName(name);
        if (arch == null) {
            throw new GgufException(file.path(), "architecture '" + name + "' is not supported (supported: "
                    + Architecture.supportedList() + ")");
        }
        String a = arch.ggufName() + ".";
        int dim = m.getInt(a + "embedding_length");
        int heads = m.getInt(a + "attention.head_count");
        int kvHeads = m.getInt(a + "attention.head_count_kv", heads);
        int headDim;
        if (m.has(a + "attention.key_length")) {
            headDim = m.getInt(a + "attention.key_length");
            int valueLength = m.getInt(a + "attention.value_length", headDim);
            if (valueLength != headDim) {
                throw new GgufException(file.path(), a + "attention.value_length " + valueLength
                        + " differs from " + a + "attention.key_length " + headDim + ", which this engine does not support");
            }
        } else {
            if (heads <= 0 || dim % heads != 0) {
                throw new GgufException(file.path(), a + "embedding_length " + dim
                        + " is not a multiple of " + a + "attention.head_count " + heads);
            }
            headDim = dim / heads;
        }
        int vocab;
        if (m.has(a + "vocab_size")) {
            vocab = m.getInt(a + "vocab_size");
        } else if (file.hasTensor("token_embd.weight")) {
            vocab = (int) file.tensor("token_embd.weight").dim(1);
        } else {
            vocab = m.arrayLength("tokenizer.ggml.tokens");
        }
        try {
            return new LlamaConfig(arch, dim,
                    m.getInt(a + "block_count"),
                    heads, kvHeads, headDim,
                    m.getInt(a + "feed_forward_length"),
                    vocab,
                    m.getInt(a + "context_length"),
                    m.getFloat(a + "attention.layer_norm_rms_epsilon", 1e-5f),
                    m.getFloat(a + "rope.freq_base", 10000f),
                    m.getInt(a + "rope.dimension_count", headDim));
        } catch (IllegalArgumentException e) {
            throw new GgufException(file.path(), e.getMessage(), e);
        }
    }

    /**
     * One line for logs: "dim 64, 5 layers, 8 heads (4 KV), FFN 172, vocab 512, context 2048"; other architectures
     * than llama, and a head size other than dim / heads, are named too ("qwen3, dim 256, ... 4 heads of 128 ...").
     */
    public String describe() {
        String heading = arch == Architecture.LLAMA ? "" : arch.ggufName() + ", ";
        String headSize = headDim * heads == dim ? "" : " of " + headDim;
        return heading + "dim " + dim + ", " + layers + " layers, " + heads + " heads" + headSize + " (" + kvHeads
                + " KV), FFN " + ffnDim + ", vocab " + vocabSize + ", context " + contextLength;
    }
}
