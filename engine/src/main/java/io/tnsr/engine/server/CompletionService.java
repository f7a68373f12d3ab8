package io.tnsr.engine.server;

import io.tnsr.engine.generate.Generator;
import io.tnsr.engine.generate.SequenceState;
import io.tnsr.engine.sampling.Sampler;
import io.tnsr.engine.sampling.SamplingConfig;
import io.tnsr.engine.sampling.TokenLogprobs;
import io.tnsr.engine.scheduler.Scheduler;
import io.tnsr.engine.tokenizer.Tokenizer;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Completions over a serving pipeline: turns a request into a sequence (its prompt's tokens, its own sampler), admits
 * it or refuses it when the running and waiting places are all taken, and routes each chosen token to its
 * {@link Completion}. It is the pipeline's {@link Generator.Listener}, called on the coordinator's thread; everything
 * else is called from request threads.
 *
 * <pre>{@code
 * CompletionService service = new CompletionService(tokenizer, contextLength, vocab, limits, runDir, stages);
 * PipelineRun.serve(stages, settings, model, limits, service, service::attach, stopping::get);   // a thread of its own
 * Completion c = service.submit(new CompletionService.Request(prompt, 128, SamplingConfig.GREEDY, List.of("\n\n")));
 * for (String d; (d = c.nextDelta(100)) != null; ) { send(d); }   // or c.awaitText(timeout)
 * }</pre>
 */
public final class CompletionService implements Generator.Listener {

    /**
     * @param prompt    the text to continue
     * @param maxTokens most tokens to generate: at most what the context has room for after the prompt, or
     *                  {@link #TO_CONTEXT} to run until the context is full
     * @param sampling  how tokens are chosen (a seed gives the tokens the same prompt gives alone with that seed)
     * @param stops     strings that end the text (not included in it)
     * @param special   whether special tokens written in the prompt ({@code <|eot_id|>}, a leading {@code <s>}) are
     *                  read as those tokens, as a rendered chat template needs; BOS is then added only when the prompt
     *                  does not start with it
     * @param ignoreEos keep generating through end-of-generation tokens until {@code maxTokens} (for benchmarks)
     * @param logprobs  -1 for none; else report each generated token's log-probability and those of this many most
     *                  likely tokens (0 to {@link TokenLogprobs#MAX_TOP})
     * @param defaultMaxTokens whether {@code maxTokens} is the API's default rather than the client's choice: then a
     *                  prompt that leaves less room ends the answer when the context is full instead of being refused
     */
    public record Request(String prompt, int maxTokens, SamplingConfig sampling, List<String> stops, boolean special,
                          boolean ignoreEos, int logprobs, boolean defaultMaxTokens) {
        /** {@code maxTokens} of a request without a bound: it ends at its end of text or when the context is full. */
        public static final int TO_CONTEXT = Integer.MAX_VALUE;

        public Request(String prompt, int maxTokens, SamplingConfig sampling, List<String> stops) {
            this(prompt, maxTokens, sampling, stops, false, false, -1);
        }

        /** A request whose {@code maxTokens} the client chose: more than the context has room for is refused. */
        public Request(String prompt, int maxTokens, SamplingConfig sampling, List<String> stops, boolean special,
                       boolean ignoreEos, int logprobs) {
            this(prompt, maxTokens, sampling, stops, special, ignoreEos, logprobs, false);
        }

        public Request {
            if (logprobs < -1 || logprobs > TokenLogprobs.MAX_TOP) {
                throw new InvalidRequestException("the number of top log-probabilities must be 0 to " + TokenLogprobs.MAX_TOP
                        + ", got " + logprobs);
            }
            stops = List.copyOf(stops);
            if (maxTokens < 1) {
                throw new InvalidRequestException("max_tokens must be at least 1, got " + maxTokens);
            }
            if (stops.stream().anyMatch(String::isEmpty)) {
                throw new InvalidRequestException("a stop string must not be empty");
            }
        }
    }

    /**
     * A request that cannot be served as asked (an HTTP server answers 400), with the request parameter it is about
     * and a code that says what is wrong with it (OpenAI's {@code param} and {@code code}; either may be null).
     */
    public static final class InvalidRequestException extends RuntimeException {
        private static final long serialVersionUID = 1L;
        private final String param;
        private final String code;

        public InvalidRequestException(String message) {
            this(message, null, null);
        }

        public InvalidRequestException(String message, String param, String code) {
            super(message);
            this.param = param;
            this.code = code;
        }

        /** The parameter the request got wrong, such as {@code max_tokens} or {@code messages[1].role}; null if none. */
        public String param() {
            return param;
        }

        /** What is wrong, such as {@code invalid_type} or {@code context_length_exceeded}; null if nothing more precise. */
        public String code() {
            return code;
        }
    }

    /** Every running and waiting place is taken (an HTTP server answers 429). */
    public static final class OverloadedException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public OverloadedException(String message) {
            super(message);
        }
    }

    /**
     * How many requests a service takes.
     *
     * @param maxRunning    sequences the pipeline runs at once (its micro-batches' places)
     * @param maxWaiting    sequences that may wait for a place; beyond running + waiting, {@link #submit} refuses
     * @param maxWaitMillis longest a request waits for a place before it ends unrun ({@link Completion.Finish#EXPIRED}); 0: no limit
     */
    public record Limits(int maxRunning, int maxWaiting, long maxWaitMillis) {
        public Limits {
            if (maxRunning < 1 || maxWaiting < 0 || maxWaitMillis < 0) {
                throw new IllegalArgumentException("service limits: running must be >= 1, waiting and wait >= 0: "
                        + maxRunning + ", " + maxWaiting + ", " + maxWaitMillis + " ms");
            }
        }
    }

    private final Tokenizer tokenizer;
    private final int contextLength;
    private final int vocab;
    private final Limits limits;
    private final ServingMetrics metrics;
    private final AtomicInteger nextId = new AtomicInteger();
    private final AtomicInteger active = new AtomicInteger();
    private final ConcurrentHashMap<Integer, Completion> byId = new ConcurrentHashMap<>();
    private volatile Scheduler scheduler;
    private volatile String down;   // why the pipeline stopped serving, once it has
    private volatile String recovering;   // what a recovery of the pipeline is doing, while one runs

    /**
     * @param runDir where the pipeline's processes keep their counters files (read by {@link #metrics()})
     * @param stages the pipeline's stage count
     */
    public CompletionService(Tokenizer tokenizer, int contextLength, int vocab, Limits limits, Path runDir, int stages) {
        this.tokenizer = tokenizer;
        this.contextLength = contextLength;
        this.vocab = vocab;
        this.limits = limits;
        this.metrics = new ServingMetrics(runDir, stages, this::running, this::waiting);
    }

    /** Connects the pipeline's scheduler once it is up ({@code PipelineRun.serve}'s {@code onReady}). */
    public void attach(Scheduler s) {
        this.scheduler = s;
    }

    /** Whether the pipeline is up and running requests (not starting, failed, or recovering): what {@code /health} says. */
    public boolean ready() {
        return scheduler != null && down == null && recovering == null;
    }

    /**
     * Whether requests are taken: once the pipeline is up and until it has failed. During a recovery they are taken
     * and wait for it (a recovery that gives up ends them with its error).
     */
    public boolean accepting() {
        return scheduler != null && down == null;
    }

    /**
     * A recovery of the pipeline is running ({@code status} says which stage is down and what is done about it), or
     * has ended (null). Requests are still taken meanwhile: they wait, and streams pause.
     */
    public void recovering(String status) {
        this.recovering = status;
    }

    /** What the running recovery is doing, or null. */
    public String recovering() {
        return recovering;
    }

    /** Why the pipeline stopped serving (a stage or link that failed), or null while it serves or starts. */
    public String down() {
        return down;
    }

    /**
     * The pipeline broke: every request in flight ends now with {@code why} ({@link Completion.Finish#ERROR}), and
     * {@link #submit} refuses from now on.
     */
    public void pipelineFailed(String why) {
        down = why;
        for (Completion c : byId.values()) {
            if (byId.remove(c.sequence().index()) != null) {
                active.decrementAndGet();
                c.fail("the pipeline failed: " + why);
                metrics.finished(c.sequence(), Completion.Finish.ERROR);
            }
        }
    }

    /** Sequences running or waiting now. */
    public int active() {
        return active.get();
    }

    /** Sequences in the pipeline's micro-batches (as of the last step). */
    public int running() {
        Scheduler s = scheduler;
        return s == null ? 0 : s.runningNow();
    }

    /** Sequences waiting for a place (as of the last step). */
    public int waiting() {
        Scheduler s = scheduler;
        return s == null ? 0 : s.waitingNow();
    }

    public Limits limits() {
        return limits;
    }

    public Tokenizer tokenizer() {
        return tokenizer;
    }

    public ServingMetrics metrics() {
        return metrics;
    }

    /**
     * Starts a completion.
     *
     * @throws InvalidRequestException the prompt does not fit the model's context (with one token to generate), or
     *                                 {@code maxTokens} asks for more tokens than the context has room for after it
     * @throws OverloadedException     every running and waiting place is taken
     * @throws IllegalStateException   the pipeline is not up
     */
    public Completion submit(Request r) {
        Scheduler s = scheduler;
        if (s == null || down != null) {
            throw new IllegalStateException(down != null ? "the pipeline failed: " + down : "the pipeline is not ready");
        }
        int[] prompt = tokenize(r.prompt(), r.special());
        if (prompt.length == 0) {
            throw new InvalidRequestException("the prompt is empty");
        }
        if (prompt.length >= contextLength) {
            throw new InvalidRequestException("the prompt has " + prompt.length + " tokens; the model's context holds "
                    + contextLength + " with the generated ones", null, "context_length_exceeded");
        }
        // The last token generated is never fed back, so the context holds it beyond the prompt's positions.
        int room = contextLength - prompt.length + 1;
        int maxTokens = r.maxTokens();
        if (maxTokens != Request.TO_CONTEXT && maxTokens > room) {
            if (!r.defaultMaxTokens()) {
                throw new InvalidRequestException("max_tokens is " + maxTokens + ", but after the prompt's " + prompt.length
                        + " tokens the model's context of " + contextLength + " has room for " + room,
                        "max_tokens", "context_length_exceeded");
            }
            maxTokens = room; // a bound the client did not ask for ends with the context, as a request without one does
        }
        if (active.incrementAndGet() > limits.maxRunning() + limits.maxWaiting()) {
            active.decrementAndGet();
            throw new OverloadedException(limits.maxRunning() + " requests are running and " + limits.maxWaiting()
                    + " waiting; try again later");
        }
        int id = nextId.getAndIncrement() & Integer.MAX_VALUE;
        SequenceState seq = new SequenceState(id, 0, r.prompt(), prompt, maxTokens, contextLength,
                r.ignoreEos() ? -1 : tokenizer.bos(), r.ignoreEos() ? t -> false : tokenizer::isEndOfGeneration,
                new Sampler(r.sampling(), vocab));
        if (r.logprobs() >= 0) {
            seq.wantLogprobs(r.logprobs());
        }
        Completion c = new Completion(seq, tokenizer.newDecoder(prompt[prompt.length - 1]), r.stops());
        byId.put(id, c);
        long now = System.nanoTime();
        seq.started(now);
        if (limits.maxWaitMillis() > 0) {
            seq.admitBy(now + TimeUnit.MILLISECONDS.toNanos(limits.maxWaitMillis()));
        }
        s.submit(seq);
        return c;
    }

    /**
     * The prompt's tokens as {@link #submit} runs them: BOS first when the model wants it; with {@code special}, special
     * tokens written in the text are read as such, and BOS is not added again when the text starts with it.
     */
    public int[] tokenize(String prompt, boolean special) {
        if (!special) {
            return tokenizer.encode(prompt, tokenizer.addsBos());
        }
        int[] ids = tokenizer.encode(prompt, false, true);
        if (!tokenizer.addsBos() || (ids.length > 0 && ids[0] == tokenizer.bos())) {
            return ids;
        }
        int[] withBos = new int[ids.length + 1];
        withBos[0] = tokenizer.bos();
        System.arraycopy(ids, 0, withBos, 1, ids.length);
        return withBos;
    }

    /** Stops a completion whose client went away; its text ends where it is ({@link Completion.Finish#CANCELLED}). */
    public void cancel(Completion c) {
        Scheduler s = scheduler;
        if (s != null) {
            s.cancel(c.sequence().index());
        }
    }

    @Override
    public void onToken(SequenceState seq, int token) {
        if (seq.generatedCount() == 1) {
            metrics.firstToken(seq);
        }
        Completion c = byId.get(seq.index());
        if (c != null && c.onToken(token, seq.logprobs())) {
            scheduler.cancel(seq.index());   // a stop string ended the text: end the sequence too
        }
    }

    @Override
    public void onFinished(SequenceState seq) {
        Completion c = byId.remove(seq.index());
        if (c != null) {
            active.decrementAndGet();
            c.onFinished();
            metrics.finished(seq, c.finish());
        }
    }
}
