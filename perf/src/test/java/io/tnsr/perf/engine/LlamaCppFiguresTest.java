package io.tnsr.perf.engine;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Reading llama.cpp's benchmark JSON for engine-bench's llama.cpp column: records in the form llama-bench
 * ({@code -o jsonl} and {@code -o json}) and llama-batched-bench ({@code --output-format jsonl}) print them,
 * mapped to engine-bench's workloads, and files that cannot be compared refused with the file and line named.
 */
class LlamaCppFiguresTest {

    /** A llama-bench jsonl record (the fields its printer writes, in its order; samples shortened). */
    private static String bench(int prompt, int gen, int depth, int threads, double ts) {
        return "{\"build_commit\": \"de3ff81\", \"build_number\": 1, \"cpu_info\": \"AMD EPYC\", \"gpu_info\": \"\", "
                + "\"backends\": \"CPU\", \"model_filename\": \"/m/synthetic-stories110M-f32-s42.gguf\", "
                + "\"model_type\": \"llama ?B all F32\", \"model_size\": 536412160, \"model_n_params\": 134105856, "
                + "\"n_batch\": 2048, \"n_ubatch\": 512, \"n_threads\": " + threads + ", \"cpu_mask\": \"0x0\", "
                + "\"cpu_strict\": false, \"poll\": 50, \"type_k\": \"f16\", \"type_v\": \"f16\", \"n_gpu_layers\": 99, "
                + "\"split_mode\": \"layer\", \"main_gpu\": 0, \"no_kv_offload\": false, \"flash_attn\": \"auto\", "
                + "\"tensor_split\": \"0.00\", \"use_mmap\": true, \"embeddings\": false, \"n_prompt\": " + prompt + ", "
                + "\"n_gen\": " + gen + ", \"n_depth\": " + depth + ", \"test_time\": \"2026-11-30T16:45:53Z\", "
                + "\"avg_ns\": 3009766054, \"stddev_ns\": 21161470, \"avg_ts\": " + ts + ", \"stddev_ts\": 0.299, "
                + "\"samples_ns\": [ 3001000000, 3018000000 ],\"samples_ts\": [ 42.65, 42.41 ]}";
    }

    /** A llama-batched-bench jsonl record. */
    private static String batched(int pl, int threads, int threadsBatch, double speedTg) {
        return "{\"n_kv_max\": 4096, \"n_batch\": 2048, \"n_ubatch\": 512, \"flash_attn\": -1, \"is_pp_shared\": 0, "
                + "\"n_gpu_layers\": -1, \"n_threads\": " + threads + ", \"n_threads_batch\": " + threadsBatch + ", \"pp\": 16, "
                + "\"tg\": 64, \"pl\": " + pl + ", \"n_kv\": 640, \"t_pp\": 0.305, \"speed_pp\": 420.16, \"t_tg\": 2.991, "
                + "\"speed_tg\": " + speedTg + ", \"t\": 3.296, \"speed\": 194.2}";
    }

    private static Path write(Path dir, String text) throws IOException {
        return Files.writeString(dir.resolve("llama-cpp.jsonl"), text);
    }

    @Test
    void bothToolsRecordsBecomeEngineBenchWorkloads(@TempDir Path dir) throws Exception {
        Path file = write(dir, String.join("\n",
                bench(128, 0, 0, 1, 422.18),
                bench(0, 128, 0, 1, 42.63),
                "main: n_kv_max = 4096, n_batch = 2048 (a log line that reached stdout)",
                batched(8, 1, 1, 171.18),
                batched(16, 1, 1, 235.13),
                bench(0, 128, 0, 1, 52.69), // a second run: the decode figure becomes a range
                bench(0, 32, 960, 1, 40.5),
                bench(16, 16, 0, 1, 99.0)) // -pg: no engine-bench row measures prompt + generation together
                + "\n");
        Map<String, LlamaCppFigures.Range> f = LlamaCppFigures.read(file);
        assertEquals(Map.of("prefill128", new LlamaCppFigures.Range(422.18, 422.18),
                "decode1", new LlamaCppFigures.Range(42.63, 52.69),
                "decode8", new LlamaCppFigures.Range(171.18, 171.18),
                "decode16", new LlamaCppFigures.Range(235.13, 235.13),
                "decodeAt960", new LlamaCppFigures.Range(40.5, 40.5)), f);
        assertEquals(47.66, f.get("decode1").middle(), 1e-9);
        assertEquals("43-53", f.get("decode1").toString());
        assertEquals("171", f.get("decode8").toString());
    }

    @Test
    void llamaBenchsJsonArrayIsReadToo(@TempDir Path dir) throws Exception {
        Path file = write(dir, "[\n  " + bench(128, 0, 0, 1, 430.0) + ",\n  " + bench(0, 128, 0, 1, 64.3) + "\n]\n");
        assertEquals(Map.of("prefill128", new LlamaCppFigures.Range(430.0, 430.0),
                "decode1", new LlamaCppFigures.Range(64.3, 64.3)), LlamaCppFigures.read(file));
    }

    @Test
    void moreThanOneThreadIsRefusedWithTheLine(@TempDir Path dir) throws IOException {
        Path file = write(dir, bench(0, 128, 0, 1, 50) + "\n" + bench(0, 128, 0, 2, 90) + "\n");
        var e = assertThrows(LlamaCppFigures.InvalidFiguresException.class, () -> LlamaCppFigures.read(file));
        assertTrue(e.getMessage().contains(file + ":2") && e.getMessage().contains("2 threads")
                && e.getMessage().contains("-t 1"), e.getMessage());
        Path batchedFile = write(dir, batched(8, 1, 2, 150) + "\n");
        e = assertThrows(LlamaCppFigures.InvalidFiguresException.class, () -> LlamaCppFigures.read(batchedFile));
        assertTrue(e.getMessage().contains(":1") && e.getMessage().contains("n_threads_batch")
                && e.getMessage().contains("-tb 1"), e.getMessage());
    }

    /** engine-bench --threads N compares with llama.cpp run on N threads, and refuses a file of another count. */
    @Test
    void figuresOfNThreadsServeARunOfNThreads(@TempDir Path dir) throws Exception {
        Path file = write(dir, batched(16, 2, 2, 265) + "\n" + bench(0, 64, 0, 2, 34) + "\n");
        assertEquals(Map.of("decode16", new LlamaCppFigures.Range(265, 265), "decode1", new LlamaCppFigures.Range(34, 34)),
                LlamaCppFigures.read(file, 2));
        var e = assertThrows(LlamaCppFigures.InvalidFiguresException.class, () -> LlamaCppFigures.read(file, 4));
        assertTrue(e.getMessage().contains("4 threads (--threads 4)") && e.getMessage().contains("-t 4 -tb 4"), e.getMessage());
    }

    @Test
    void filesThatCannotBeComparedAreRefusedSayingWhy(@TempDir Path dir) throws IOException {
        Map<String, String> cases = Map.of(
                bench(0, 128, 0, 1, 50) + "\n{\"n_gen\": 128, \"n_prompt\": 0, \"avg_ts\": 5\n", "llama-cpp.jsonl:2 is not valid JSON",
                "| llama ?B all F32 | tg128 | 42.63 ± 0.30 |\n", "has no llama-bench or llama-batched-bench record",
                "{\"model\": \"x\", \"tokens_per_second\": 50}\n", "llama-cpp.jsonl:1: neither a llama-bench record",
                "{\"n_prompt\": 0, \"n_gen\": 128, \"avg_ts\": \"fast\"}\n", "field avg_ts is \"fast\", not a number",
                "{\"n_prompt\": 0, \"n_gen\": 128}\n", "field avg_ts is missing",
                "{\"n_prompt\": 0.5, \"n_gen\": 128, \"avg_ts\": 5}\n", "field n_prompt is 0.5, not an integer",
                "{\"pl\": 8, \"speed_tg\": 0}\n", "tokens/s of decode8 is 0.0",
                "[1, 2]\n", "record 1: expected a JSON object");
        for (var c : cases.entrySet()) {
            Path file = write(dir, c.getKey());
            var e = assertThrows(LlamaCppFigures.InvalidFiguresException.class, () -> LlamaCppFigures.read(file), c.getKey());
            assertTrue(e.getMessage().contains(c.getValue()), c.getValue() + " not in: " + e.getMessage());
        }
        var missing = assertThrows(LlamaCppFigures.InvalidFiguresException.class,
                () -> LlamaCppFigures.read(dir.resolve("absent.jsonl")));
        assertTrue(missing.getMessage().contains("cannot read llama.cpp's figures from") && missing.getMessage().contains("absent.jsonl"),
                missing.getMessage());
    }

    @Test
    void batchedRecordsAreKeyedBySequencesAndThreadsForPipelineBench(@TempDir Path dir) throws Exception {
        Path file = write(dir, String.join("\n",
                bench(0, 128, 0, 2, 30.0), // llama-bench: skipped here
                batched(16, 2, 2, 306.0),
                batched(16, 2, 2, 298.5),
                batched(8, 2, 2, 210.0),
                batched(16, 1, 1, 174.4)) + "\n");
        Map<LlamaCppFigures.Batched, LlamaCppFigures.Range> f = LlamaCppFigures.readBatched(file);
        assertEquals(Map.of(new LlamaCppFigures.Batched(16, 2), new LlamaCppFigures.Range(298.5, 306.0),
                new LlamaCppFigures.Batched(8, 2), new LlamaCppFigures.Range(210.0, 210.0),
                new LlamaCppFigures.Batched(16, 1), new LlamaCppFigures.Range(174.4, 174.4)), f);
    }

    @Test
    void aFileWithoutBatchedRecordsIsRefusedForPipelineBench(@TempDir Path dir) throws Exception {
        Path file = write(dir, bench(0, 128, 0, 1, 42.63) + "\n");
        LlamaCppFigures.InvalidFiguresException e = assertThrows(LlamaCppFigures.InvalidFiguresException.class,
                () -> LlamaCppFigures.readBatched(file));
        assertTrue(e.getMessage().contains(file + " has no llama-batched-bench record"), e.getMessage());
        Path broken = Files.writeString(dir.resolve("broken.jsonl"), batched(16, 2, 2, 300) + "\n{\"pl\": 16, \"n_threads\"\n");
        e = assertThrows(LlamaCppFigures.InvalidFiguresException.class, () -> LlamaCppFigures.readBatched(broken));
        assertEquals(broken + ":2 is not valid JSON: unexpected end of input at column 23", e.getMessage());
    }
}
