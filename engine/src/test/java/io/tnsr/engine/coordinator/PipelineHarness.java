package io.tnsr.engine.coordinator;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.tokenizer.Tokenizer;
import io.tnsr.engine.tokenizer.Tokenizers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/** Runs a model through a pipeline of in-process stages (real sockets, one thread set per stage), or through the single-process generator. */
final class PipelineHarness {
    final Path model;
    final LlamaConfig cfg;
    final Tokenizer tok;
    PipelineConfig pipeline;
    int microBatches = 2;
    int batchSize = 0;
    boolean sampleInLastStage = true;
    double rate = 0;              // sequences per second: open loop; 0 = closed loop
    Path runDir;
    PipelineRun.Outcome outcome;  // of the last runLocal
    final List<String> events = Collections.synchronizedList(new ArrayList<>());

    PipelineHarness(Path model, int stages) {
        this.model = model;
        try (GgufFile f = GgufFile.open(model)) {
            cfg = LlamaConfig.fromGguf(f);
            tok = Tokenizers.fromGguf(f);
        }
        pipeline = PipelineConfig.defaults(cfg.layers(), stages, WaitMode.BLOCK);
        try {
            runDir = Files.createTempDirectory("tnsr-test-run");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    List<SequenceState> sequences(List<String> prompts, int maxTokens, Sampler sampler) {
        List<SequenceState> seqs = new ArrayList<>();
        for (String p : prompts) {
            seqs.add(new SequenceState(seqs.size(), p, tok.encode(p, true), maxTokens, cfg.contextLength(), tok.bos(),
                    tok::isEndOfGeneration, sampler));
        }
        return seqs;
    }

    PipelineRun.Settings settings() {
        int n = pipeline.stages().size();
        return new PipelineRun.Settings(model, pipeline, Collections.nCopies(n, WaitMode.BLOCK), Collections.nCopies(n, -1),
                new Coordinator.Options(microBatches, batchSize, pipeline.maxTokensPerFrame(), pipeline.maxSequencesPerFrame(),
                        pipeline.maxFrameBytes(), rate, sampleInLastStage), runDir, 30_000, 30_000, 10_000, 0);
    }

    Generator.Listener listener() {
        return new Generator.Listener() {
            @Override
            public void onToken(SequenceState seq, int token) {
                events.add("token " + seq.index());
            }

            @Override
            public void onFinished(SequenceState seq) {
                events.add("finished " + seq.index());
            }
        };
    }

    /** Through in-process stages. */
    List<SequenceState> runLocal(List<String> prompts, int maxTokens, SamplingConfig sc) {
        Sampler sampler = new Sampler(sc, cfg.vocabSize());
        List<SequenceState> seqs = sequences(prompts, maxTokens, sampler);
        outcome = PipelineRun.run(new LocalStages(pipeline, model, runDir), settings(), cfg, seqs, listener());
        return seqs;
    }

    /** Through the single-process generator. */
    List<SequenceState> runSingle(List<String> prompts, int maxTokens, SamplingConfig sc) {
        try (GgufFile f = GgufFile.open(model)) {
            Sampler sampler = new Sampler(sc, cfg.vocabSize());
            List<SequenceState> seqs = sequences(prompts, maxTokens, sampler);
            var pool = new io.tnsr.engine.kvcache.KvCachePool(cfg.layers(), cfg.kvDim(), cfg.contextLength(), 16, 1 << 16,
                    pipeline.kvCacheType()); // the stages' kind of cache
            var range = new io.tnsr.engine.forward.LayerRange(f, cfg, 0, cfg.layers(), pool, 64, 16);
            new Generator(range, (s, t) -> { }).run(seqs);
            return seqs;
        }
    }
}
