package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;

/**
 * The weights of one transformer block, mapped from the GGUF file.
 *
 * <pre>
 * attnNorm [dim]          wq [qDim x dim]       wk, wv [kvDim x dim]     wo [dim x qDim]
 * qBias [qDim], kBias, vBias [kvDim]            (null unless the file has them: qwen2)
 * qNorm, kNorm [headDim]                        (null unless the architecture has them: qwen3)
 * ffnNorm  [dim]          gate, up [ffn x dim]  down [dim x ffn]
 * </pre>
 * (matrices as rows x cols: a projection maps a vector of cols to one of rows; qDim = heads x headDim,
 * kvDim = kvHeads x headDim)
 */
public record LayerWeights(int index, float[] attnNorm, WeightMatrix wq, WeightMatrix wk, WeightMatrix wv,
                           float[] qBias, float[] kBias, float[] vBias, float[] qNorm, float[] kNorm,
                           WeightMatrix wo, float[] ffnNorm, WeightMatrix gate, WeightMatrix up,
                           WeightMatrix down) {

    public static LayerWeights load(GgufFile file, LlamaConfig c, int layer) {
        String p = "blk." + layer + ".";
        int qDim = c.qDim();
        boolean biases = switch (c.arch().biases()) {
            case NONE -> false;
            case OPTIONAL -> file.hasTensor(p + "attn_q.bias");
            case REQUIRED -> {
                for (String b : new String[] {"attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
                    if (!file.hasTensor(p + b)) {
                        throw new GgufException(file.path(), "architecture '" + c.arch().ggufName() + "' needs tensor '"
                                + p + b + "', which the file does not have");
                    }
                }
                yield true;
            }
        };
        boolean qkNorm = c.arch().qkNorm();
        return new LayerWeights(layer,
                WeightMatrix.loadVector(file, p + "attn_norm.weight", c.dim()),
                WeightMatrix.load(file, p + "attn_q.weight", qDim, c.dim()),
                WeightMatrix.load(file, p + "attn_k.weight", c.kvDim(), c.dim()),
                WeightMatrix.load(file, p + "attn_v.weight", c.kvDim(), c.dim()),
                biases ? WeightMatrix.loadVector(file, p + "attn_q.bias", qDim) : null,
                biases ? WeightMatrix.loadVector(file, p + "attn_k.bias", c.kvDim()) : null,
                biases ? WeightMatrix.loadVector(file, p + "attn_v.bias", c.kvDim()) : null,
                qkNorm ? WeightMatrix.loadVector(file, p + "attn_q_norm.weight", c.headDim()) : null,
                qkNorm ? WeightMatrix.loadVector(file, p + "attn_k_norm.weight", c.headDim()) : null,
                WeightMatrix.load(file, p + "attn_output.weight", c.dim(), qDim),
                WeightMatrix.loadVector(file, p + "ffn_norm.weight", c.dim()),
                WeightMatrix.load(file, p + "ffn_gate.weight", c.ffnDim(), c.dim()),
                WeightMatrix.load(file, p + "ffn_up.weight", c.ffnDim(), c.dim()),
                WeightMatrix.load(file, p + "ffn_down.weight", c.dim(), c.ffnDim()));
    }
}
