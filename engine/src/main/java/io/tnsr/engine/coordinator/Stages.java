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

    /** Whether stage i is one this side started, so that it can be replaced (external stages are waited for). */
    boolean replaceable(int i);

    /**
     * Replaces stage i: ends it if it still runs (it may be hung), starts it again, and waits until it listens, within
     * the timeout; its address may change ({@link #addresses}).
     *
     * @throws PipelineException it could not be started
     */
    void replace(int i, long timeoutMillis);

    /**
     * Stage i, an external one, was found down: its address becomes the next of its config's alternatives (in turn,
     * back to the first); a no-op when it has none. Returns its address now.
     */
    default String nextAddress(int i) {
        return addresses().get(i);
    }

    /** Null while every stage runs; otherwise which one ended and how. */
    String deadStage();

    /** After SHUTDOWN went through: waits up to the timeout for every stage to end; true if they did. */
    boolean awaitExit(long timeoutMillis);

    /** Ends whatever still runs. */
    @Override
    void close();
}
