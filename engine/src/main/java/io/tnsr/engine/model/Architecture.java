package io.tnsr.engine.model;

import java.util.Arrays;
import java.util.stream.Collectors;

/**
 * The model architectures the engine runs: llama and the two that differ from it only inside attention. Each
 * is named by GGUF's {@code general.architecture}, which also prefixes its hyper-parameter keys
 * ({@code qwen2.block_count}, ...). What differs, as llama.cpp implements them:
 * <pre>
 *            RoPE pairs                      Q/K/V biases    per-head RMSNorm of Q and K (before RoPE)
 * llama      NORMAL: (2j, 2j+1)              if present      no
 * qwen2      NEOX:   (j, j + ropeDim/2)      required        no
 * qwen3      NEOX:   (j, j + ropeDim/2)      no              required (attn_q_norm, attn_k_norm)
 * </pre>
 * All three may have a head size other than dim / heads ({@code <arch>.attention.key_length}; Qwen3 usually does)
 * and may tie the classifier to {@code token_embd.weight} (no {@code output.weight}).
 */
public enum Architecture {
    LLAMA("llama", RopeMode.NORMAL, Biases.OPTIONAL, false),
    QWEN2("qwen2", RopeMode.NEOX, Biases.REQUIRED, false),
    QWEN3("qwen3", RopeMode.NEOX, Biases.NONE, true);

    /** Which dimensions of a head RoPE rotates together. */
    public enum RopeMode {
        /** Adjacent pairs (x[2j], x[2j+1]): llama.cpp's LLAMA_ROPE_TYPE_NORM. */
        NORMAL,
        /** The two halves: (x[j], x[j + ropeDim/2]): llama.cpp's LLAMA_ROPE_TYPE_NEOX. */
        NEOX
    }

    /** Whether blk.N.attn_{q,k,v}.bias are loaded. */
    public enum Biases {
        /** Loaded when the file has them (llama.cpp's llama loader treats them as optional). */
        OPTIONAL,
        /** Every layer must have all three. */
        REQUIRED,
        /** Not part of the architecture: not read. */
        NONE
    }

    private final String ggufName;
    private final RopeMode ropeMode;
    private final Biases biases;
    private final boolean qkNorm;

    Architecture(String ggufName, RopeMode ropeMode, Biases biases, boolean qkNorm) {
        this.ggufName = ggufName;
        this.ropeMode = ropeMode;
        this.biases = biases;
        this.qkNorm = qkNorm;
    }

    /** The value of {@code general.architecture}, and the prefix of the architecture's metadata keys. */
    public String ggufName() {
        return ggufName;
    }

    public RopeMode ropeMode() {
        return ropeMode;
    }

    public Biases biases() {
        return biases;
    }

    /** Whether each head of Q and of K is RMS-normalized (weights of headDim) before RoPE. */
    public boolean qkNorm() {
        return qkNorm;
    }

    /** "llama, qwen2, qwen3": for error messages. */
    public static String supportedList() {
        return Arrays.stream(values()).map(Architecture::ggufName).collect(Collectors.joining(", "));
    }

    /** The architecture called {@code name} in GGUF, or null if the engine does not run it. */
    public static Architecture fromGgufName(String name) {
        for (Architecture a : values()) {
            if (a.ggufName.equals(name)) {
                return a;
            }
        }
        return null;
    }
}
