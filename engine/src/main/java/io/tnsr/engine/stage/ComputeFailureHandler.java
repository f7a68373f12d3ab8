package io.tnsr.engine.stage;

import com.lmax.disruptor.ExceptionHandler;
import java.util.function.Consumer;

/**
 * The compute processor's {@link ExceptionHandler}: anything that escapes the stage's handlers (the compute handler
 * answers a frame's {@code RuntimeException} with an ERROR frame itself, so what arrives here is an {@code Error} such
 * as direct memory exhausted by the KV cache, or a failure of the outbound writer) fails the stage, which then stops
 * its threads, reports FAILED and exits non-zero, instead of leaving a dead compute thread behind a stage that still
 * says RUNNING.
 */
final class ComputeFailureHandler implements ExceptionHandler<FrameSlot> {
    private final String stageName;
    private final Consumer<String> fail;

    /** @param fail fails the stage with a message (the stage stops its threads) */
    ComputeFailureHandler(String stageName, Consumer<String> fail) {
        this.stageName = stageName;
        this.fail = fail;
    }

    @Override
    public void handleEventException(Throwable ex, long sequence, FrameSlot event) {
        fail.accept(stageName + " compute thread: " + ex + " (ring sequence " + sequence + ")");
    }

    @Override
    public void handleOnStartException(Throwable ex) {
        fail.accept(stageName + " compute thread did not start: " + ex);
    }

    @Override
    public void handleOnShutdownException(Throwable ex) {
        fail.accept(stageName + " compute thread failed while stopping: " + ex);
    }
}
