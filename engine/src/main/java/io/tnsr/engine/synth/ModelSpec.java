package io.tnsr.engine.synth;

import io.tnsr.engine.gguf.GgmlType;
import java.util.Locale;

/**
 * The shape of a synthetic llama model: every size, the weight type, and the seed of its random weights.
 * Quantized types (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q2_K) apply to every matrix, the embedding and classifier
 * included; norms stay F32. The K-quants come in super-blocks of 256, so they need dim and FFN length multiples of 256
 * (stories110M's 768 and 2048; not tiny's 64 or stories15M's 288).
 *
 * @param name        written as general.name
 * @param tied        no output.weight: the classifier reuses token_embd.weight
 * @param ropeFactors  write a rope_freqs.weight tensor (Llama 3.1 style frequency factors)
 * @param chatTemplate Jinja text written as {@code tokenizer.chat_template} (what a chat endpoint renders
 *                     conversations with), or null for none
 */
public record ModelSpec(String name, int dim, int layers, int heads, int kvHeads, int ffnDim, int vocabSize,
                        int contextLength, boolean tied, GgmlType type, long seed, boolean ropeFactors, String chatTemplate) {

    /** Smallest vocabulary: unk, BOS, EOS, 256 byte tokens and a few pieces. */
    public static final int MIN_VOCAB = 300;

    /** A spec without a chat template. */
    public ModelSpec(String name, int dim, int layers, int heads, int kvHeads, int ffnDim, int vocabSize,
                     int contextLength, boolean tied, GgmlType type, long seed, boolean ropeFactors) {
        this(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, null);
    }

    public ModelSpec {
        if (dim <= 0 || layers <= 0 || heads <= 0 || kvHeads <= 0 || ffnDim <= 0 || contextLength <= 0) {
            throw new IllegalArgumentException("every size must be positive");
        }
        if (dim % heads != 0 || heads % kvHeads != 0) {
            throw new IllegalArgumentException("dim " + dim + " must be a multiple of heads " + heads
                    + ", and heads a multiple of KV heads " + kvHeads);
        }
        if ((dim / heads) % 2 != 0) {
            throw new IllegalArgumentException("head dim " + dim / heads + " must be even for RoPE");
        }
        if (vocabSize < MIN_VOCAB) {
            throw new IllegalArgumentException("vocabulary must have at least " + MIN_VOCAB + " tokens, got " + vocabSize);
        }
        if (type != GgmlType.F32 && type != GgmlType.F16 && type != GgmlType.Q8_0 && type != GgmlType.Q4_0
                && type != GgmlType.Q4_K && type != GgmlType.Q6_K && type != GgmlType.Q4_1 && type != GgmlType.Q5_K
                && type != GgmlType.Q2_K) {
            throw new IllegalArgumentException("synthetic weights can be F32, F16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K or Q2_K, not " + type);
        }
        if (type.blockSize() > 1 && (dim % type.blockSize() != 0 || ffnDim % type.blockSize() != 0)) {
            throw new IllegalArgumentException(type + " weights need dim and FFN length multiples of "
                    + type.blockSize() + ", got " + dim + " and " + ffnDim);
        }
    }

    /** The shape of llama2.c's stories15M: dim 288, 6 layers, 6 heads, FFN 768, vocab 32000, tied classifier. */
    public static ModelSpec stories15M() {
        return new ModelSpec("synthetic-stories15M", 288, 6, 6, 6, 768, 32000, 256, true, GgmlType.F32, 42, false);
    }

    /** The shape of llama2.c's stories110M: dim 768, 12 layers, 12 heads, FFN 2048, vocab 32000, own output.weight. */
    public static ModelSpec stories110M() {
        return new ModelSpec("synthetic-stories110M", 768, 12, 12, 12, 2048, 32000, 1024, false, GgmlType.F32, 42, false);
    }

    /** A model small enough for unit tests: dim 64, 4 layers, 4 heads over 2 KV heads, vocab 512. */
    public static ModelSpec tiny() {
        return new ModelSpec("synthetic-tiny", 64, 4, 4, 2, 160, 512, 256, false, GgmlType.F32, 7, false);
    }

    /** The preset called {@code name} (stories15M, stories110M, tiny; case-insensitive). */
    public static ModelSpec preset(String name) {
        return switch (name.toLowerCase(Locale.ROOT)) {
            case "stories15m" -> stories15M();
            case "stories110m" -> stories110M();
            case "tiny" -> tiny();
            default -> throw new IllegalArgumentException("unknown preset '" + name + "' (stories15M, stories110M, tiny)");
        };
    }

    public ModelSpec withType(GgmlType t) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, t, seed, ropeFactors, chatTemplate);
    }

    public ModelSpec withTied(boolean t) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, t, type, seed, ropeFactors, chatTemplate);
    }

    public ModelSpec withKvHeads(int kv) {
        return new ModelSpec(name, dim, layers, heads, kv, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, chatTemplate);
    }

    public ModelSpec withContext(int positions) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, positions, tied, type, seed, ropeFactors);
    }

    public ModelSpec withSeed(long s) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, s, ropeFactors, chatTemplate);
    }

    public ModelSpec withRopeFactors(boolean f) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, f, chatTemplate);
    }

    /** This spec with {@code template} as its chat template (null for none). */
    public ModelSpec withChatTemplate(String template) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, template);
    }

    /** Number of weights (parameters). */
    public long parameters() {
        long kvDim = (long) kvHeads * (dim / heads);
        long perLayer = 2L * dim + 2L * dim * dim + 2L * dim * kvDim + 3L * dim * ffnDim;
        return (long) vocabSize * dim * (tied ? 1 : 2) + dim + layers * perLayer;
    }

    /** The weight type a user named ({@code f32}, {@code q4_k}, ... any case), one a synthetic model can have. */
    public static GgmlType parseType(String name) {
        return switch (name.trim().toLowerCase(Locale.ROOT)) {
            case "f32" -> GgmlType.F32;
            case "f16" -> GgmlType.F16;
            case "q8_0" -> GgmlType.Q8_0;
            case "q4_0" -> GgmlType.Q4_0;
            case "q4_k" -> GgmlType.Q4_K;
            case "q6_k" -> GgmlType.Q6_K;
            case "q4_1" -> GgmlType.Q4_1;
            case "q5_k" -> GgmlType.Q5_K;
            case "q2_k" -> GgmlType.Q2_K;
            default -> throw new IllegalArgumentException("unknown weight type '" + name
                    + "' (f32, f16, q8_0, q4_0, q4_1, q4_k, q5_k, q6_k, q2_k)");
        };
    }

    public String describe() {
        return String.format(Locale.ROOT, "%s: dim %d, %d layers, %d heads (%d KV), FFN %d, vocab %d, context %d, %s%s, %.1fM parameters%s",
                name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, type,
                tied ? ", tied classifier" : "", parameters() / 1e6, chatTemplate != null ? ", chat template" : "");
    }
}
