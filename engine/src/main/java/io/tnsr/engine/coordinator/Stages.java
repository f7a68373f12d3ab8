package io.tnsr.engine.coordinator;

/**
 * The stages of a pipeline as the coordinator sees them: started and wired into a chain ending at the
 * coordinator's return port, watched while they run, and ended. {@link StageProcesses} runs each stage in its
 * own JVM (what {@code run-pipeline} does); {@link LocalStages} runs them as threads of this JVM, with real
 * sockets (for tests).
 */
public interface Stages extends AutoCloseable {
    /** Starts every stage and wires the chain; the last stage connects to host:returnPort. Bounded by the timeout. */
    void start(int returnPort, long timeoutMillis);

    /** "host:port" of the first stage. */
    String firstAddress();

    /** Null while every stage runs; otherwise which one ended and how. */
    String deadStage();

    /** After SHUTDOWN went through: waits up to the timeout for every stage to end; true if they did. */
    boolean awaitExit(long timeoutMillis);

    /** Ends whatever still runs. */
    @Override
    void close();
}
