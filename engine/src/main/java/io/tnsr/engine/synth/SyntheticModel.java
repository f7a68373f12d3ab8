package io.tnsr.engine.synth;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufMetadata;
import io.tnsr.engine.gguf.GgufWriter;
import io.tnsr.engine.kernels.Float16;
import io.tnsr.engine.model.Architecture;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Writes llama, qwen2 or qwen3 GGUF files (in llama.cpp's conventions: keys prefixed by the architecture's name,
 * qwen2's {@code attn_{q,k,v}.bias}, qwen3's {@code attn_{q,k}_norm.weight} and {@code attention.key_length}) with
 * seeded random weights and a working SentencePiece-style vocabulary, so tests and benchmarks run on any shape
 * without downloads. The same spec and seed always give the same bytes (llama files as before the other
 * architectures existed).
 *
 * <p>Weights are uniform in +-sqrt(3 / fan-in), which keeps activations near unit variance, so the model's
 * logits are spread out and its greedy output varies from token to token (it is gibberish, but a
 * deterministic one).
 */
public final class SyntheticModel {
    private SyntheticModel() {
    }

    public static void write(ModelSpec s, Path path) throws IOException {
        GgufWriter w = new GgufWriter();
        int headDim = s.headSize();
        int qDim = s.heads() * headDim;
        int kvDim = s.kvHeads() * headDim;
        boolean llama = s.arch() == Architecture.LLAMA;
        String a = s.arch().ggufName() + ".";
        w.putString("general.architecture", s.arch().ggufName());
        w.putString("general.name", s.name());
        w.putU32(a + "context_length", s.contextLength());
        w.putU32(a + "embedding_length", s.dim());
        w.putU32(a + "feed_forward_length", s.ffnDim());
        w.putU32(a + "attention.head_count", s.heads());
        w.putU32(a + "attention.head_count_kv", s.kvHeads());
        w.putU32(a + "block_count", s.layers());
        if (s.headDim() > 0) {
            w.putU32(a + "attention.key_length", headDim);
            w.putU32(a + "attention.value_length", headDim);
        }
        if (llama) {
            w.putU32(a + "rope.dimension_count", headDim);
        }
        // Qwen2 / Qwen3's own values (llama.cpp's converter copies them from the model's config)
        w.putF32(a + "rope.freq_base", llama ? 10000f : 1e6f);
        w.putF32(a + "attention.layer_norm_rms_epsilon", llama ? 1e-5f : 1e-6f);
        w.putU32("general.file_type", switch (s.type()) { // llama_ftype (every matrix of the one type)
            case F32 -> 0; // ALL_F32
            case F16 -> 1; // MOSTLY_F16
            case Q4_0 -> 2; // MOSTLY_Q4_0
            case Q8_0 -> 7; // MOSTLY_Q8_0
            case Q4_K -> 14; // MOSTLY_Q4_K_S, the nearest label (llama-quantize mixes other types into both Q4_K ftypes)
            case Q6_K -> 18; // MOSTLY_Q6_K
            case Q5_0 -> 8; // MOSTLY_Q5_0
            case Q3_K -> 11; // MOSTLY_Q3_K_S, the nearest label (llama-quantize mixes other types into the Q3_K ftypes)
            case IQ4_NL -> 25; // MOSTLY_IQ4_NL
            case IQ4_XS -> 30; // MOSTLY_IQ4_XS
            case BF16 -> 32; // MOSTLY_BF16
            case Q4_1 -> 3; // MOSTLY_Q4_1
            case Q5_K -> 16; // MOSTLY_Q5_K_S, the nearest label (as for Q4_K)
            case Q2_K -> 10; // MOSTLY_Q2_K
            default -> throw new IllegalArgumentException("cannot write " + s.type());
        });
        Vocabulary v = vocabulary(s.vocabSize());
        w.putString("tokenizer.ggml.model", "llama");
        w.putStringArray("tokenizer.ggml.tokens", v.tokens);
        w.putFloatArray("tokenizer.ggml.scores", v.scores);
        w.putIntArray("tokenizer.ggml.token_type", v.types);
        w.putU32("tokenizer.ggml.unknown_token_id", 0);
        w.putU32("tokenizer.ggml.bos_token_id", 1);
        w.putU32("tokenizer.ggml.eos_token_id", 2);
        if (s.chatTemplate() != null) {
            w.putString(GgufMetadata.KEY_CHAT_TEMPLATE, s.chatTemplate());
        }

        matrix(w, s, "token_embd.weight", s.vocabSize(), s.dim(), 1.0);
        if (s.ropeFactors()) {
            float[] f = new float[headDim / 2];
            for (int j = 0; j < f.length; j++) {
                f[j] = 1f + 3f * j / f.length; // longer wavelengths stretched more, as Llama 3.1's factors do
            }
            w.addF32("rope_freqs.weight", new long[] {f.length}, f);
        }
        for (int l = 0; l < s.layers(); l++) {
            String p = "blk." + l + ".";
            norm(w, s, p + "attn_norm.weight");
            matrix(w, s, p + "attn_q.weight", qDim, s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "attn_k.weight", kvDim, s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "attn_v.weight", kvDim, s.dim(), fanIn(s.dim()));
            if (s.arch() == Architecture.QWEN2) {
                bias(w, s, p + "attn_q.bias", qDim);
                bias(w, s, p + "attn_k.bias", kvDim);
                bias(w, s, p + "attn_v.bias", kvDim);
            }
            if (s.arch() == Architecture.QWEN3) {
                norm(w, s, p + "attn_q_norm.weight", headDim);
                norm(w, s, p + "attn_k_norm.weight", headDim);
            }
            matrix(w, s, p + "attn_output.weight", s.dim(), qDim, fanIn(qDim));
            norm(w, s, p + "ffn_norm.weight");
            matrix(w, s, p + "ffn_gate.weight", s.ffnDim(), s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "ffn_up.weight", s.ffnDim(), s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "ffn_down.weight", s.dim(), s.ffnDim(), fanIn(s.ffnDim()));
        }
        norm(w, s, "output_norm.weight");
        if (!s.tied()) {
            matrix(w, s, "output.weight", s.vocabSize(), s.dim(), fanIn(s.dim()));
        }
        w.write(path);
    }

    private static double fanIn(int n) {
        return Math.sqrt(3.0 / n);
    }

    private static SplittableRandom random(ModelSpec s, String tensor) {
        return new SplittableRandom(s.seed() * 0x9E3779B97F4A7C15L ^ tensor.hashCode());
    }

    private static void matrix(GgufWriter w, ModelSpec s, String name, int rows, int cols, double bound) {
        w.addTensor(name, s.type(), new long[] {cols, rows}, dst -> {
            SplittableRandom r = random(s, name);
            fillUniform(dst, s.type(), (long) rows * cols, r, bound);
        });
    }

    private static void norm(GgufWriter w, ModelSpec s, String name) {
        norm(w, s, name, s.dim());
    }

    /** An F32 norm weight of length n, uniform in 1 +- 0.1. */
    private static void norm(GgufWriter w, ModelSpec s, String name, int n) {
        w.addTensor(name, GgmlType.F32, new long[] {n}, dst -> {
            SplittableRandom r = random(s, name);
            for (int i = 0; i < n; i++) {
                dst.putFloat((float) (1.0 + 0.1 * (r.nextDouble() * 2 - 1)));
            }
        });
    }

    /** An F32 bias of length n, uniform in +-0.5 (the projections' outputs are near unit variance). */
    private static void bias(GgufWriter w, ModelSpec s, String name, int n) {
        w.addTensor(name, GgmlType.F32, new long[] {n}, dst -> {
            SplittableRandom r = random(s, name);
            for (int i = 0; i < n; i++) {
                dst.putFloat((float) (0.5 * (r.nextDouble() * 2 - 1)));
            }
        });
    }

    /**
     * Writes n values uniform in +-bound, drawn in order from {@code r}, as F32, F16, BF16, Q8_0 / Q4_0 / Q4_1 / Q5_0 /
     * IQ4_NL blocks of 32 or Q4_K / Q5_K / Q6_K / Q3_K / Q2_K / IQ4_XS super-blocks of 256 (n is then a multiple of the block size): every synthetic weight the
     * project writes (models here, the kernel benchmarks' single matrices) goes through this one writer and
     * {@link Quantize}. Values are drawn one at a time in element order whatever the type, so the chunking does
     * not change which value lands where.
     */
    public static void fillUniform(ByteBuffer dst, GgmlType type, long n, SplittableRandom r, double bound) {
        int chunk = switch (type) {
            case F32, F16, BF16 -> Quantize.QK;
            case Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q2_K, Q5_0, IQ4_NL, IQ4_XS, Q3_K -> type.blockSize();
            default -> throw new IllegalArgumentException("cannot write " + type);
        };
        if (n % type.blockSize() != 0) {
            throw new IllegalArgumentException(type + " needs a multiple of " + type.blockSize() + " values, got " + n);
        }
        float[] block = new float[chunk];
        for (long i = 0; i < n; i += chunk) {
            int len = (int) Math.min(chunk, n - i);
            for (int j = 0; j < len; j++) {
                block[j] = (float) ((r.nextDouble() * 2 - 1) * bound);
            }
            switch (type) {
                case F32 -> {
                    for (int j = 0; j < len; j++) {
                        dst.putFloat(block[j]);
                    }
                }
                case F16 -> {
                    for (int j = 0; j < len; j++) {
                        dst.putShort(Float16.fromFloat(block[j]));
                    }
                }
                case Q8_0 -> Quantize.q8_0(block, 0, dst);
                case Q4_0 -> Quantize.q4_0(block, 0, dst);
                case Q4_K -> Quantize.q4_K(block, 0, dst);
                case BF16 -> {
                    for (int j = 0; j < len; j++) {
                        dst.putShort(Quantize.bf16(block[j]));
                    }
                }
                case Q6_K -> Quantize.q6_K(block, 0, dst);
                case Q5_0 -> Quantize.q5_0(block, 0, dst);
                case IQ4_NL -> Quantize.iq4_nl(block, 0, dst);
                case IQ4_XS -> Quantize.iq4_xs(block, 0, dst);
                case Q3_K -> Quantize.q3_K(block, 0, dst);
                case Q4_1 -> Quantize.q4_1(block, 0, dst);
                case Q5_K -> Quantize.q5_K(block, 0, dst);
                case Q2_K -> Quantize.q2_K(block, 0, dst);
                default -> throw new IllegalArgumentException("cannot write " + type);
            }
        }
    }

    /** A vocabulary in the tokenizer arrays' shapes. */
    record Vocabulary(String[] tokens, float[] scores, int[] types) {
    }

    /**
     * unk, BOS, EOS, the 256 byte-fallback tokens, then pieces: single characters, then '▁' + letter, letter
     * pairs, '▁' + pairs, triples... each piece reachable by merging two shorter ones; shorter pieces score
     * higher, so common merges happen first.
     */
    static Vocabulary vocabulary(int size) {
        List<String> tokens = new ArrayList<>(size);
        tokens.add("<unk>");
        tokens.add("<s>");
        tokens.add("</s>");
        for (int b = 0; b < 256; b++) {
            tokens.add(String.format("<0x%02X>", b));
        }
        int firstPiece = tokens.size();
        LinkedHashSet<String> pieces = new LinkedHashSet<>();
        String sp = "\u2581";
        String lower = "etaoinshrdlcumwfgypbvkjxqz";
        pieces.add(sp);
        for (char ch : lower.toCharArray()) {
            pieces.add(String.valueOf(ch));
        }
        for (char ch : "ETAOINSHRDLCUMWFGYPBVKJXQZ0123456789.,!?'\"-:;()".toCharArray()) {
            pieces.add(String.valueOf(ch));
        }
        List<String> level = new ArrayList<>(List.of(""));
        while (firstPiece + pieces.size() < size) {
            List<String> next = new ArrayList<>();
            for (String prefix : level) {
                for (char ch : lower.toCharArray()) {
                    next.add(prefix + ch);
                }
            }
            for (String p : next) {
                pieces.add(sp + p);
                pieces.add(p);
                if (firstPiece + pieces.size() >= size) {
                    break;
                }
            }
            level = next;
        }
        for (String p : pieces) {
            if (tokens.size() == size) {
                break;
            }
            tokens.add(p);
        }
        float[] scores = new float[size];
        int[] types = new int[size];
        types[0] = 2;
        types[1] = 3;
        types[2] = 3;
        for (int i = 3; i < firstPiece; i++) {
            types[i] = 6;
        }
        for (int i = firstPiece; i < size; i++) {
            types[i] = 1;
            scores[i] = -(i - firstPiece);
        }
        return new Vocabulary(tokens.toArray(new String[0]), scores, types);
    }
}
