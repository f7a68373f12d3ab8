package io.tnsr.engine.coordinator;

import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.metrics.CounterFile;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.stage.StageRuntime;
import io.tnsr.engine.util.TaskProgress;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * The weights the stage processes load at start-up, as one progress bar on the coordinator's terminal. A stage's
 * stdout is the coordinator's pipe, so it draws no bar itself; it counts the bytes it has loaded in its counters file
 * ({@code stage<i>-metrics.counters}, counters {@link StageRuntime#LOAD_BYTES} and {@link StageRuntime#LOAD_BYTES_TOTAL}),
 * and the coordinator sums them ({@link #update}) while it waits for the stages to be ready. Nothing at all when the
 * coordinator is not on a terminal ({@link TaskProgress#interactive()}).
 */
final class StageLoading implements AutoCloseable {
    private static final StageLoading NONE = new StageLoading(null, new int[0], null);

    private final Path runDir;
    private final int[] stages;
    private final TaskProgress bar;

    private StageLoading(Path runDir, int[] stages, TaskProgress bar) {
        this.runDir = runDir;
        this.stages = stages;
        this.bar = bar;
    }

    /**
     * A bar over the weights of the stages this coordinator starts (external ones excluded), sized from the model
     * file; an earlier run's counters files of those stages in {@code runDir} are removed first, so that the bar
     * starts at 0. No bar off a terminal or when the file cannot be read (the stages then report why).
     */
    static StageLoading start(Path model, Path runDir, List<StageSpec> specs) {
        if (!TaskProgress.interactive()) {
            return NONE;
        }
        int[] started = java.util.stream.IntStream.range(0, specs.size()).filter(i -> specs.get(i).external() == null).toArray();
        long total = 0;
        try (GgufFile f = GgufFile.open(model)) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            for (int i : started) {
                StageSpec s = specs.get(i);
                total += LayerRange.loadBytes(f, c, s.layerFrom(), s.layerTo());
            }
        } catch (RuntimeException e) {
            return NONE;
        }
        for (int i : started) {
            try {
                Files.deleteIfExists(countersFile(runDir, i));
            } catch (IOException ignored) {
                // the stage replaces it itself; the bar may start high
            }
        }
        int n = started.length;
        return new StageLoading(runDir, started, TaskProgress.start("loading " + n + " stage" + (n == 1 ? "" : "s"), total,
                TaskProgress.MIB));
    }

    /** Reads every stage's loaded bytes and moves the bar to their sum. */
    void update() {
        if (bar != null) {
            bar.stepTo(loaded(runDir, stages));
        }
    }

    /** Bytes the given stages have loaded so far, from their counters files in {@code runDir} (0 for one not there yet). */
    static long loaded(Path runDir, int... stages) {
        return sum(runDir, stages, StageRuntime.LOAD_BYTES);
    }

    /** Bytes the given stages load in all, as they published it (0 for one not there yet). */
    static long total(Path runDir, int... stages) {
        return sum(runDir, stages, StageRuntime.LOAD_BYTES_TOTAL);
    }

    private static long sum(Path runDir, int[] stages, String counter) {
        long sum = 0;
        for (int i : stages) {
            Path f = countersFile(runDir, i);
            try {
                CounterFile.Reading r = CounterFile.read(f).get("stage" + i + counter);
                sum += r == null ? 0 : r.value();
            } catch (IOException | RuntimeException e) {
                // not written yet, or being created (not yet its full size): nothing loaded that we can see
            }
        }
        return sum;
    }

    private static Path countersFile(Path runDir, int stage) {
        return runDir.resolve("stage" + stage + "-metrics" + CounterFile.SUFFIX);
    }

    /** Moves the bar to the stages' last count and ends its line, if it was drawn. */
    @Override
    public void close() {
        if (bar != null) {
            update();
            bar.close();
        }
    }
}
