package io.tnsr.engine.stage;

import com.lmax.disruptor.AggregateEventHandler;
import com.lmax.disruptor.BatchEventProcessor;
import com.lmax.disruptor.BatchEventProcessorBuilder;
import com.lmax.disruptor.BlockingWaitStrategy;
import com.lmax.disruptor.BusySpinWaitStrategy;
import com.lmax.disruptor.PhasedBackoffWaitStrategy;
import com.lmax.disruptor.RingBuffer;
import com.lmax.disruptor.WaitStrategy;
import io.tnsr.engine.forward.LayerRange;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.metrics.MetricsLog;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.FrameSizes;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.file.Files;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import net.openhft.affinity.AffinityLock;

/**
 * One pipeline stage: its layers, its ring, its three roles, and their lifecycle.
 *
 * <pre>
 *   upstream socket -> [inbound thread] -> Disruptor ring of FrameSlots -> [consumer thread:
 *                      claim, read, publish                                 ComputeHandler, then OutboundSender]
 *                                                                        -> downstream socket
 * </pre>
 * Usage: {@link #listen()} (binds; the port is known), {@link #connectDownstream} (HELLO both ways),
 * {@link #start()}, then {@link #awaitStop} until a SHUTDOWN frame has passed through or {@link #close()}.
 *
 * <p>The consumer thread runs the compute and outbound handlers one after the other for each frame; with
 * {@link WaitMode#SPIN} it busy-spins pinned to its CPU (OpenHFT affinity), with {@link WaitMode#BACKOFF} it
 * spins briefly, yields, then blocks, and with {@link WaitMode#BLOCK} it sleeps until signalled.
 */
public final class StageRuntime implements AutoCloseable {

    /** Lifecycle, in order; FAILED can follow any state. */
    public enum State { CREATED, LISTENING, CONNECTED, RUNNING, STOPPED, FAILED }

    private final StageOptions o;
    private final GgufFile file;
    private final LayerRange range;
    private final String name;
    private final AtomicReference<State> state = new AtomicReference<>(State.CREATED);
    private final CountDownLatch stopped = new CountDownLatch(1);
    private volatile String failure;
    private ServerSocketChannel server;
    private FrameChannel downstream;
    private InboundReceiver inbound;
    private BatchEventProcessor<FrameSlot> processor;
    private Thread inboundThread;
    private Thread consumerThread;
    private MetricsLog metricsLog;
    private volatile ComputeHandler.Counters counters;
    private long closedComputeNanos;
    private long startNanos;
    private long helloTimeoutMillis;

    /** Loads the stage's layers (mapping only their weights) and sizes its KV cache. */
    public StageRuntime(StageOptions options) {
        this.o = options;
        this.name = options.name();
        this.file = GgufFile.open(options.model());
        try {
            LlamaConfig c = LlamaConfig.fromGguf(file);
            if (o.layerTo() > c.layers()) {
                throw new IllegalArgumentException("layers [" + o.layerFrom() + ", " + o.layerTo() + ") are outside the model's "
                        + c.layers() + " layers");
            }
            KvCachePool pool = KvCachePool.sized(o.layerTo() - o.layerFrom(), c.kvDim(), c.contextLength(), o.kvCacheTokens());
            this.range = new LayerRange(file, c, o.layerFrom(), o.layerTo(), pool, o.maxTokensPerFrame(), o.maxSequencesPerFrame());
            log(String.format(Locale.ROOT, "layers [%d, %d) of %s (%s), %.1f MB of weights loaded, KV cache up to %d positions (%.0f MB)",
                    o.layerFrom(), o.layerTo(), o.model().getFileName(), c.describe(), file.mappedBytes() / 1e6, pool.capacityTokens(),
                    pool.capacityBytes() / 1e6));
        } catch (RuntimeException e) {
            file.close();
            throw e;
        }
    }

    public State state() {
        return state.get();
    }

    public LayerRange range() {
        return range;
    }

    void log(String msg) {
        System.err.println("[" + name + "] " + msg);
    }

    /** Binds the upstream port; returns the port actually bound. */
    public int listen() throws IOException {
        server = ServerSocketChannel.open();
        if (o.socketBufferBytes() > 0) {
            server.setOption(java.net.StandardSocketOptions.SO_RCVBUF, o.socketBufferBytes());
        }
        try {
            server.bind(new InetSocketAddress(o.host(), o.port()));
        } catch (IOException e) {
            server.close();
            throw new IOException("cannot listen on " + o.host() + ":" + o.port() + ": " + e.getMessage(), e);
        }
        state.set(State.LISTENING);
        return ((InetSocketAddress) server.getLocalAddress()).getPort();
    }

    /** Connects to the next stage (or the coordinator's return port) and exchanges HELLOs, within the timeout. */
    public void connectDownstream(String host, int port, long timeoutMillis) throws IOException {
        String peer = (o.stageIndex() == o.stageCount() - 1 ? "the coordinator's return port " : "stage" + (o.stageIndex() + 1) + " at ")
                + host + ":" + port;
        downstream = new FrameChannel(FrameChannel.connect(host, port, timeoutMillis, o.socketBufferBytes()), peer, o.maxFrameBytes());
        try {
            downstream.sendHello(ownHello());
            Hello reply = downstream.readHello(timeoutMillis);
            if (reply.protocolVersion() != HelloPayload.PROTOCOL_VERSION) {
                throw new IOException(peer + " speaks protocol " + reply.protocolVersion() + ", this stage "
                        + HelloPayload.PROTOCOL_VERSION);
            }
        } catch (IOException e) {
            downstream.closeQuietly();
            throw new IOException("handshake with downstream " + peer + " failed: " + e.getMessage(), e);
        }
        helloTimeoutMillis = timeoutMillis;
        state.set(State.CONNECTED);
    }

    private Hello ownHello() {
        return new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_STAGE, o.stageIndex(), o.stageCount(),
                o.layerFrom(), o.layerTo(), range.config().dim(), o.maxTokensPerFrame());
    }

    private String checkUpstream(Hello h) {
        if (h.role() == HelloPayload.ROLE_COORDINATOR) {
            return range.isFirst() ? null : "the coordinator must connect to the first stage; this stage holds layers ["
                    + o.layerFrom() + ", " + o.layerTo() + ")";
        }
        if (h.layerTo() != o.layerFrom()) {
            return "upstream stage " + h.stageIndex() + " ends at layer " + h.layerTo() + " but this stage starts at "
                    + o.layerFrom();
        }
        if (h.hiddenDim() != range.config().dim()) {
            return "upstream hidden size " + h.hiddenDim() + " != " + range.config().dim();
        }
        return null;
    }

    /** Starts the consumer and inbound threads. */
    public void start() {
        if (state.get() != State.CONNECTED) {
            throw new IllegalStateException(name + " must listen and connect downstream before it starts (state "
                    + state.get() + ")");
        }
        LlamaConfig c = range.config();
        long slotSize = FrameSizes.ringSlotBytes(o.maxTokensPerFrame(), c.dim());
        long resultSize = range.isLast() ? FrameSizes.logitsFrameBytes(o.maxSequencesPerFrame(), c.vocabSize()) : slotSize;
        if (Math.max(slotSize, resultSize) > Integer.MAX_VALUE) {
            throw new IllegalArgumentException(name + ": frames of " + Math.max(slotSize, resultSize) + " bytes do not fit a buffer"
                    + " (2 GiB at most): lower max_tokens_per_frame or max_sequences_per_frame");
        }
        int slotBytes = (int) slotSize;
        OutboundBuffer out = new OutboundBuffer((int) Math.max(slotSize, resultSize), o.maxSequencesPerFrame() * 1024 + 4096);

        String upstreamName = o.stageIndex() == 0 ? "coordinator" : "stage" + (o.stageIndex() - 1);
        metricsLog = new MetricsLog(o.metricsDir() != null ? o.metricsDir() : tempDir(), 1000, name + "-metrics");
        LatencyMetric hop = metricsLog.addBucketed(new LatencyMetric("hop-" + upstreamName + "-" + name,
                "one-way hop: written by " + upstreamName + " to decoded by " + name));
        LatencyMetric queueWait = metricsLog.add(new LatencyMetric(name + "-queue-wait", "published by the inbound thread to picked up by compute"));
        LatencyMetric computeTime = metricsLog.add(new LatencyMetric(name + "-compute", "layers run per frame (micro-batch step)"));
        LatencyMetric perToken = metricsLog.add(new LatencyMetric(name + "-compute-per-token", "layers run per frame / tokens in it"));
        LatencyMetric residence = metricsLog.add(new LatencyMetric(name + "-residence", "decoded to written downstream"));
        counters = new ComputeHandler.Counters(
                metricsLog.counter(name + "-frames", "frames run through the layers"),
                metricsLog.counter(name + "-compute-ns", "nanoseconds spent running layers"),
                metricsLog.counter(name + "-stalls", "frames picked up > " + o.stallThresholdMicros()
                        + " us after reaching the idle compute thread (descheduled, GC, page fault)"),
                metricsLog.counter(name + "-kv-pages-used", "KV cache pages held (of " + range.cache().pageTokens()
                        + " positions each) after the last frame"));
        metricsLog.counter(name + "-kv-pages-capacity", "KV cache pages this stage can hold")
                .setRelease(range.cache().capacityTokens() / range.cache().pageTokens());

        OutboundSender sender = new OutboundSender(out, downstream, residence, new OutboundSender.Listener() {
            @Override
            public void downstreamFailed(IOException e) {
                fail("downstream connection lost: " + e.getMessage());
            }

            @Override
            public void shutdownForwarded() {
                stop();
            }
        });
        ComputeHandler compute = new ComputeHandler(range, name, out, sender, queueWait, computeTime, perToken, counters,
                TimeUnit.MICROSECONDS.toNanos(o.stallThresholdMicros()));
        RingBuffer<FrameSlot> ring = RingBuffer.createSingleProducer(() -> new FrameSlot(slotBytes), o.ringSize(), waitStrategy());
        @SuppressWarnings("unchecked")
        AggregateEventHandler<FrameSlot> handlers = new AggregateEventHandler<>(compute, sender);
        processor = new BatchEventProcessorBuilder().build(ring, ring.newBarrier(), handlers);
        processor.setExceptionHandler(new ComputeFailureHandler(name, this::fail));
        ring.addGatingSequences(processor.getSequence());
        inbound = new InboundReceiver(server, ring, o.maxFrameBytes(), ownHello(), this::checkUpstream, hop, name, helloTimeoutMillis);

        metricsLog.start();
        startNanos = System.nanoTime();
        consumerThread = new Thread(this::runConsumer, name + "-compute");
        inboundThread = new Thread(inbound, name + "-inbound");
        consumerThread.start();
        inboundThread.start();
        state.set(State.RUNNING);
        log(String.format(Locale.ROOT, "running: ring %d x %d KB slots, wait %s%s", o.ringSize(), slotBytes / 1024,
                o.waitMode().name().toLowerCase(Locale.ROOT), o.waitMode() == WaitMode.SPIN && o.cpu() >= 0 ? " on CPU " + o.cpu() : ""));
    }

    private static java.nio.file.Path tempDir() {
        try {
            return Files.createTempDirectory("tnsr-stage-metrics");
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private WaitStrategy waitStrategy() {
        return switch (o.waitMode()) {
            case SPIN -> new BusySpinWaitStrategy();
            case BACKOFF -> PhasedBackoffWaitStrategy.withLock(20, 200, TimeUnit.MICROSECONDS);
            case BLOCK -> new BlockingWaitStrategy();
        };
    }

    private void runConsumer() {
        if (o.waitMode() == WaitMode.SPIN && o.cpu() >= 0) {
            try (AffinityLock lock = AffinityLock.acquireLock(o.cpu())) {
                log("compute thread pinned: " + lock);
                processor.run();
            }
        } else {
            processor.run();
        }
    }

    /** Stops after the current frame; idempotent. */
    public void stop() {
        if (state.get() == State.STOPPED || state.get() == State.FAILED) {
            stopped.countDown();
            return;
        }
        state.set(State.STOPPED);
        shutdownThreads();
    }

    private void fail(String why) {
        failure = why;
        log("FAILED: " + why);
        state.set(State.FAILED);
        shutdownThreads();
    }

    private void shutdownThreads() {
        if (inbound != null) {
            inbound.stop();
        }
        if (processor != null) {
            processor.halt();
        }
        stopped.countDown();
    }

    /** Waits until the stage stopped (SHUTDOWN passed, or failure); false on timeout. */
    public boolean awaitStop(long timeout, TimeUnit unit) throws InterruptedException {
        return stopped.await(timeout, unit);
    }

    public String failure() {
        return failure;
    }

    /** Nanoseconds spent running layers / since start: the stage's compute share. */
    public double computeShare() {
        long up = System.nanoTime() - startNanos;
        return up <= 0 ? 0 : (double) computeNanos() / up;
    }

    /** Nanoseconds spent running layers so far. */
    public long computeNanos() {
        return counters == null ? closedComputeNanos : counters.computeNanos().get();
    }

    @Override
    public void close() {
        stop();
        try {
            if (consumerThread != null) {
                consumerThread.join(5000);
            }
            if (inboundThread != null) {
                inboundThread.join(5000);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (metricsLog != null) {
            closedComputeNanos = computeNanos();
            counters = null;        // their file is unmapped now
            metricsLog.close();
        }
        try {
            if (downstream != null) {
                downstream.closeQuietly();
            }
            if (server != null) {
                server.close();
            }
        } catch (IOException ignored) {
            // closing
        }
        file.close();
    }
}
