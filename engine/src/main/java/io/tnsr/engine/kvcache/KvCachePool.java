package io.tnsr.engine.kvcache;

import io.tnsr.engine.kernels.AttentionKernels;
import io.tnsr.engine.kernels.Float16;
import io.tnsr.engine.kernels.VectorOps;
import io.tnsr.engine.memory.Region;
import java.util.ArrayDeque;
import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.IntVector;
import jdk.incubator.vector.ShortVector;
import jdk.incubator.vector.VectorOperators;
import jdk.incubator.vector.VectorShape;
import jdk.incubator.vector.VectorSpecies;
import org.agrona.collections.Int2ObjectHashMap;

/**
 * The keys and values of every live sequence, for the layers one stage holds, off-heap and bounded.
 *
 * <p>Memory is handed out in pages of {@link #pageTokens()} positions. A page holds, for each local layer,
 * the keys then the values of those positions: keys transposed, {@code [kvDim][position in page]} elements (dimension
 * j of consecutive positions is contiguous: attention reads it for many positions with one vector load, see
 * {@link io.tnsr.engine.kernels.AttentionKernels}), then values by KV head, {@code [kvHead][position in page][headDim]}
 * (one head's values of a page are contiguous too). Elements are floats, or halves with {@link KvCacheType#F16}:
 * rounded to nearest even when stored, a value beyond the half range stored as the largest half of its sign, so that
 * attention widens every half in three operations (keys and values of a model in use stay far inside the range). A
 * NaN stays NaN bits and reads back as some finite value: it only comes from a sequence whose hidden state is NaN
 * already, which its logits show whatever attention reads. A sequence takes pages as it grows, up to the
 * model's context length, and gives them all back when it ends; total use never exceeds the configured
 * capacity. Pages are allocated the first time they are needed and reused after that, so the steady state
 * allocates nothing.
 *
 * <p>Not thread-safe: owned by the one compute thread of a stage.
 */
public final class KvCachePool {
    public static final int DEFAULT_PAGE_TOKENS = 16;
    private static final VectorSpecies<Float> F = VectorOps.F;
    /** As many short lanes as F has: F's shape halved, at least 64 bits ({@link #halves} runs scalar where that differs). */
    private static final VectorSpecies<Short> S =
            VectorSpecies.of(short.class, VectorShape.forBitSize(Math.max(64, F.vectorBitSize() / 2)));
    private static final boolean VECTOR_HALVES = S.length() == F.length();

    private final int layers;
    private final int kvDim;
    private final int contextLength;
    private final int pageTokens;
    private final KvCacheType type;
    /** Bytes per key or value element: 4 (F32) or 2 (F16). */
    private final int eb;
    private final int pageBytes;
    /** [kvDim] one position's keys or values as halves, on their way into a page (F16). */
    private final short[] halfScratch;
    private final int capacityPages;
    /** Pages per allocation when the pool grows: {@link #SLAB_PAGES}, fewer where that would pass 1 GiB. */
    private final int slabPages;
    private int allocatedPages;
    private final ArrayDeque<Region> freePages = new ArrayDeque<>();
    /** {@link #keyRows} for {@link #keyRowsHeadDim} (one model, one head size: built on the first write). */
    private int[] keyRows = new int[0];
    private int keyRowsHeadDim = -1;
    private final Int2ObjectHashMap<KvCache> live = new Int2ObjectHashMap<>();
    private final ArrayDeque<KvCache> spareCaches = new ArrayDeque<>();

    /** Pages allocated together when the pool grows ({@link #grow}). */
    static final int SLAB_PAGES = 16;
    /** Most bytes allocated together when the pool grows. */
    private static final long SLAB_BYTES_MAX = 1L << 30;

    /** Bytes the default capacity aims for when the caller names none: 2 GiB of keys and values. */
    public static final long DEFAULT_CAPACITY_BYTES = 2L << 30;

    /**
     * A pool of {@link #DEFAULT_PAGE_TOKENS}-position pages holding {@code capacityTokens} positions, or, when that is
     * 0, a default: as many as {@link #DEFAULT_CAPACITY_BYTES} hold, at least one whole context and at most 64.
     */
    public static KvCachePool sized(int layers, int kvDim, int contextLength, long capacityTokens) {
        return sized(layers, kvDim, contextLength, capacityTokens, KvCacheType.F32);
    }

    /** As {@link #sized(int, int, int, long)}, storing {@code type} elements (F16: twice the default positions). */
    public static KvCachePool sized(int layers, int kvDim, int contextLength, long capacityTokens, KvCacheType type) {
        long bytesPerToken = (long) layers * 2 * kvDim * type.bytes();
        long tokens = capacityTokens > 0 ? capacityTokens
                : Math.max(contextLength, Math.min((long) contextLength * 64, DEFAULT_CAPACITY_BYTES / bytesPerToken));
        return new KvCachePool(layers, kvDim, contextLength, DEFAULT_PAGE_TOKENS, tokens, type);
    }

    /**
     * @param layers         layers held by this stage
     * @param kvDim          KV heads x head dim
     * @param contextLength  positions a sequence may use at most
     * @param pageTokens     positions per page
     * @param capacityTokens total positions across all live sequences (rounded up to whole pages)
     */
    public KvCachePool(int layers, int kvDim, int contextLength, int pageTokens, long capacityTokens) {
        this(layers, kvDim, contextLength, pageTokens, capacityTokens, KvCacheType.F32);
    }

    /** As {@link #KvCachePool(int, int, int, int, long)}, storing {@code type} elements. */
    public KvCachePool(int layers, int kvDim, int contextLength, int pageTokens, long capacityTokens, KvCacheType type) {
        if (layers <= 0 || kvDim <= 0 || contextLength <= 0 || pageTokens <= 0 || capacityTokens <= 0) {
            throw new IllegalArgumentException("KV cache sizes must be positive");
        }
        long bytes = (long) layers * 2 * pageTokens * kvDim * type.bytes();
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("KV page of " + bytes + " bytes is too large; use fewer page tokens");
        }
        this.layers = layers;
        this.kvDim = kvDim;
        this.contextLength = contextLength;
        this.pageTokens = pageTokens;
        this.type = type;
        this.eb = type.bytes();
        this.halfScratch = type == KvCacheType.F16 ? new short[kvDim] : new short[0];
        this.pageBytes = (int) bytes;
        this.capacityPages = (int) Math.min(Integer.MAX_VALUE, (capacityTokens + pageTokens - 1) / pageTokens);
        this.slabPages = (int) Math.max(1, Math.min(SLAB_PAGES, SLAB_BYTES_MAX / bytes));
    }

    public int pageTokens() {
        return pageTokens;
    }

    /** Bytes of one page: every layer's keys and values for {@link #pageTokens} positions. */
    public int pageBytes() {
        return pageBytes;
    }

    public KvCacheType type() {
        return type;
    }

    /** Whether elements are halves ({@link KvCacheType#F16}): what attention's kernels are told. */
    public boolean halves() {
        return type == KvCacheType.F16;
    }

    public int contextLength() {
        return contextLength;
    }

    public long capacityBytes() {
        return (long) capacityPages * pageBytes;
    }

    /** Positions the pool holds across all live sequences (whole pages). */
    public long capacityTokens() {
        return (long) capacityPages * pageTokens;
    }

    /** Pages now held by live sequences. */
    public int usedPages() {
        return allocatedPages - freePages.size();
    }

    /** Pages allocated so far (in use or free); never more than the capacity. */
    public int allocatedPages() {
        return allocatedPages;
    }

    /**
     * Allocates free pages until {@code bytes} of pages (rounded up to whole pages, at most the capacity) are
     * allocated, so that sequences up to that size take no memory from the system while they run; returns the pages
     * allocated now. A stage does this before it serves: the first touch of new memory is what a page costs (on a
     * 2-vCPU KVM guest, 2.9 ms per 1.2 MB page in 4 KB pages, about 1 ms in huge pages), and without a reserve the
     * steps in which 16 sequences cross a page boundary together took 18-31 ms longer.
     */
    public int preallocate(long bytes) {
        long b = Math.max(0, bytes);
        long want = Math.min(capacityPages, b / pageBytes + (b % pageBytes == 0 ? 0 : 1));
        int before = allocatedPages;
        while (allocatedPages < want) {
            grow((int) (want - allocatedPages));
        }
        return allocatedPages - before;
    }

    /**
     * Adds up to {@code most} (at least 1) free pages, allocated together, {@link #slabPages} at most: memory in runs
     * long enough for huge pages where the C library gives them ({@code GLIBC_TUNABLES=glibc.malloc.hugetlb=1}, which
     * the launchers set), rather than one allocation per page.
     */
    private void grow(int most) {
        int pages = Math.min(most, slabPages);
        Region slab = Region.allocate((long) pages * pageBytes);
        for (int i = 0; i < pages; i++) {
            freePages.addLast(slab.slice((long) i * pageBytes, pageBytes));
        }
        allocatedPages += pages;
    }

    public int liveSequences() {
        return live.size();
    }

    /** The cache of {@code seqId}, created empty if it has none yet. */
    public KvCache getOrCreate(int seqId) {
        KvCache c = live.get(seqId);
        if (c == null) {
            c = spareCaches.pollFirst();
            if (c == null) {
                c = new KvCache((contextLength + pageTokens - 1) / pageTokens);
            }
            c.reset(seqId);
            live.put(seqId, c);
        }
        return c;
    }

    /** The cache of {@code seqId}, or null. */
    public KvCache get(int seqId) {
        return live.get(seqId);
    }

    /** Frees the sequence's pages; unknown ids are ignored (a sequence may end before reaching this stage). */
    public void release(int seqId) {
        KvCache c = live.remove(seqId);
        if (c != null) {
            for (int i = 0; i < c.pageCount; i++) {
                freePages.addFirst(c.pages[i]);
                c.pages[i] = null;
            }
            c.pageCount = 0;
            spareCaches.addFirst(c);
        }
    }

    /** Frees every sequence. */
    public void releaseAll() {
        int[] ids = live.keySet().stream().mapToInt(Integer::intValue).toArray();
        for (int id : ids) {
            release(id);
        }
    }

    /**
     * Makes room in {@code cache} for positions [0, endPosition): a typed error for this sequence when the
     * context or the pool's capacity is exceeded (nothing is changed then).
     */
    public void reserve(KvCache cache, int endPosition) {
        if (endPosition > contextLength) {
            throw new SequenceException(SequenceException.Kind.CONTEXT_OVERFLOW, cache.seqId,
                    "sequence " + cache.seqId + " needs " + endPosition + " positions but the context holds "
                            + contextLength);
        }
        int needPages = (endPosition + pageTokens - 1) / pageTokens;
        int more = needPages - cache.pageCount;
        if (more <= 0) {
            return;
        }
        if (usedPages() + more > capacityPages) {
            throw new SequenceException(SequenceException.Kind.OUT_OF_KV_CACHE, cache.seqId,
                    "KV cache is full: sequence " + cache.seqId + " needs " + more + " more pages of "
                            + pageTokens + " positions; " + usedPages() + " of " + capacityPages
                            + " pages are in use by " + live.size() + " sequences");
        }
        for (int i = 0; i < more; i++) {
            if (freePages.isEmpty()) {
                grow(capacityPages - allocatedPages);   // at least one: usedPages() + more is within the capacity
            }
            cache.pages[cache.pageCount++] = freePages.pollFirst();
        }
    }

    /**
     * Byte offset, inside a page, of the keys of a local layer's dimensions from {@code firstDim} on (a KV head's
     * first dimension, kvHead x headDim): transposed, dimension firstDim + j of the page's position i at
     * {@code keyOffset + (AttentionKernels.keyRow(j, headDim) * pageTokens + i) * type().bytes()}.
     */
    public int keyOffset(int localLayer, int firstDim) {
        return (localLayer * 2 * kvDim + firstDim) * pageTokens * eb;
    }

    /**
     * Byte offset, inside a page, of the values of the KV head whose dimensions start at {@code firstDim}:
     * {@code [pageTokens][headDim]} elements, position i at {@code valueOffset + i * headDim * type().bytes()}.
     */
    public int valueOffset(int localLayer, int firstDim) {
        return ((localLayer * 2 + 1) * kvDim + firstDim) * pageTokens * eb;
    }

    /**
     * Writes one position's key and value ({@code kvDim} floats each, heads of {@code headDim}) for a local layer into
     * the cache's page for that position, in the layout above. The page must be reserved.
     */
    public void write(KvCache cache, int localLayer, int position, int headDim, float[] key, int ko, float[] value,
                      int vo) {
        Region page = cache.page(position);
        int slot = position % pageTokens;
        int keys = keyOffset(localLayer, 0);
        int[] rows = keyRows(headDim);
        if (type == KvCacheType.F16) {
            short[] h = halfScratch;
            halves(key, ko, h, kvDim);
            for (int j = 0; j < kvDim; j++) {
                page.putShort(keys + (rows[j] * pageTokens + slot) * 2, h[j]);
            }
            halves(value, vo, h, kvDim);
            for (int first = 0; first < kvDim; first += headDim) {
                int at = valueOffset(localLayer, first) + slot * headDim * 2;
                for (int j = 0; j < headDim; j++) {
                    page.putShort(at + 2 * j, h[first + j]);
                }
            }
            return;
        }
        for (int j = 0; j < kvDim; j++) { // each head's rows in the order the scores kernel reads them
            page.putFloat(keys + (rows[j] * pageTokens + slot) * Float.BYTES, key[ko + j]);
        }
        for (int first = 0; first < kvDim; first += headDim) { // values: each head's rows as they come, one copy
            page.putFloats(valueOffset(localLayer, first) + slot * headDim * Float.BYTES, value, vo + first, headDim);
        }
    }

    /**
     * dst[0, n) = {@link #half} of src[so, so + n): L values at a time in registers where all of them are normal halves
     * once rounded (the keys and values of a model in use), the same bits as the scalar rounding; a vector with a zero,
     * a subnormal, an overflow or a NaN goes through {@link #half} one value at a time.
     */
    static void halves(float[] src, int so, short[] dst, int n) {
        int i = 0;
        for (int bound = VECTOR_HALVES ? F.loopBound(n) : 0; i < bound; i += F.length()) {
            IntVector bits = FloatVector.fromArray(F, src, so + i).reinterpretAsInts();
            IntVector abs = bits.and(0x7fffffff);
            if (abs.compare(VectorOperators.GE, 0x38800000).and(abs.compare(VectorOperators.LT, 0x477ff000)).allTrue()) {
                // round to nearest even at bit 13, rebias the exponent (127 -> 15), then the sign in bit 15
                IntVector h = abs.add(0xfff).add(abs.lanewise(VectorOperators.LSHR, 13).and(1)).sub(0x38000000)
                        .lanewise(VectorOperators.LSHR, 13).or(bits.lanewise(VectorOperators.LSHR, 16).and(0x8000));
                ((ShortVector) h.convertShape(VectorOperators.I2S, S, 0)).intoArray(dst, i);
            } else {
                for (int k = 0; k < F.length(); k++) {
                    dst[i + k] = half(src[so + i + k]);
                }
            }
        }
        for (; i < n; i++) {
            dst[i] = half(src[so + i]);
        }
    }

    /** {@code v} as the half a cache of halves stores: rounded to nearest even, saturated to the finite range. */
    public static short half(float v) {
        return Float16.fromFloat(Math.max(-MAX_HALF, Math.min(MAX_HALF, v)));
    }

    /** The largest finite half, 65504. */
    private static final float MAX_HALF = 65504f;

    /**
     * rows[j] = the row of key dimension j inside its layer's transposed key block (its head's first row plus
     * {@link AttentionKernels#keyRow}), computed once per head size instead of a division and a remainder per
     * dimension, position and layer.
     */
    private int[] keyRows(int headDim) {
        if (keyRowsHeadDim != headDim) {
            int[] rows = new int[kvDim];
            for (int j = 0; j < kvDim; j++) {
                rows[j] = j - j % headDim + AttentionKernels.keyRow(j % headDim, headDim);
            }
            keyRows = rows;
            keyRowsHeadDim = headDim;
        }
        return keyRows;
    }

    public int layers() {
        return layers;
    }

    /** One sequence's pages. */
    public final class KvCache {
        private final Region[] pages;
        private int pageCount;
        private int seqId;
        private int length;

        private KvCache(int maxPages) {
            this.pages = new Region[maxPages];
        }

        private void reset(int id) {
            this.seqId = id;
            this.pageCount = 0;
            this.length = 0;
        }

        /** Positions [0, length) hold keys and values. */
        public int length() {
            return length;
        }

        /** Records that positions [0, end) now hold this sequence's keys and values (later ones are stale). */
        public void written(int end) {
            length = end;
        }

        public int seqId() {
            return seqId;
        }

        /** The page holding {@code position}. */
        public Region page(int position) {
            return pages[position / pageTokens];
        }

        /** Positions this cache has room for. */
        public int capacity() {
            return pageCount * pageTokens;
        }
    }
}
