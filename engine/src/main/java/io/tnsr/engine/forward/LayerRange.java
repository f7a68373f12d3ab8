package io.tnsr.engine.forward;

import io.tnsr.engine.gguf.GgufException;
import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kernels.VectorOps;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.kvcache.KvCachePool.KvCache;
import io.tnsr.engine.kvcache.SequenceException;
import io.tnsr.engine.model.Architecture;
import io.tnsr.engine.model.LayerWeights;
import io.tnsr.engine.model.LlamaConfig;
import io.tnsr.engine.model.RowParts;
import io.tnsr.engine.model.WeightMatrix;
import io.tnsr.engine.util.TaskProgress;
import java.util.function.Consumer;

/**
 * Layers [from, to) of a model of one of the {@link io.tnsr.engine.model.Architecture}s (llama, qwen2, qwen3): the
 * compute one pipeline stage runs. The first range also embeds
 * token ids; the last also applies the final RMSNorm and the classifier. Running [0,2) then [2,5) gives the
 * same logits, bit for bit, as [0,5): every layer runs the same code on the same rows whichever range holds it.
 *
 * <p>The calling loop (one thread; nothing here is thread-safe):
 * <pre>{@code
 * batch.clear().add(seqId, position, tokenCount, wantLogits)...;
 * range.prepare(batch, tokenIds, 0);         // per-sequence errors here (tokenIds null if not first)
 * if (range.isFirst()) range.embed(batch, tokenIds, 0, x);   // else x holds the previous range's output
 * range.forward(batch, x);                    // x: [batch.tokens()][dim], updated in place
 * if (range.isLast()) range.logits(batch, x, logits);        // logits: [batch.logitRows()][vocab]
 * ...
 * range.endSequence(seqId);                   // frees its KV cache
 * range.close();                              // stops the matmul threads, if any
 * }</pre>
 * Steady state allocates nothing: scratch buffers are sized once for {@code maxTokens} rows. With {@code threads > 1}
 * every matmul's rows are shared among that many threads ({@link RowParallel}; the rest of the pass stays on the
 * calling thread); results keep their bits.
 */
public final class LayerRange implements AutoCloseable {
    /** Matmuls per layer, in {@link #parts}' order: wq, wk, wv, wo, gate, up, down. */
    private static final int MATRICES = 7;
    private static final int WQ = 0, WK = 1, WV = 2, WO = 3, GATE = 4, UP = 5, DOWN = 6;

    private final LlamaConfig c;
    private final int from;
    private final int to;
    private final LayerWeights[] layers;     // [to - from]
    private final WeightMatrix embedding;    // [vocab x dim], first range only
    private final float[] outputNorm;        // [dim], last range only
    private final WeightMatrix classifier;   // [vocab x dim], last range only
    private final KvCachePool cache;
    private final float[] invFreq;           // [ropeDim / 2] RoPE inverse frequencies (factors applied)
    private final boolean neox;              // RoPE rotates (x[j], x[j + ropeDim/2]), not (x[2j], x[2j+1])
    private final int qDim;                  // heads x headDim: may differ from dim (qwen3)

    private final int maxTokens;
    private final float[] xb;    // [maxTokens][dim]     normed input of a sublayer, then its output
    private final float[] q;     // [maxTokens][qDim]    queries (heads x headDim)
    private final float[] k;     // [maxTokens][kvDim]   new keys
    private final float[] v;     // [maxTokens][kvDim]   new values
    private final float[] att;   // [maxTokens][qDim]    attention output, before wo
    private final CachedAttention cachedAttention; // a token's attention over its cache, scores a context apart
    private final float[][] scores; // [threads][cachedAttention.scoresLength()] each thread's attention weights of a token
    private final float[] hb;    // [maxTokens][ffn]     gate, then silu(gate) * up
    private final float[] hb2;   // [maxTokens][ffn]     up
    private final float[] cos;   // [maxTokens][ropeDim / 2]
    private final float[] sin;   // [maxTokens][ropeDim / 2]
    private final float[] lastRows; // [maxSequences][dim] normed last rows for the classifier
    private final int[] rowPos;  // [maxTokens] position of each row
    private final KvCache[] rowCache; // [maxTokens] cache of each row's sequence
    private final RowParallel threads;  // the matmul threads, the caller's included
    private final RowParts[] parts;     // [layers][MATRICES] each layer matrix's share per thread
    private final RowParts classifierParts; // last range only

    /**
     * Loads layers [from, to) of {@code file}: maps only their weights (plus the embedding if from == 0, and
     * the output norm and classifier if to == layers).
     *
     * @param maxTokens    most rows (tokens over all sequences) one call may carry
     * @param maxSequences most sequences one call may carry (rows of logits)
     */
    public LayerRange(GgufFile file, LlamaConfig config, int from, int to, KvCachePool cache, int maxTokens,
                      int maxSequences) {
        this(file, config, from, to, cache, maxTokens, maxSequences, bytes -> { });
    }

    /** Told how far loading has got: bytes (in the file) of the range's tensors loaded so far, of {@link #loadBytes}. */
    @FunctionalInterface
    public interface LoadListener {
        void loaded(long bytes);
    }

    /**
     * As {@link #LayerRange(GgufFile, LlamaConfig, int, int, KvCachePool, int, int)}, telling {@code listener} after
     * each layer, the embedding and the classifier how many bytes of {@link #loadBytes} are loaded (a stage publishes
     * it for its coordinator's progress bar).
     */
    public LayerRange(GgufFile file, LlamaConfig config, int from, int to, KvCachePool cache, int maxTokens,
                      int maxSequences, LoadListener listener) {
        this(file, config, from, to, cache, maxTokens, maxSequences, 1, listener);
    }

    /**
     * As {@link #LayerRange(GgufFile, LlamaConfig, int, int, KvCachePool, int, int, LoadListener)}, every matmul's rows
     * shared among {@code threads} threads (the caller's and {@code threads - 1} workers; see {@link RowParallel}).
     */
    public LayerRange(GgufFile file, LlamaConfig config, int from, int to, KvCachePool cache, int maxTokens,
                      int maxSequences, int threads, LoadListener listener) {
        if (threads < 1) {
            throw new IllegalArgumentException("threads must be at least 1, not " + threads);
        }
        if (from < 0 || to > config.layers() || from >= to) {
            throw new IllegalArgumentException("layer range [" + from + ", " + to + ") is not inside [0, "
                    + config.layers() + ")");
        }
        if (cache.layers() != to - from) {
            throw new IllegalArgumentException("KV cache holds " + cache.layers() + " layers, range has " + (to - from));
        }
        this.c = config;
        this.from = from;
        this.to = to;
        this.cache = cache;
        this.layers = new LayerWeights[to - from];
        long loaded = 0;
        try (TaskProgress progress = TaskProgress.start("loading layers " + from + ".." + (to - 1),
                loadBytes(file, config, from, to), TaskProgress.MIB)) {
            for (int l = from; l < to; l++) {
                layers[l - from] = LayerWeights.load(file, config, l);
                loaded += layerBytes(file, l);
                progress.stepTo(loaded);
                listener.loaded(loaded);
            }
            this.embedding = from == 0 ? WeightMatrix.load(file, "token_embd.weight", c.vocabSize(), c.dim()) : null;
            if (from == 0) {
                loaded += tensorBytes(file, "token_embd.weight");
                progress.stepTo(loaded);
                listener.loaded(loaded);
            }
            if (to == config.layers()) {
                this.outputNorm = WeightMatrix.loadVector(file, "output_norm.weight", c.dim());
                String name = classifierName(file);
                this.classifier = from == 0 && name.equals("token_embd.weight")
                        ? embedding : WeightMatrix.load(file, name, c.vocabSize(), c.dim());
                loaded += outputBytes(file, from);
                progress.stepTo(loaded);
                listener.loaded(loaded);
            } else {
                this.outputNorm = null;
                this.classifier = null;
            }
        }
        this.invFreq = ropeInverseFrequencies(file, config);
        this.neox = config.arch().ropeMode() == Architecture.RopeMode.NEOX;
        this.qDim = config.qDim();

        this.maxTokens = maxTokens;
        int dim = c.dim();
        xb = new float[maxTokens * dim];
        q = new float[maxTokens * qDim];
        k = new float[maxTokens * c.kvDim()];
        v = new float[maxTokens * c.kvDim()];
        att = new float[maxTokens * qDim];
        // whole pages: AttentionKernels.scores stores a vector of positions at a time
        cachedAttention = new CachedAttention(cache, c.heads(), c.kvHeads(), c.headDim(),
                Math.addExact(c.contextLength(), cache.pageTokens()));
        scores = new float[threads][cachedAttention.scoresLength()];
        hb = new float[maxTokens * c.ffnDim()];
        hb2 = new float[maxTokens * c.ffnDim()];
        cos = new float[maxTokens * c.ropeDim() / 2];
        sin = new float[maxTokens * c.ropeDim() / 2];
        lastRows = new float[maxSequences * dim];
        rowPos = new int[maxTokens];
        rowCache = new KvCache[maxTokens];
        parts = new RowParts[layers.length * MATRICES];
        for (int l = 0; l < layers.length; l++) {
            LayerWeights w = layers[l];
            WeightMatrix[] m = {w.wq(), w.wk(), w.wv(), w.wo(), w.gate(), w.up(), w.down()};
            for (int i = 0; i < MATRICES; i++) {
                parts[l * MATRICES + i] = RowParts.of(m[i], threads);
            }
        }
        classifierParts = classifier == null ? null : RowParts.of(classifier, threads);
        this.threads = new RowParallel(threads, "layers-" + from + "-" + to);
    }

    /** Threads each matmul's rows are shared among (1: the calling thread alone). */
    public int threads() {
        return threads.threads();
    }

    /**
     * No forward pass comes for now (a stage's ring is empty): the matmul workers park at once rather than spin
     * ({@link RowParallel#rest}); the next pass wakes them.
     */
    public void rest() {
        threads.rest();
    }

    /** Stops the matmul threads (none with one thread). */
    @Override
    public void close() {
        threads.close();
    }

    /** Layer {@code local}'s matrix {@code which} . x: [n][cols] -> out: [n][rows], on every matmul thread. */
    private void matmul(int local, int which, float[] x, int n, float[] out) {
        threads.matmul(parts[local * MATRICES + which], x, n, out);
    }

    /**
     * Bytes in {@code file} of the tensors layers {@code [from, to)} load: every layer's, plus the embedding (first
     * range) and the output norm and classifier (last range). What loading progress counts up to.
     */
    public static long loadBytes(GgufFile file, LlamaConfig config, int from, int to) {
        long n = 0;
        for (int l = from; l < to; l++) {
            n += layerBytes(file, l);
        }
        if (from == 0) {
            n += tensorBytes(file, "token_embd.weight");
        }
        if (to == config.layers()) {
            n += outputBytes(file, from);
        }
        return n;
    }

    /** Bytes of layer {@code l}'s tensors ({@code blk.<l>.*}). */
    private static long layerBytes(GgufFile file, int l) {
        String prefix = "blk." + l + ".";
        long n = 0;
        for (var t : file.tensors().values()) {
            if (t.name().startsWith(prefix)) {
                n += t.byteSize();
            }
        }
        return n;
    }

    /** A tensor's bytes, 0 when the file lacks it (loading it then fails, naming it). */
    private static long tensorBytes(GgufFile file, String name) {
        return file.hasTensor(name) ? file.tensor(name).byteSize() : 0;
    }

    /** The classifier's tensor: {@code output.weight}, or the embedding when the model ties them. */
    private static String classifierName(GgufFile file) {
        return file.hasTensor("output.weight") ? "output.weight" : "token_embd.weight";
    }

    /** Bytes the last range loads after its layers: the output norm, and the classifier unless it is the embedding loaded already. */
    private static long outputBytes(GgufFile file, int from) {
        String name = classifierName(file);
        long n = tensorBytes(file, "output_norm.weight");
        return from == 0 && name.equals("token_embd.weight") ? n : n + tensorBytes(file, name);
    }

    /** RoPE inverse frequencies, theta^(-2j/ropeDim), divided by rope_freqs.weight when the file has it. */
    private static float[] ropeInverseFrequencies(GgufFile file, LlamaConfig c) {
        int half = c.ropeDim() / 2;
        float[] f = new float[half];
        for (int j = 0; j < half; j++) {
            f[j] = (float) (1.0 / Math.pow(c.ropeTheta(), (2 * j) / (double) c.ropeDim()));
        }
        if (file.hasTensor("rope_freqs.weight")) {
            if (file.tensor("rope_freqs.weight").elementCount() != half) {
                throw new GgufException(file.path(), "tensor 'rope_freqs.weight' has shape "
                        + file.tensor("rope_freqs.weight").shapeString() + " but RoPE needs [" + half + "]");
            }
            float[] factors = WeightMatrix.loadVector(file, "rope_freqs.weight", half);
            for (int j = 0; j < half; j++) {
                f[j] /= factors[j];
            }
        }
        return f;
    }

    public LlamaConfig config() {
        return c;
    }

    public int from() {
        return from;
    }

    public int to() {
        return to;
    }

    public boolean isFirst() {
        return from == 0;
    }

    public boolean isLast() {
        return to == c.layers();
    }

    public int maxTokens() {
        return maxTokens;
    }

    public int maxSequences() {
        return lastRows.length / c.dim();
    }

    public KvCachePool cache() {
        return cache;
    }

    /** {@link #prepare(Batch, int[], int)} for a range that does not embed (no token ids to check). */
    public void prepare(Batch batch) {
        prepare(batch, null, 0);
    }

    /** Told of each sequence {@link #prepareDropping} drops. */
    @FunctionalInterface
    public interface Refusal {
        /**
         * @param index the sequence's index in the batch before it was removed
         * @param e     why it cannot run
         */
        void refused(int index, SequenceException e);
    }

    /**
     * {@link #prepare} until the batch prepares, dropping each sequence it refuses: the caller is told (with the
     * sequence's index in the batch), then its rows leave {@code tokens} (token ids, first range) or {@code x}
     * (activations, [rows][dim]), it leaves the batch, and its KV cache is freed. The others run. Allocates nothing.
     *
     * @param tokens the batch's token ids from index 0, or null
     * @param x      the batch's activations from index 0, or null
     */
    public void prepareDropping(Batch batch, int[] tokens, float[] x, Refusal refusal) {
        int dim = c.dim();
        while (batch.sequences() > 0) {
            try {
                prepare(batch, tokens, 0);
                return;
            } catch (SequenceException e) {
                int i = batch.indexOf(e.seqId());
                if (i < 0) {
                    throw e;
                }
                refusal.refused(i, e);
                int row = batch.firstRow(i);
                int count = batch.tokenCount(i);
                int after = batch.tokens() - row - count;
                if (tokens != null) {
                    System.arraycopy(tokens, row + count, tokens, row, after);
                }
                if (x != null) {
                    System.arraycopy(x, (row + count) * dim, x, row * dim, after * dim);
                }
                batch.remove(i);
                endSequence(e.seqId());
            }
        }
    }

    /**
     * Checks every sequence of the batch and reserves its KV cache. Throws a {@link SequenceException}
     * naming the first sequence that cannot run (a token id outside the vocabulary, context or cache
     * exhausted, a position past what this range holds for it); the caller removes it from the batch and
     * calls again. Sequences checked before the failing one keep their reservation, which is harmless.
     *
     * @param tokens the batch's token ids (first range), or null
     */
    public void prepare(Batch batch, int[] tokens, int tokOff) {
        if (batch.tokens() > maxTokens || batch.sequences() > maxSequences()) {
            throw new SequenceException(SequenceException.Kind.BATCH_TOO_LARGE, batch.seqId(0), "batch of "
                    + batch.tokens() + " tokens / " + batch.sequences() + " sequences exceeds this range's limit of "
                    + maxTokens + " / " + maxSequences());
        }
        int row = 0;
        for (int s = 0; s < batch.sequences(); s++) {
            int id = batch.seqId(s);
            int pos = batch.position(s);
            if (tokens != null) {
                for (int i = 0; i < batch.tokenCount(s); i++) {
                    int t = tokens[tokOff + row + i];
                    if (t < 0 || t >= c.vocabSize()) {
                        throw new SequenceException(SequenceException.Kind.BAD_TOKEN, id, "sequence " + id
                                + ": token id " + (t & 0xFFFFFFFFL) + " is outside the vocabulary [0, " + c.vocabSize() + ")");
                    }
                }
            }
            KvCache kv = cache.get(id);
            if (kv == null && pos != 0) {
                throw new SequenceException(SequenceException.Kind.UNKNOWN_SEQUENCE, id, "sequence " + id
                        + " starts at position " + pos + " but layers [" + from + ", " + to + ") hold nothing for it");
            }
            if (kv != null && pos > kv.length()) {
                throw new SequenceException(SequenceException.Kind.UNKNOWN_SEQUENCE, id, "sequence " + id
                        + " continues at position " + pos + " but only " + kv.length() + " positions are cached");
            }
            if (kv == null) {
                kv = cache.getOrCreate(id);
            }
            cache.reserve(kv, pos + batch.tokenCount(s));
            for (int i = 0; i < batch.tokenCount(s); i++, row++) {
                rowPos[row] = pos + i;
                rowCache[row] = kv;
            }
        }
    }

    /** First range only: x[t] = embedding row of tokens[tokOff + t], for every row of the batch. */
    public void embed(Batch batch, int[] tokens, int tokOff, float[] x) {
        if (embedding == null) {
            throw new IllegalStateException("layers [" + from + ", " + to + ") do not start at 0: no embedding");
        }
        int dim = c.dim();
        for (int t = 0; t < batch.tokens(); t++) {
            embedding.readRow(tokens[tokOff + t], x, t * dim); // ids checked by prepare
        }
    }

    /** Runs the layers over x: [batch.tokens()][dim], in place. Call {@link #prepare} first. */
    public void forward(Batch batch, float[] x) {
        int n = batch.tokens();
        ropeTables(n);
        for (int l = 0; l < layers.length; l++) {
            attention(l, layers[l], n, x);
            feedForward(l, layers[l], n, x);
        }
        int row = 0;
        for (int s = 0; s < batch.sequences(); s++) {
            row += batch.tokenCount(s);
            rowCache[row - 1].written(rowPos[row - 1] + 1);
        }
    }

    /**
     * x += wo . attention(rope(qn(wq . norm(x) + bq)), KV cache with rope(kn(wk . norm(x) + bk)), wv . norm(x) + bv):
     * the biases only where the layer has them (qwen2), the per-head RMSNorms qn, kn only where it has those
     * (qwen3), both decided per layer; RoPE in the architecture's mode.
     */
    private void attention(int local, LayerWeights w, int n, float[] x) {
        int dim = c.dim();
        int kvDim = c.kvDim();
        int hd = c.headDim();
        for (int t = 0; t < n; t++) {
            VectorOps.rmsnorm(xb, t * dim, x, t * dim, w.attnNorm(), dim, c.rmsEps());
        }
        matmul(local, WQ, xb, n, q); // [n][dim] -> [n][qDim]
        matmul(local, WK, xb, n, k); // [n][dim] -> [n][kvDim]
        matmul(local, WV, xb, n, v); // [n][dim] -> [n][kvDim]
        if (w.qBias() != null) {
            for (int t = 0; t < n; t++) {
                VectorOps.add(q, t * qDim, w.qBias(), 0, qDim);
                VectorOps.add(k, t * kvDim, w.kBias(), 0, kvDim);
                VectorOps.add(v, t * kvDim, w.vBias(), 0, kvDim);
            }
        }
        if (w.qNorm() != null) { // each head of q and k over its own RMS, in place, before RoPE
            for (int t = 0; t < n; t++) {
                for (int h = 0; h < c.heads(); h++) {
                    int o = t * qDim + h * hd;
                    VectorOps.rmsnorm(q, o, q, o, w.qNorm(), hd, c.rmsEps());
                }
                for (int h = 0; h < c.kvHeads(); h++) {
                    int o = t * kvDim + h * hd;
                    VectorOps.rmsnorm(k, o, k, o, w.kNorm(), hd, c.rmsEps());
                }
            }
        }
        for (int t = 0; t < n; t++) {
            if (neox) {
                ropeNeox(q, t * qDim, c.heads(), t);
                ropeNeox(k, t * kvDim, c.kvHeads(), t);
            } else {
                rope(q, t * qDim, c.heads(), t);
                rope(k, t * kvDim, c.kvHeads(), t);
            }
            cache.write(rowCache[t], local, rowPos[t], hd, k, t * kvDim, v, t * kvDim);
        }
        attendLocal = local;
        attendRows = n;
        threads.run(attend, "its attention heads");
        matmul(local, WO, att, n, xb); // [n][qDim] -> [n][dim]
        VectorOps.add(x, 0, xb, 0, n * dim);
    }

    /** The layer (local index) and rows of the attention in progress, for {@link #attend}. */
    private int attendLocal;
    private int attendRows;
    /** Attention of the rows after the cache holds their keys and values, shared among the threads: {@link #attend(int, int)}. */
    private final RowParallel.Parts attend = this::attend;

    /**
     * Part {@code part} of {@code parts} of the attention of rows [0, attendRows): with at least as many rows as parts
     * (a batch of sequences, a prompt), every parts-th row from row {@code part}, all its heads, so that each
     * sequence's cache pages stream to one thread (split by heads, both threads read every page: a batch of 16 at 900
     * positions decoded at 0.86-0.91x the speed of attention on one thread); with fewer rows (one sequence's decode), every
     * parts-th head of each row. Each (row, head) is computed whole by one thread ({@link CachedAttention#row}), as one
     * thread computes it, so results keep their bits at any thread count.
     */
    private void attend(int part, int parts) {
        int local = attendLocal;
        float[] sc = scores[part];
        boolean byRow = attendRows >= parts; // whole rows (each sequence's pages read by one thread), else heads
        for (int t = byRow ? part : 0; t < attendRows; t += byRow ? parts : 1) {
            // causal: a token sees its own position and the ones before
            cachedAttention.row(rowCache[t], local, rowPos[t] + 1, q, t * qDim, byRow ? 0 : part, byRow ? 1 : parts, sc, att,
                    t * qDim);
        }
    }

    /** x += down . (silu(gate . norm(x)) * (up . norm(x))). */
    private void feedForward(int local, LayerWeights w, int n, float[] x) {
        int dim = c.dim();
        int ffn = c.ffnDim();
        for (int t = 0; t < n; t++) {
            VectorOps.rmsnorm(xb, t * dim, x, t * dim, w.ffnNorm(), dim, c.rmsEps());
        }
        matmul(local, GATE, xb, n, hb);  // [n][dim] -> [n][ffn]
        matmul(local, UP, xb, n, hb2);   // [n][dim] -> [n][ffn]
        for (int t = 0; t < n; t++) {
            VectorOps.swiglu(hb, t * ffn, hb2, t * ffn, ffn); // row by row: see swiglu
        }
        matmul(local, DOWN, hb, n, xb);  // [n][ffn] -> [n][dim]
        VectorOps.add(x, 0, xb, 0, n * dim);
    }

    /** cos/sin of every row's position times each inverse frequency. */
    private void ropeTables(int n) {
        int half = invFreq.length;
        for (int t = 0; t < n; t++) {
            for (int j = 0; j < half; j++) {
                float angle = rowPos[t] * invFreq[j];
                cos[t * half + j] = (float) Math.cos(angle);
                sin[t * half + j] = (float) Math.sin(angle);
            }
        }
    }

    /** Rotates adjacent pairs (x[2j], x[2j+1]) of the first ropeDim dims of each of {@code heads} heads. */
    private void rope(float[] vec, int off, int heads, int row) {
        int half = invFreq.length;
        int hd = c.headDim();
        for (int h = 0; h < heads; h++) {
            int base = off + h * hd;
            for (int j = 0; j < half; j++) {
                float fc = cos[row * half + j];
                float fs = sin[row * half + j];
                float v0 = vec[base + 2 * j];
                float v1 = vec[base + 2 * j + 1];
                vec[base + 2 * j] = v0 * fc - v1 * fs;
                vec[base + 2 * j + 1] = v0 * fs + v1 * fc;
            }
        }
    }

    /** Rotates the two halves' pairs (x[j], x[j + ropeDim/2]) of the first ropeDim dims of each of {@code heads} heads. */
    private void ropeNeox(float[] vec, int off, int heads, int row) {
        int half = invFreq.length;
        int hd = c.headDim();
        for (int h = 0; h < heads; h++) {
            int base = off + h * hd;
            for (int j = 0; j < half; j++) {
                float fc = cos[row * half + j];
                float fs = sin[row * half + j];
                float v0 = vec[base + j];
                float v1 = vec[base + j + half];
                vec[base + j] = v0 * fc - v1 * fs;
                vec[base + j + half] = v0 * fs + v1 * fc;
            }
        }
    }

    /**
     * Last range only: logits of the last token of every sequence that wants them, in batch order.
     *
     * @param out [batch.logitRows()][vocab]
     * @return the number of rows written
     */
    public int logits(Batch batch, float[] x, float[] out) {
        if (classifier == null) {
            throw new IllegalStateException("layers [" + from + ", " + to + ") do not end the model: no classifier");
        }
        int dim = c.dim();
        int rows = 0;
        int row = 0;
        for (int s = 0; s < batch.sequences(); s++) {
            row += batch.tokenCount(s);
            if (batch.wantLogits(s)) {
                VectorOps.rmsnorm(lastRows, rows * dim, x, (row - 1) * dim, outputNorm, dim, c.rmsEps());
                rows++;
            }
        }
        threads.matmul(classifierParts, lastRows, rows, out); // [rows][dim] -> [rows][vocab]
        return rows;
    }

    /**
     * Every matmul's choices of whether to touch its panels first (one token: read ahead), the classifier's too, set
     * to the mode given, their probes going on ({@link RowParts#useTouch}): the warm-up sets each mode in turn.
     */
    void useTouch(boolean touch) {
        forEachMatmul(p -> p.useTouch(touch));
    }

    /** Every matmul's choices timed again from the start, each in the mode it starts in. */
    void restartTouch() {
        forEachMatmul(RowParts::restartTouch);
    }

    /** {@code action} on every matmul's parts, the classifier's last. */
    private void forEachMatmul(Consumer<RowParts> action) {
        for (RowParts p : parts) {
            action.accept(p);
        }
        if (classifierParts != null) {
            action.accept(classifierParts);
        }
    }

    /** Frees the KV cache of a finished sequence. */
    public void endSequence(int seqId) {
        cache.release(seqId);
    }
}
