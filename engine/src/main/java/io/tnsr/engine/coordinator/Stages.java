package io.tnsr.engine.coordinator;

/**
 * The stages of a pipeline as the coordinator sees them: started (or, for external ones, found at their
 * addresses), watched while they run, and ended. The coordinator connects them into a chain itself
 * ({@link PipelineLinks}). {@link StageProcesses} runs each stage in its
 * own JVM (what {@code run-pipeline} does); {@link LocalStages} runs them as threads of this JVM, with real
 * sockets (for tests).
 */
public interface Stages extends AutoCloseable {
    /** Starts every stage this side runs and waits until each listens; bounded by the timeout. */
    void start(long timeoutMillis);

    /** "host:port" of every stage, in pipeline order (valid after {@link #start}). */
    java.util.List<String> addresses();

    /** Null while every stage runs; otherwise which one ended and how. */
    String deadStage();

    /** After SHUTDOWN went through: waits up to the timeout for every stage to end; true if they did. */
    boolean awaitExit(long timeoutMillis);

    /** Ends whatever still runs. */
    @Override
    void close();
}
