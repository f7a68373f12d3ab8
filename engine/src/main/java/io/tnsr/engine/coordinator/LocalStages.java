package io.tnsr.engine.coordinator;

import io.tnsr.engine.pipeline.PipelineConfig;
import io.tnsr.engine.pipeline.StageSpec;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.stage.StageOptions;
import io.tnsr.engine.stage.StageRuntime;
import java.io.IOException;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Every stage of a pipeline as threads of this JVM, each with its own ring, its own sockets and its own layers:
 * the same code paths as separate processes, minus the process boundary. For tests and debugging.
 */
public final class LocalStages implements Stages {
    private final PipelineConfig config;
    private final Path model;
    private final Path metricsDir;
    private final StageRuntime[] stages;
    private final int[] ports;
    private final boolean[] refused;
    private long restartDelayMillis;

    public LocalStages(PipelineConfig config, Path model, Path metricsDir) {
        this.config = config;
        this.model = model;
        this.metricsDir = metricsDir;
        this.stages = new StageRuntime[config.stages().size()];
        this.ports = new int[stages.length];
        this.refused = new boolean[stages.length];
    }

    @Override
    public void start(long timeoutMillis) {
        int n = stages.length;
        try {
            for (int i = 0; i < n; i++) {
                stages[i] = new StageRuntime(options(i));
                ports[i] = stages[i].listen();
            }
            for (StageRuntime stage : stages) {
                stage.start();
            }
        } catch (IOException | RuntimeException e) {
            close();
            throw new PipelineException("cannot start the in-process stages: " + e.getMessage(), e);
        }
    }

    private StageOptions options(int i) {
        StageSpec s = config.stages().get(i);
        WaitMode w = config.waitMode() == WaitMode.SPIN ? WaitMode.BACKOFF : config.waitMode();
        return StageOptions.builder(model, s.layerFrom(), s.layerTo()).stage(i, stages.length)
                .listen(config.host(), s.port()).ringSize(config.ringSize()).maxFrameBytes(config.maxFrameBytes())
                .frameLimits(config.maxTokensPerFrame(), config.maxSequencesPerFrame()).wait(w, -1)
                .kvCacheTokens(config.kvCacheTokens()).kvCacheType(config.kvCacheType()).metricsDir(metricsDir).socketBufferBytes(config.socketBufferBytes())
                .stallThresholdMicros(config.stallThresholdMicros()).warmupMillis(config.warmupMillis()).build();
    }

    /** Ends stage i as a crash would: its threads stop and its sockets close (for tests of recovery). */
    public void kill(int i) {
        stages[i].close();
    }

    @Override
    public boolean replaceable(int i) {
        return true;
    }

    /** From now on stage i cannot be restarted (a test of a recovery that gives up). */
    public synchronized void refuseRestarts(int i) {
        refused[i] = true;
    }

    /** From now on a restarted stage takes {@code millis} to come up, as a stage process loading its layers does. */
    public synchronized void delayRestarts(long millis) {
        restartDelayMillis = millis;
    }

    @Override
    public synchronized void replace(int i, long timeoutMillis) {
        stages[i].close();
        if (refused[i]) {
            throw new PipelineException("in-process stage " + i + " may not be restarted");
        }
        if (restartDelayMillis > 0) {
            try {
                Thread.sleep(Math.min(restartDelayMillis, timeoutMillis));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new PipelineException("interrupted while restarting in-process stage " + i, e);
            }
        }
        try {
            StageRuntime s = new StageRuntime(options(i));
            ports[i] = s.listen();
            s.start();
            stages[i] = s;
        } catch (IOException | RuntimeException e) {
            throw new PipelineException("cannot restart in-process stage " + i + ": " + e.getMessage(), e);
        }
    }

    /** The runtime of stage i (for tests that poke at it). */
    public StageRuntime stage(int i) {
        return stages[i];
    }

    /** The port stage i listens on. */
    public int port(int i) {
        return ports[i];
    }

    @Override
    public java.util.List<String> addresses() {
        java.util.List<String> a = new java.util.ArrayList<>();
        for (int i = 0; i < ports.length; i++) {
            a.add(config.host() + ":" + ports[i]);
        }
        return a;
    }

    @Override
    public String deadStage() {
        for (int i = 0; i < stages.length; i++) {
            if (stages[i] != null && stages[i].state() == StageRuntime.State.FAILED) {
                return "stage " + i + " failed: " + stages[i].failure();
            }
        }
        return null;
    }

    @Override
    public boolean awaitExit(long timeoutMillis) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMillis);
        try {
            for (StageRuntime s : stages) {
                if (s != null && !s.awaitStop(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS)) {
                    return false;
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return true;
    }

    @Override
    public void close() {
        for (StageRuntime s : stages) {
            if (s != null) {
                s.close();
            }
        }
    }
}
