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
import io.tnsr.engine.forward.RangeWarmup;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.metrics.LatencyMetric;
import io.tnsr.engine.metrics.MetricsLog;
import io.tnsr.engine.metrics.RunDirectory;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.pipeline.FrameSizes;
import io.tnsr.engine.pipeline.WaitMode;
import io.tnsr.engine.gguf.ModelFingerprint;
import io.tnsr.engine.link.Handshake;
import io.tnsr.engine.link.LinkOptions;
import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.HandshakeException;
import io.tnsr.wire.Hello;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import net.openhft.affinity.AffinityLock;
import org.agrona.concurrent.status.AtomicCounter;

/**
 * One pipeline stage: its layers, its ring, its threads, its links, and their lifecycle.
 *
 * <pre>
 *   upstream link -> [session thread] -> Disruptor ring of FrameSlots -> [consumer thread:         -> downstream link
 *                    claim, read, publish                                 ComputeHandler, then OutboundSender]
 *   listener -> [acceptor thread] -> [handshake threads, at most {@value #MAX_PENDING_HANDSHAKES}, and once
 *                                      {@value #PER_ADDRESS_BOUND_FROM} are busy at most {@value #MAX_PENDING_HANDSHAKES_PER_ADDRESS} per address]
 *            -> an authenticated upstream (a new session) or the coordinator's return link (last stage)
 *   [liveness thread] every {@value #LIVENESS_TICK_MILLIS} ms: heartbeat on an idle downstream; upstream silent too long?
 * </pre>
 * Usage: {@link #listen()} (binds; the port is known), {@link #start()}, then {@link #awaitStop} until the stage
 * stopped (a SHUTDOWN frame passed through a one-session stage, a failure, or {@link #close()}).
 *
 * <p><b>Sessions.</b> The weights stay loaded; a pipeline run is a session. It starts when an upstream completes the
 * handshake ({@link Handshake}: version, model fingerprint, shapes, frame limits, shared key) and sends ROUTE, the
 * addresses of the stages after this one. The stage connects to the next (handshake, ROUTE with the rest, waits for
 * READY), or, as the last stage, takes the coordinator's return link, then answers READY upstream and publishes a
 * SESSION slot: in ring order the compute thread drops every KV cache of the previous session and the outbound
 * handler switches to the new downstream. A newer authenticated upstream replaces the current one (its connection is
 * closed). Connections still in their handshake never hold up others: each has its own thread, a time limit, and
 * there are at most {@value #MAX_PENDING_HANDSHAKES}; once {@value #PER_ADDRESS_BOUND_FROM} are pending, a remote
 * address that already has {@value #MAX_PENDING_HANDSHAKES_PER_ADDRESS} gets no more, so silent connections from one
 * address cannot take the places of a coordinator at another, while the few overlapping connections of one
 * coordinator (its return link, its data link, a probe) are never refused when no one floods. Connections beyond
 * these bounds are closed at once. Refusals are logged with the address, at most one line per
 * {@value #REFUSAL_LOG_INTERVAL_MILLIS} ms ({@link RefusalLog}).
 *
 * <p><b>Liveness.</b> A downstream link that carried nothing for a heartbeat interval gets a HEARTBEAT (with the
 * frames done and how long the current one has been computing, so a slow stage is told from a hung one); an
 * upstream that sent nothing, not even a heartbeat, for the liveness bound is reported: an ERROR naming the link
 * goes downstream (towards the coordinator) and the session ends.
 *
 * <p>The consumer thread runs the compute and outbound handlers one after the other for each frame; with
 * {@link WaitMode#SPIN} it busy-spins pinned to its CPU (OpenHFT affinity), with {@link WaitMode#BACKOFF} it
 * spins briefly, yields, then blocks, and with {@link WaitMode#BLOCK} it sleeps until signalled.
 */
public final class StageRuntime implements AutoCloseable {

    /** Lifecycle, in order; FAILED can follow any state. */
    public enum State { CREATED, LISTENING, RUNNING, STOPPED, FAILED }

    /** Most connections in their handshake at once; more are closed on arrival. */
    static final int MAX_PENDING_HANDSHAKES = 8;
    /**
     * Most connections in their handshake at once from one remote address while {@link #PER_ADDRESS_BOUND_FROM} or
     * more are pending in all; more from it are closed on arrival.
     */
    static final int MAX_PENDING_HANDSHAKES_PER_ADDRESS = 2;
    /** Pending handshakes in all from which {@link #MAX_PENDING_HANDSHAKES_PER_ADDRESS} applies: half the places. */
    static final int PER_ADDRESS_BOUND_FROM = MAX_PENDING_HANDSHAKES / 2;
    /** Refused connections are logged at most once per this interval (the first at once, the rest counted). */
    static final long REFUSAL_LOG_INTERVAL_MILLIS = 5000;
    /** How often the liveness thread looks. */
    static final long LIVENESS_TICK_MILLIS = 50;
    /** Longest wait for the compute thread to pass a SHUTDOWN its upstream closed right after (the ring's frames run first). */
    private static final long SHUTDOWN_FORWARD_NANOS = TimeUnit.SECONDS.toNanos(30);
    /**
     * KV cache a warmed-up stage allocates before it serves: 256 MiB (or its whole capacity, if smaller). On a
     * stories110M-shape F32 model that is 16 sequences of 227 positions across all 12 layers.
     */
    static final long WARM_KV_BYTES = 256L << 20;
    /**
     * Counters in the stage's counters file ({@code <name>-metrics.counters}), after the stage's name: bytes of weights
     * it loads at start-up, and how many of those are loaded so far; a coordinator reads them for its progress bar.
     */
    public static final String LOAD_BYTES_TOTAL = "-load-bytes-total";
    public static final String LOAD_BYTES = "-load-bytes";

    /** An authenticated upstream link and the HELLO it sent. */
    private record Upstream(FrameChannel channel, Hello hello, String name) {
    }

    private final StageOptions o;
    private final LinkOptions links;
    private final GgufFile file;
    private final LayerRange range;
    private final ModelFingerprint fingerprint;
    private final String name;
    private final AtomicReference<State> state = new AtomicReference<>(State.CREATED);
    private final CountDownLatch stopped = new CountDownLatch(1);
    private final BlockingQueue<Upstream> arrivals = new LinkedBlockingQueue<>();
    private final AtomicReference<FrameChannel> returnLink = new AtomicReference<>();
    /** Connections in their handshake per remote address; their sum is {@link #pendingHandshakes}. Guarded by itself. */
    private final Map<InetAddress, Integer> pendingByAddress = new HashMap<>();
    private int pendingHandshakes;
    private final RefusalLog refusals = new RefusalLog(TimeUnit.MILLISECONDS.toNanos(REFUSAL_LOG_INTERVAL_MILLIS));
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();
    private volatile Upstream current;
    /** The downstream link of the session in progress (null between sessions): a failure on another link is a past session's. */
    private volatile FrameChannel sessionDownstream;
    private volatile int sessionIndex;
    private volatile int sessionCount;
    private volatile boolean shutdownSeen;
    private volatile String failure;
    private ServerSocketChannel server;
    private InboundReceiver inbound;
    private OutboundSender sender;
    private ComputeHandler compute;
    private BatchEventProcessor<FrameSlot> processor;
    private Thread acceptorThread;
    private Thread sessionThread;
    private Thread consumerThread;
    private ExecutorService handshakes;
    private ScheduledExecutorService liveness;
    private final MetricsLog metricsLog;
    /** Where metricsLog writes: the --metrics-dir, or a temporary directory deleted on close. */
    private final RunDirectory metricsDir;
    private volatile ComputeHandler.Counters counters;
    private long closedComputeNanos;
    private long startNanos;
    private long lastBusyReportNanos;

    /** Loads the stage's layers (mapping only their weights), sizes its KV cache, and fingerprints the model file. */
    public StageRuntime(StageOptions options) {
        this.o = options;
        this.links = options.link();
        this.name = options.name();
        this.file = GgufFile.open(options.model());
        MetricsLog log = null;
        RunDirectory dir = null;
        LayerRange layers = null;
        try {
            LlamaConfig c = LlamaConfig.fromGguf(file);
            if (o.layerTo() > c.layers()) {
                throw new IllegalArgumentException("layers [" + o.layerFrom() + ", " + o.layerTo() + ") are outside the model's "
                        + c.layers() + " layers");
            }
            KvCachePool pool = KvCachePool.sized(o.layerTo() - o.layerFrom(), c.kvDim(), c.contextLength(), o.kvCacheTokens(),
                    o.kvCacheType());
            // Created before the weights load, so that the loading counters are there for the coordinator to read.
            dir = RunDirectory.namedOrTemporary(o.metricsDir(), "tnsr-stage-metrics");
            log = new MetricsLog(dir.path(), 1000, name + "-metrics");
            log.counter(name + LOAD_BYTES_TOTAL, "bytes (in the model file) of the weights this stage loads at start-up")
                    .setRelease(LayerRange.loadBytes(file, c, o.layerFrom(), o.layerTo()));
            AtomicCounter loaded = log.counter(name + LOAD_BYTES, "bytes of those loaded so far (start-up progress)");
            layers = new LayerRange(file, c, o.layerFrom(), o.layerTo(), pool, o.maxTokensPerFrame(), o.maxSequencesPerFrame(),
                    o.threads(), loaded::setRelease);
            this.range = layers;
            this.fingerprint = links.fingerprintCache() != null ? ModelFingerprint.of(o.model(), links.fingerprintCache())
                    : ModelFingerprint.of(o.model());
            this.sessionIndex = o.stageIndex();
            this.sessionCount = o.stageCount();
            info(String.format(Locale.ROOT, "layers [%d, %d) of %s (%s), %.1f MB of weights loaded, KV cache up to %d positions (%.0f MB, %s),"
                            + " fingerprint %s (%s %.2f s)", o.layerFrom(), o.layerTo(), o.model().getFileName(), c.describe(),
                    file.mappedBytes() / 1e6, pool.capacityTokens(), pool.capacityBytes() / 1e6, pool.type().key(),
                    fingerprint.shortHex(),
                    fingerprint.cached() ? "cached," : "computed in", fingerprint.computeNanos() / 1e9));
            if (o.warmupMillis() > 0) {
                warmUp(layers);
            }
            this.metricsLog = log;
            this.metricsDir = dir;
        } catch (IOException e) {
            closeAfterFailure(layers, log, dir);
            throw new UncheckedIOException("cannot create the stage's metrics directory: " + e.getMessage(), e);
        } catch (RuntimeException e) {
            closeAfterFailure(layers, log, dir);
            throw e;
        }
    }

    private void closeAfterFailure(LayerRange layers, MetricsLog log, RunDirectory dir) {
        if (layers != null) {
            layers.close();
        }
        if (log != null) {
            log.close();
        }
        if (dir != null) {
            dir.close();
        }
        file.close();
    }

    public State state() {
        return state.get();
    }

    public LayerRange range() {
        return range;
    }

    /** The model file's fingerprint, as this stage's HELLO carries it. */
    public ModelFingerprint fingerprint() {
        return fingerprint;
    }

    /** A warning or a failure, always shown. */
    void log(String msg) {
        io.tnsr.engine.util.ConsoleLog.show("[" + name + "] " + msg);
    }

    /** A routine line (loaded, running, a session started), shown when the process is verbose. */
    private void info(String msg) {
        io.tnsr.engine.util.ConsoleLog.info("[" + name + "] " + msg);
    }

    /** Binds the listening port; returns the port actually bound. */
    public int listen() throws IOException {
        server = ServerSocketChannel.open();
        if (o.socketBufferBytes() > 0) {
            server.setOption(java.net.StandardSocketOptions.SO_RCVBUF, o.socketBufferBytes());
        }
        try {
            server.bind(new InetSocketAddress(o.host(), o.port()), 64);
        } catch (IOException e) {
            server.close();
            throw new IOException("cannot listen on " + o.host() + ":" + o.port() + ": " + e.getMessage(), e);
        }
        state.set(State.LISTENING);
        return ((InetSocketAddress) server.getLocalAddress()).getPort();
    }

    /**
     * Runs the layers on scratch sequences until the kernels are compiled, or for at most the warm-up bound; then
     * allocates KV cache pages up to {@link #WARM_KV_BYTES} (at most the capacity), so that the first sequences do not
     * wait for new memory either.
     */
    private void warmUp(LayerRange layers) {
        RangeWarmup.Outcome w = new RangeWarmup(layers).run(TimeUnit.MILLISECONDS.toNanos(o.warmupMillis()));
        long t = System.nanoTime();
        int pages = layers.cache().preallocate(WARM_KV_BYTES);
        String kv = String.format(Locale.ROOT, "; %d KV cache pages (%.0f MB) allocated in %.2f s", pages,
                (double) pages * layers.cache().pageBytes() / 1e6,
                (System.nanoTime() - t) / 1e9);
        if (w.settled()) {
            info(String.format(Locale.ROOT, "warmed up in %.2f s (%d rounds on scratch sequences; the kernels are compiled)%s",
                    w.nanos() / 1e9, w.rounds(), kv));
        } else if (w.note() != null) {
            log(String.format(Locale.ROOT, "warm-up stopped after %.2f s (%d rounds): %s%s", w.nanos() / 1e9, w.rounds(), w.note(), kv));
        } else {
            info(String.format(Locale.ROOT, "warm-up reached its bound of %d ms (%d rounds); the kernels may still be compiling%s",
                    o.warmupMillis(), w.rounds(), kv));
        }
    }

    /** This stage's HELLO as the {@code index}-th of {@code count} stages. */
    private Hello ownHello(int index, int count) {
        LlamaConfig c = range.config();
        return new Hello(HelloPayload.PROTOCOL_VERSION, HelloPayload.ROLE_STAGE, index, count, o.layerFrom(), o.layerTo(),
                c.dim(), o.maxTokensPerFrame(), c.vocabSize(), c.layers(), o.maxSequencesPerFrame(), o.maxFrameBytes(), 0,
                links.heartbeatMillis(), fingerprint.bytes(), null, null);
    }

    /** The place an upstream's HELLO gives this stage. */
    private int indexFor(Hello peer) {
        if (peer.role() == HelloPayload.ROLE_COORDINATOR) {
            return peer.stageIndex();
        }
        return peer.stageIndex() + 1;
    }

    /** Whether an upstream (or the coordinator's return link) may connect; null to accept, or the reason to refuse. */
    private String checkUpstream(Hello h, String peerName) {
        if (h.role() == HelloPayload.ROLE_COORDINATOR && h.has(HelloPayload.FLAG_PROBE)) {
            return null;   // a probe takes no place in the pipeline
        }
        boolean returnLink = h.role() == HelloPayload.ROLE_COORDINATOR && h.has(HelloPayload.FLAG_RETURN_LINK);
        String me = name + " (layers [" + o.layerFrom() + ", " + o.layerTo() + "))";
        if (returnLink && !range.isLast()) {
            return peerName + " opened a return link, but " + me + " is not the last stage of the model ("
                    + range.config().layers() + " layers)";
        }
        if (h.role() == HelloPayload.ROLE_COORDINATOR && !returnLink && !range.isFirst()) {
            return peerName + " must connect to the first stage; " + me + " does not start at layer 0";
        }
        if (h.role() == HelloPayload.ROLE_STAGE && h.layerTo() != o.layerFrom()) {
            return "layer ranges do not meet: " + peerName + " holds layers [" + h.layerFrom() + ", " + h.layerTo() + "), "
                    + me + " starts at layer " + o.layerFrom();
        }
        int index = indexFor(h);
        if (o.stageIndex() >= 0 && (index != o.stageIndex() || h.stageCount() != o.stageCount())) {
            return peerName + " takes " + name + " for stage " + index + " of " + h.stageCount() + ", but it is stage "
                    + o.stageIndex() + " of " + o.stageCount();
        }
        if (index < 0 || index >= h.stageCount()) {
            return peerName + " places " + me + " at " + index + " of " + h.stageCount() + " stages";
        }
        return null;
    }

    /** Whether the next stage fits after this one; null to accept, or the reason to refuse. */
    private String checkDownstream(Hello h, String peerName, int myIndex, int count) {
        if (h.role() != HelloPayload.ROLE_STAGE) {
            return peerName + " is not a stage";
        }
        if (h.layerFrom() != o.layerTo()) {
            return "layer ranges do not meet: " + name + " ends at layer " + o.layerTo() + ", " + peerName + " holds layers ["
                    + h.layerFrom() + ", " + h.layerTo() + ")";
        }
        if (h.stageIndex() != myIndex + 1 || h.stageCount() != count) {
            return name + " expects stage " + (myIndex + 1) + " of " + count + " after it, but " + peerName + " answered as stage "
                    + h.stageIndex() + " of " + h.stageCount();
        }
        return null;
    }

    /** Starts the consumer, session, acceptor and liveness threads. */
    public void start() {
        if (state.get() != State.LISTENING) {
            throw new IllegalStateException(name + " must listen before it starts (state " + state.get() + ")");
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

        String upstreamName = o.stageIndex() < 0 ? "upstream" : o.stageIndex() == 0 ? "coordinator" : "stage" + (o.stageIndex() - 1);
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

        sender = new OutboundSender(out, residence, new OutboundSender.Listener() {
            /** The ended session's link last reported lost (called on the outbound handler's thread only). */
            private FrameChannel reportedOld;

            @Override
            public void downstreamFailed(FrameChannel link, IOException e) {
                if (link != sessionDownstream) {
                    // a frame of an ended session, still in the ring when the next session began, met that session's
                    // dead link: the session it belonged to is over, the current one goes on. Said once per link:
                    // every frame of that session still in the ring fails the same way.
                    if (link != reportedOld) {
                        reportedOld = link;
                        log("a previous session's downstream " + describe(link) + " lost: " + e.getMessage()
                                + "; the frames still queued for it are dropped");
                    }
                    return;
                }
                sessionBroken("downstream " + describe(link) + " lost: " + e.getMessage());
            }

            @Override
            public void shutdownForwarded() {
                shutdownSeen = true;
                if (o.once()) {
                    stop();
                } else {
                    info("session ended: SHUTDOWN passed through");
                }
            }
        });
        compute = new ComputeHandler(range, name, out, sender, queueWait, computeTime, perToken, counters,
                TimeUnit.MICROSECONDS.toNanos(o.stallThresholdMicros()));
        RingBuffer<FrameSlot> ring = RingBuffer.createSingleProducer(() -> new FrameSlot(slotBytes), o.ringSize(), waitStrategy());
        @SuppressWarnings("unchecked")
        AggregateEventHandler<FrameSlot> handlers = new AggregateEventHandler<>(compute, sender);
        processor = new BatchEventProcessorBuilder().build(ring, ring.newBarrier(), handlers);
        processor.setExceptionHandler(new ComputeFailureHandler(name, this::fail));
        ring.addGatingSequences(processor.getSequence());
        inbound = new InboundReceiver(ring, hop, name);

        metricsLog.start();
        startNanos = System.nanoTime();
        handshakes = Executors.newFixedThreadPool(MAX_PENDING_HANDSHAKES, daemon(name + "-handshake"));
        liveness = Executors.newSingleThreadScheduledExecutor(daemon(name + "-liveness"));
        consumerThread = new Thread(this::runConsumer, name + "-compute");
        sessionThread = new Thread(this::runSessions, name + "-inbound");
        acceptorThread = new Thread(this::runAcceptor, name + "-acceptor");
        acceptorThread.setDaemon(true);
        state.set(State.RUNNING);
        consumerThread.start();
        sessionThread.start();
        acceptorThread.start();
        liveness.scheduleWithFixedDelay(this::checkLiveness, LIVENESS_TICK_MILLIS, LIVENESS_TICK_MILLIS, TimeUnit.MILLISECONDS);
        info(String.format(Locale.ROOT, "running: ring %d x %d KB slots, wait %s%s", o.ringSize(), slotBytes / 1024,
                o.waitMode().name().toLowerCase(Locale.ROOT), o.waitMode() == WaitMode.SPIN && o.cpu() >= 0 ? " on CPU " + o.cpu() : ""));
    }

    /**
     * Acceptor thread: hands each connection to a handshake thread, or closes it when too many are pending, in all or
     * from its address.
     */
    private void runAcceptor() {
        while (state.get() == State.RUNNING) {
            SocketChannel socket;
            try {
                socket = server.accept();
            } catch (IOException e) {
                if (state.get() == State.RUNNING) {
                    log("accepting failed: " + e.getMessage());
                }
                return;
            }
            InetAddress from = remoteHost(socket);
            if (from == null) {
                closeQuietly(socket);   // reset before it was looked at
                continue;
            }
            String full = admit(from);
            if (full != null) {
                refused(from, remote(socket), full);
                closeQuietly(socket);
                continue;
            }
            try {
                handshakes.execute(() -> {
                    try {
                        handshake(socket, from);
                    } finally {
                        release(from);
                    }
                });
            } catch (RejectedExecutionException e) {
                release(from);
                closeQuietly(socket);
            }
        }
    }

    /**
     * Takes a handshake place for a connection from {@code from}: null when taken, else why there is none. An address
     * may take any free place while fewer than half are taken, then only up to its share.
     */
    private String admit(InetAddress from) {
        synchronized (pendingByAddress) {
            int fromThere = pendingByAddress.getOrDefault(from, 0);
            if (fromThere >= MAX_PENDING_HANDSHAKES_PER_ADDRESS && pendingHandshakes >= PER_ADDRESS_BOUND_FROM) {
                return fromThere + " handshakes from this address already pending, " + pendingHandshakes + " in all (at most "
                        + MAX_PENDING_HANDSHAKES_PER_ADDRESS + " per address once " + PER_ADDRESS_BOUND_FROM + " are pending)";
            }
            if (pendingHandshakes >= MAX_PENDING_HANDSHAKES) {
                return pendingHandshakes + " handshakes already pending (at most " + MAX_PENDING_HANDSHAKES + ")";
            }
            pendingByAddress.put(from, fromThere + 1);
            pendingHandshakes++;
            return null;
        }
    }

    /** Gives back the handshake place a connection from {@code from} held. */
    private void release(InetAddress from) {
        synchronized (pendingByAddress) {
            pendingHandshakes--;
            pendingByAddress.computeIfPresent(from, (a, n) -> n > 1 ? n - 1 : null);
        }
    }

    /** Logs a refused connection (from host {@code from}, at {@code peer}: host and port) through the rate limit. */
    private void refused(InetAddress from, String peer, String why) {
        String line = refusals.refused(from.getHostAddress(), peer, why, System.nanoTime());
        if (line != null) {
            log(line);
        }
    }

    /** Handshake thread: checks a new connection; an upstream starts a session, a return link waits for one. */
    private void handshake(SocketChannel socket, InetAddress from) {
        String address = remote(socket);
        FrameChannel ch;
        try {
            FrameChannel.tune(socket);
            if (o.socketBufferBytes() > 0) {
                socket.setOption(java.net.StandardSocketOptions.SO_SNDBUF, o.socketBufferBytes());   // a return link is written here
            }
            ch = new FrameChannel(socket, address, o.maxFrameBytes());
        } catch (IOException e) {
            closeQuietly(socket);
            return;
        }
        try {
            Hello peer = Handshake.answer(ch, h -> ownHello(indexFor(h), h.stageCount()), links.key(), name,
                    links.livenessMillis(), this::checkUpstream, links.handshakeMillis());
            String peerName = Handshake.name(peer, address);
            if (peer.has(HelloPayload.FLAG_PROBE)) {
                ch.drainAndClose(100);   // alive, same model, same key: that is all a probe asks
                return;
            }
            if (peer.role() == HelloPayload.ROLE_COORDINATOR && peer.has(HelloPayload.FLAG_RETURN_LINK)) {
                FrameChannel old = returnLink.getAndSet(ch);
                if (old != null) {
                    old.closeQuietly();
                }
                info("return link from " + peerName + " ready");
                return;
            }
            Upstream active = current;   // read before the new one can become current
            arrivals.add(new Upstream(ch, peer, peerName));
            if (active != null) {
                log("a new upstream, " + peerName + ", replaces " + active.name() + ": the previous session is dropped");
                active.channel().closeQuietly();
            }
        } catch (IOException e) {
            ch.closeQuietly();
            refused(from, address, e.getMessage());
        }
    }

    /** Session thread: one session after another (one, then stop, for a one-session stage). */
    private void runSessions() {
        while (state.get() == State.RUNNING) {
            Upstream up;
            try {
                up = arrivals.poll(100, TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                return;
            }
            if (up == null || arrivals.peek() != null) {   // a newer upstream is already waiting: this one is stale
                if (up != null) {
                    up.channel().closeQuietly();
                }
                continue;
            }
            current = up;
            String why;
            try {
                openSession(up);
                inbound.serve(up.channel());
                why = "upstream " + up.name() + " closed the connection";
            } catch (java.nio.channels.AsynchronousCloseException e) {
                why = "the upstream link was closed here (a newer session, or the liveness check)";
            } catch (IOException | RuntimeException e) {
                why = e.getMessage() != null ? e.getMessage() : e.toString();
            } finally {
                current = null;
                up.channel().closeQuietly();
            }
            awaitShutdownForwarded(inbound.shutdownSequence());
            if (!shutdownSeen && state.get() == State.RUNNING && why != null && !why.startsWith("stage")) {
                sender.sendError("stage" + sessionIndex + ": " + why);   // tell the coordinator why the session broke here
            }
            sessionDownstream = null;
            inbound.publishSession(null);
            if (state.get() != State.RUNNING) {
                return;
            }
            if (o.once() && shutdownSeen) {
                stop();
                return;
            }
            log("session ended: " + why + (o.once() ? "; waiting for the coordinator to reconnect" : ""));
        }
    }

    /**
     * When the session read a SHUTDOWN (ring sequence {@code at}, or -1 if none), waits until the compute thread has
     * passed it, so that an upstream closing right after SHUTDOWN reads as the session's normal end rather than a
     * broken link. Bounded: the frames ahead of it in the ring must run first, and a compute thread that fails ends
     * the wait through the stage's state.
     */
    private void awaitShutdownForwarded(long at) {
        if (at < 0) {
            return;
        }
        long deadline = System.nanoTime() + SHUTDOWN_FORWARD_NANOS;
        while (processor.getSequence().get() < at && state.get() == State.RUNNING && System.nanoTime() < deadline) {
            LockSupport.parkNanos(100_000);
        }
    }

    /**
     * Reads the route, connects the rest of the pipeline (the next stage, or the coordinator's return link), answers
     * READY upstream and publishes the session start. Any failure goes upstream as ERROR naming who failed.
     */
    private void openSession(Upstream up) throws IOException {
        FrameChannel ch = up.channel();
        int index = indexFor(up.hello());
        int count = up.hello().stageCount();
        String self = "stage" + index;
        FrameChannel next = null;
        try {
            String route = ch.readText(MessageType.ROUTE, links.handshakeMillis());
            List<String> rest = route.isBlank() ? List.of() : List.of(route.strip().split("\n"));
            String ready;
            if (range.isLast()) {
                if (!rest.isEmpty()) {
                    throw new HandshakeException(self + " holds the model's last layer, but the route lists " + rest.size()
                            + " more stage(s): " + rest);
                }
                next = awaitReturnLink(self);
                ready = "";
            } else {
                if (rest.isEmpty()) {
                    throw new HandshakeException(self + " does not hold the model's last layer (it ends at " + o.layerTo()
                            + "), but the route lists no stage after it");
                }
                String target = rest.get(0);
                int colon = target.lastIndexOf(':');
                if (colon <= 0) {
                    throw new HandshakeException("the route's address '" + target + "' for stage" + (index + 1) + " is not host:port");
                }
                String peerDesc = "stage" + (index + 1) + " at " + target;
                try {
                    next = new FrameChannel(FrameChannel.connect(target.substring(0, colon), Integer.parseInt(target.substring(colon + 1)),
                            links.connectMillis(), o.socketBufferBytes()), peerDesc, o.maxFrameBytes());
                } catch (IOException | NumberFormatException e) {
                    throw new HandshakeException(self + " cannot reach " + peerDesc + ": " + e.getMessage(), e);
                }
                final int myIndex = index;
                Handshake.initiate(next, ownHello(index, count), links.key(), self, links.livenessMillis(),
                        (h, n) -> checkDownstream(h, n, myIndex, count), links.handshakeMillis());
                next.sendText(MessageType.ROUTE, String.join("\n", rest.subList(1, rest.size())));
                ready = next.readText(MessageType.READY, links.handshakeMillis() * (rest.size() + 1));
            }
            sessionIndex = index;
            sessionCount = count;
            shutdownSeen = false;
            String line = String.format(Locale.ROOT, "%s layers [%d, %d) at %s fingerprint %s", self, o.layerFrom(), o.layerTo(),
                    o.host() + ":" + ((InetSocketAddress) server.getLocalAddress()).getPort(), fingerprint.shortHex());
            ch.sendText(MessageType.READY, ready.isEmpty() ? line : line + "\n" + ready);
            sessionDownstream = next;
            inbound.publishSession(next);
            info("session started: upstream " + up.name() + (next != null ? ", downstream " + next.peer() : ""));
            next = null;
        } catch (HandshakeException e) {
            try {
                ch.sendError(0, 0, ErrorCode.UNEXPECTED_MESSAGE, ErrorCode.SEQ_ID_NONE, e.getMessage());
            } catch (IOException ignored) {
                // the upstream is gone; the reason is in this log
            }
            throw new IOException("session set-up failed: " + e.getMessage(), e);
        } finally {
            if (next != null) {
                next.closeQuietly();
            }
        }
    }

    /** The coordinator's return link for a new session, waiting for it within the handshake bound. */
    private FrameChannel awaitReturnLink(String self) throws HandshakeException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(links.handshakeMillis());
        while (System.nanoTime() < deadline) {
            FrameChannel r = returnLink.getAndSet(null);
            if (r != null) {
                return r;
            }
            LockSupport.parkNanos(5_000_000);
        }
        throw new HandshakeException("the coordinator opened no return link to " + self + " within " + links.handshakeMillis() + " ms");
    }

    /**
     * Liveness thread: a heartbeat on an idle downstream; an upstream silent past the bound is reported downstream
     * and its session ended; an upstream busy on one frame for long is logged (alive, slow).
     */
    private void checkLiveness() {
        long now = System.nanoTime();
        String refusedLately = refusals.flush(now);
        if (refusedLately != null) {
            log(refusedLately);
        }
        ComputeHandler.Counters c = counters;
        long busySince = compute.busySinceNanos();
        sender.heartbeatIfIdle(now, TimeUnit.MILLISECONDS.toNanos(links.heartbeatMillis()),
                c == null ? 0 : (int) c.frames().get(), busySince == 0 ? 0 : (int) Math.min(Integer.MAX_VALUE, (now - busySince) / 1_000_000));
        Upstream up = current;
        if (up == null || !inbound.serving()) {
            return;   // no session, or one still being set up (its steps are bounded by the handshake limits)
        }
        long silentNanos = now - inbound.lastHeardNanos();
        if (silentNanos > TimeUnit.MILLISECONDS.toNanos(links.livenessMillis())) {
            String upName = up.hello().role() == HelloPayload.ROLE_COORDINATOR ? "coordinator" : "stage" + up.hello().stageIndex();
            String why = String.format(Locale.ROOT, "stage%d: no frame or heartbeat from %s for %.1f s on link %s->stage%d:"
                            + " %s is hung or the link is down", sessionIndex, up.name(), silentNanos / 1e9, upName, sessionIndex, upName);
            log(why);
            sender.sendError(why);
            current = null;
            up.channel().closeQuietly();
            return;
        }
        int busy = inbound.upstreamBusyMillis();
        if (busy > links.livenessMillis() && now - lastBusyReportNanos > TimeUnit.MILLISECONDS.toNanos(links.livenessMillis())) {
            lastBusyReportNanos = now;
            log(String.format(Locale.ROOT, "%s is alive but slow: working on one frame for %.1f s (%d frames done)",
                    up.name(), busy / 1e3, inbound.upstreamFrames()));
        }
    }

    /** The session's pipeline broke downstream: the session ends (the coordinator reconnects, or ends the stage). */
    private void sessionBroken(String why) {
        log("session ended: " + why);
        Upstream up = current;
        if (up != null) {
            up.channel().closeQuietly();
        }
    }

    private static String describe(FrameChannel ch) {
        return ch == null ? "(none)" : ch.peer();
    }

    /** The remote host of an accepted connection; null when it is gone already. */
    private static InetAddress remoteHost(SocketChannel s) {
        try {
            return s.getRemoteAddress() instanceof InetSocketAddress a ? a.getAddress() : null;
        } catch (IOException e) {
            return null;
        }
    }

    private static String remote(SocketChannel s) {
        try {
            return String.valueOf(s.getRemoteAddress()).replaceFirst("^/", "");
        } catch (IOException e) {
            return "(unknown peer)";
        }
    }

    private static void closeQuietly(SocketChannel s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // dropping it
        }
    }

    private static ThreadFactory daemon(String threadName) {
        return r -> {
            Thread t = new Thread(r, threadName);
            t.setDaemon(true);
            return t;
        };
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
                info("compute thread pinned: " + lock);
                processor.run();
            }
        } else {
            processor.run();
        }
    }

    /** Stops after the current frame; idempotent. */
    public void stop() {
        State now = state.get();
        if (now == State.STOPPED || now == State.FAILED) {
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
        if (server != null) {
            try {
                server.close();
            } catch (IOException ignored) {
                // closing to unblock the acceptor
            }
        }
        Upstream up = current;
        if (up != null) {
            up.channel().closeQuietly();
        }
        if (processor != null) {
            processor.halt();
        }
        if (sender != null) {
            sender.abort(); // a handler stuck writing to a downstream that stopped reading sees the halt only then
        }
        if (liveness != null) {
            liveness.shutdownNow();
        }
        if (handshakes != null) {
            handshakes.shutdownNow();
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

    /** Ids of the threads on the per-frame path (session/inbound and compute), for allocation checks. */
    long[] frameThreadIds() {
        return new long[] {sessionThread.getId(), consumerThread.getId()};
    }

    /**
     * KV cache pages this stage still held when the pipeline's SHUTDOWN reached it, or -1 before one has: 0 when the
     * coordinator ended every sequence it ran (the session's end frees the rest in any case).
     */
    public int kvPagesAtShutdown() {
        ComputeHandler c = compute;
        return c == null ? -1 : c.pagesAtShutdown();
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
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        try {
            if (consumerThread != null) {
                consumerThread.join(5000);
            }
            if (sessionThread != null) {
                sessionThread.join(5000);
            }
            if (liveness != null) { // a tick in progress reads the counters, whose file is unmapped below
                liveness.awaitTermination(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        range.close();          // its matmul workers, once the compute thread is done
        closedComputeNanos = computeNanos();
        counters = null;        // their file is unmapped now
        metricsLog.close();
        metricsDir.close();
        if (sender != null) {
            sender.switchTo(null);
        }
        FrameChannel r = returnLink.getAndSet(null);
        if (r != null) {
            r.closeQuietly();
        }
        try {
            if (server != null) {
                server.close();
            }
        } catch (IOException ignored) {
            // closing
        }
        file.close();
    }
}
