package io.tnsr.engine.model;

import io.tnsr.engine.gguf.GgufFile;

/**
 * The weights of one transformer block, mapped from the GGUF file.
 *
 * <pre>
 * attnNorm [dim]          wq [dim x dim]        wk, wv [kvDim x dim]     wo [dim x dim]
 * ffnNorm  [dim]          gate, up [ffn x dim]  down [dim x ffn]
 * </pre>
 * (matrices as rows x cols: a projection maps a vector of cols to one of rows)
 */
public record LayerWeights(int index, float[] attnNorm, WeightMatrix wq, WeightMatrix wk, WeightMatrix wv,
                           WeightMatrix wo, float[] ffnNorm, WeightMatrix gate, WeightMatrix up,
                           WeightMatrix down) {

    public static LayerWeights load(GgufFile file, LlamaConfig c, int layer) {
        String p = "blk." + layer + ".";
        int qDim = c.heads() * c.headDim();
        return new LayerWeights(layer,
                WeightMatrix.loadVector(file, p + "attn_norm.weight", c.dim()),
                WeightMatrix.load(file, p + "attn_q.weight", qDim, c.dim()),
                WeightMatrix.load(file, p + "attn_k.weight", c.kvDim(), c.dim()),
                WeightMatrix.load(file, p + "attn_v.weight", c.kvDim(), c.dim()),
                WeightMatrix.load(file, p + "attn_output.weight", c.dim(), qDim),
                WeightMatrix.loadVector(file, p + "ffn_norm.weight", c.dim()),
                WeightMatrix.load(file, p + "ffn_gate.weight", c.ffnDim(), c.dim()),
                WeightMatrix.load(file, p + "ffn_up.weight", c.ffnDim(), c.dim()),
                WeightMatrix.load(file, p + "ffn_down.weight", c.dim(), c.ffnDim()));
    }
}
