/**
 * Tokenizers read from a GGUF model's metadata, reproducing llama.cpp (and llama2.c's run.c for its models)
 * token for token.
 *
 * <pre>{@code
 * Tokenizer tok = Tokenizers.load(path);                 // or Tokenizers.fromGguf(ggufFile.metadata())
 * int[] prompt = tok.encode("Once upon a time", tok.addsBos());
 * StreamingDecoder out = tok.newDecoder(prompt[prompt.length - 1]);
 * for (int id : generated) {
 *     if (tok.isEndOfGeneration(id)) break;
 *     System.out.print(out.next(id));                    // whole characters only, UTF-8 reassembled
 * }
 * System.out.print(out.finish());
 * }</pre>
 *
 * <ul>
 *   <li>{@code tokenizer.ggml.model = llama}: {@link io.tnsr.engine.tokenizer.SentencePieceTokenizer}
 *       (Llama 1/2, Phi-3, llama2.c models: score-driven merges, byte fallback, dummy space prefix).</li>
 *   <li>{@code tokenizer.ggml.model = gpt2} with {@code tokenizer.ggml.pre = llama-bpe} (Llama 3), {@code qwen2}
 *       (Qwen2, Qwen2.5, Qwen3) or {@code gpt-2}: {@link io.tnsr.engine.tokenizer.ByteLevelBpeTokenizer}
 *       (byte-level BPE, ranked merges, split into words by a {@link io.tnsr.engine.tokenizer.PreTokenizer}).</li>
 * </ul>
 * Anything else is refused by {@link io.tnsr.engine.tokenizer.Tokenizers} with a
 * {@link io.tnsr.engine.tokenizer.TokenizerException} naming the type.
 */
package io.tnsr.engine.tokenizer;
