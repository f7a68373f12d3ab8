package io.tnsr.engine.synth;

import io.tnsr.engine.gguf.GgmlType;
import io.tnsr.engine.gguf.GgufMetadata;
import io.tnsr.engine.gguf.GgufWriter;
import io.tnsr.engine.kernels.Float16;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.SplittableRandom;

/**
 * Writes llama GGUF files with seeded random weights and a working SentencePiece-style vocabulary, so tests
 * and benchmarks run on any shape without downloads. The same spec and seed always give the same bytes.
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
        int headDim = s.dim() / s.heads();
        int kvDim = s.kvHeads() * headDim;
        w.putString("general.architecture", "llama");
        w.putString("general.name", s.name());
        w.putU32("llama.context_length", s.contextLength());
        w.putU32("llama.embedding_length", s.dim());
        w.putU32("llama.feed_forward_length", s.ffnDim());
        w.putU32("llama.attention.head_count", s.heads());
        w.putU32("llama.attention.head_count_kv", s.kvHeads());
        w.putU32("llama.block_count", s.layers());
        w.putU32("llama.rope.dimension_count", headDim);
        w.putF32("llama.rope.freq_base", 10000f);
        w.putF32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
        w.putU32("general.file_type", switch (s.type()) { // llama_ftype (every matrix of the one type)
            case F32 -> 0; // ALL_F32
            case F16 -> 1; // MOSTLY_F16
            case Q4_0 -> 2; // MOSTLY_Q4_0
            case Q8_0 -> 7; // MOSTLY_Q8_0
            case Q4_K -> 14; // MOSTLY_Q4_K_S, the nearest label (llama-quantize mixes other types into both Q4_K ftypes)
            case Q6_K -> 18; // MOSTLY_Q6_K
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
            matrix(w, s, p + "attn_q.weight", s.dim(), s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "attn_k.weight", kvDim, s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "attn_v.weight", kvDim, s.dim(), fanIn(s.dim()));
            matrix(w, s, p + "attn_output.weight", s.dim(), s.dim(), fanIn(s.dim()));
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
        w.addTensor(name, GgmlType.F32, new long[] {s.dim()}, dst -> {
            SplittableRandom r = random(s, name);
            for (int i = 0; i < s.dim(); i++) {
                dst.putFloat((float) (1.0 + 0.1 * (r.nextDouble() * 2 - 1)));
            }
        });
    }

    /**
     * Writes n values uniform in +-bound, drawn in order from {@code r}, as F32, F16, Q8_0 / Q4_0 / Q4_1 blocks of 32
     * or Q4_K / Q5_K / Q6_K / Q2_K super-blocks of 256 (n is then a multiple of the block size): every synthetic weight the
     * project writes (models here, the kernel benchmarks' single matrices) goes through this one writer and
     * {@link Quantize}. Values are drawn one at a time in element order whatever the type, so the chunking does
     * not change which value lands where.
     */
    public static void fillUniform(ByteBuffer dst, GgmlType type, long n, SplittableRandom r, double bound) {
        int chunk = switch (type) {
            case F32, F16 -> Quantize.QK;
            case Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q2_K -> type.blockSize();
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
                case Q6_K -> Quantize.q6_K(block, 0, dst);
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
