package io.tnsr.engine.synth;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.model.Architecture;
import java.util.Locale;

/**
 * The shape of a synthetic model (llama, or qwen2 / qwen3 in llama.cpp's GGUF conventions): every size, the weight
 * type, and the seed of its random weights. The weight type (F16, BF16 and the quantized Q8_0, Q6_K, Q5_K, Q5_0, Q4_K,
 * Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K, Q2_K) applies to every matrix, the embedding and classifier included; norms stay
 * F32. The K-quants and IQ4_XS come in super-blocks of 256, so they need dim and FFN length multiples of 256
 * (stories110M's 768 and 2048; not tiny's 64 or stories15M's 288); the other quantized types need multiples of 32.
 *
 * @param name        written as general.name
 * @param tied        no output.weight: the classifier reuses token_embd.weight
 * @param ropeFactors  write a rope_freqs.weight tensor (Llama 3.1 style frequency factors)
 * @param chatTemplate Jinja text written as {@code tokenizer.chat_template} (what a chat endpoint renders
 *                     conversations with), or null for none
 * @param arch         the architecture: qwen2 adds Q/K/V biases, qwen3 per-head Q/K norms; both NEOX RoPE
 * @param headDim      the head size written as {@code <arch>.attention.key_length}, or 0 for dim / heads (then
 *                     no key_length is written)
 */
public record ModelSpec(String name, int dim, int layers, int heads, int kvHeads, int ffnDim, int vocabSize,
                        int contextLength, boolean tied, GgmlType type, long seed, boolean ropeFactors, String chatTemplate,
                        Architecture arch, int headDim) {

    /** The weight types the synthetic writer can write ({@link SyntheticModel#fillUniform}). */
    public static final java.util.Set<GgmlType> WRITABLE = java.util.Collections.unmodifiableSet(java.util.EnumSet.of(
            GgmlType.F32, GgmlType.F16, GgmlType.BF16, GgmlType.Q8_0, GgmlType.Q6_K, GgmlType.Q5_K, GgmlType.Q5_0,
            GgmlType.Q4_K, GgmlType.Q4_1, GgmlType.Q4_0, GgmlType.IQ4_NL, GgmlType.IQ4_XS, GgmlType.Q3_K, GgmlType.Q2_K));
    private static final String WRITABLE_NAMES = "F32, F16, BF16, Q8_0, Q6_K, Q5_K, Q5_0, Q4_K, Q4_1, Q4_0, IQ4_NL, IQ4_XS, Q3_K or Q2_K";

    /** Smallest vocabulary: unk, BOS, EOS, 256 byte tokens and a few pieces. */
    public static final int MIN_VOCAB = 300;

    /** A llama spec without a chat template. */
    public ModelSpec(String name, int dim, int layers, int heads, int kvHeads, int ffnDim, int vocabSize,
                     int contextLength, boolean tied, GgmlType type, long seed, boolean ropeFactors) {
        this(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, null);
    }

    /** A llama spec, head size dim / heads. */
    public ModelSpec(String name, int dim, int layers, int heads, int kvHeads, int ffnDim, int vocabSize,
                     int contextLength, boolean tied, GgmlType type, long seed, boolean ropeFactors, String chatTemplate) {
        this(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors,
                chatTemplate, Architecture.LLAMA, 0);
    }

    public ModelSpec {
        if (dim <= 0 || layers <= 0 || heads <= 0 || kvHeads <= 0 || ffnDim <= 0 || contextLength <= 0) {
            throw new IllegalArgumentException("every size must be positive");
        }
        if (arch == null || headDim < 0) {
            throw new IllegalArgumentException("an architecture and a head size >= 0 are needed");
        }
        if ((headDim == 0 && dim % heads != 0) || heads % kvHeads != 0) {
            throw new IllegalArgumentException("dim " + dim + " must be a multiple of heads " + heads
                    + " (or give a head size), and heads a multiple of KV heads " + kvHeads);
        }
        int headSize = headDim > 0 ? headDim : dim / heads; // headSize(): the fields are not set yet
        if (headSize % 2 != 0) {
            throw new IllegalArgumentException("head dim " + headSize + " must be even for RoPE");
        }
        if (vocabSize < MIN_VOCAB) {
            throw new IllegalArgumentException("vocabulary must have at least " + MIN_VOCAB + " tokens, got " + vocabSize);
        }
        if (!WRITABLE.contains(type)) {
            throw new IllegalArgumentException("synthetic weights can be " + WRITABLE_NAMES + ", not " + type);
        }
        if (type.blockSize() > 1 && (dim % type.blockSize() != 0 || ffnDim % type.blockSize() != 0)) {
            throw new IllegalArgumentException(type + " weights need dim and FFN length multiples of "
                    + type.blockSize() + ", got " + dim + " and " + ffnDim);
        }
        if (type.blockSize() > 1 && heads * headSize % type.blockSize() != 0) {
            throw new IllegalArgumentException(type + " weights need heads x head size (wo's rows) a multiple of "
                    + type.blockSize() + ", got " + heads * headSize);
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
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, t, seed, ropeFactors, chatTemplate,
                arch, headDim);
    }

    public ModelSpec withTied(boolean t) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, t, type, seed, ropeFactors, chatTemplate,
                arch, headDim);
    }

    public ModelSpec withKvHeads(int kv) {
        return new ModelSpec(name, dim, layers, heads, kv, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, chatTemplate,
                arch, headDim);
    }

    public ModelSpec withContext(int positions) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, positions, tied, type, seed, ropeFactors, null,
                arch, headDim);
    }

    public ModelSpec withSeed(long s) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, s, ropeFactors, chatTemplate,
                arch, headDim);
    }

    public ModelSpec withRopeFactors(boolean f) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, f, chatTemplate,
                arch, headDim);
    }

    /** This spec with {@code template} as its chat template (null for none). */
    public ModelSpec withChatTemplate(String template) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors, template,
                arch, headDim);
    }

    /**
     * This spec as architecture {@code a} (llama, qwen2, qwen3) with head size {@code headSize} (0: dim / heads).
     * The architecture's own conventions (qwen2 and qwen3: RoPE base 1e6, RMS epsilon 1e-6) come with it.
     */
    public ModelSpec withArch(Architecture a, int headSize) {
        return new ModelSpec(name, dim, layers, heads, kvHeads, ffnDim, vocabSize, contextLength, tied, type, seed, ropeFactors,
                chatTemplate, a, headSize);
    }

    /** The head size: {@link #headDim} if given, else dim / heads. */
    public int headSize() {
        return headDim > 0 ? headDim : dim / heads;
    }

    /** Number of weights (parameters). */
    public long parameters() {
        long hs = headSize();
        long qDim = (long) heads * hs;
        long kvDim = (long) kvHeads * hs;
        long extra = switch (arch) {
            case LLAMA -> 0;
            case QWEN2 -> qDim + 2 * kvDim; // biases
            case QWEN3 -> 2 * hs;           // per-head Q and K norms
        };
        long perLayer = 2L * dim + 2L * dim * qDim + 2L * dim * kvDim + 3L * dim * ffnDim + extra;
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
            case "bf16" -> GgmlType.BF16;
            case "q5_0" -> GgmlType.Q5_0;
            case "iq4_nl" -> GgmlType.IQ4_NL;
            case "iq4_xs" -> GgmlType.IQ4_XS;
            case "q3_k" -> GgmlType.Q3_K;
            case "q4_1" -> GgmlType.Q4_1;
            case "q5_k" -> GgmlType.Q5_K;
            case "q2_k" -> GgmlType.Q2_K;
            default -> throw new IllegalArgumentException("unknown weight type '" + name
                    + "' (f32, f16, bf16, q8_0, q6_k, q5_k, q5_0, q4_k, q4_1, q4_0, iq4_nl, iq4_xs, q3_k, q2_k)");
        };
    }

    public String describe() {
        return String.format(Locale.ROOT, "%s: %sdim %d, %d layers, %d heads%s (%d KV), FFN %d, vocab %d, context %d, %s%s, %.1fM parameters%s",
                name, arch == Architecture.LLAMA ? "" : arch.ggufName() + ", ", dim, layers, heads,
                headDim > 0 ? " of " + headDim : "", kvHeads, ffnDim, vocabSize, contextLength, type,
                tied ? ", tied classifier" : "", parameters() / 1e6, chatTemplate != null ? ", chat template" : "");
    }
}
