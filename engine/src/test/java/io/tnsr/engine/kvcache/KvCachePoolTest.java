package io.tnsr.engine.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.tnsr.engine.kvcache.KvCachePool.KvCache;
import org.junit.jupiter.api.Test;

class KvCachePoolTest {

    @Test
    void pagesAreSizedByKvDimNotHiddenSizeAndGrowWithTheSequence() {
        KvCachePool pool = new KvCachePool(3, 32, 100, 16, 64);
        assertEquals(4L * 3 * 2 * 16 * 32 * 4, pool.capacityBytes());
        KvCache c = pool.getOrCreate(5);
        pool.reserve(c, 1);
        assertEquals(1, pool.usedPages());
        pool.reserve(c, 17);
        assertEquals(2, pool.usedPages());
        assertEquals(32, c.capacity());
        assertNotSame(c.page(0), c.page(16));
    }

    @Test
    void aCacheOfHalvesTakesHalfTheBytesAndStoresEachValueRoundedOnceAndWithinTheHalfRange() {
        KvCachePool floats = KvCachePool.sized(12, 768, 1024, 0); // stories110M: 2 GiB by default
        KvCachePool halves = KvCachePool.sized(12, 768, 1024, 0, KvCacheType.F16);
        assertEquals(KvCacheType.F16, halves.type());
        assertTrue(halves.halves());
        assertEquals(2 * floats.capacityTokens(), halves.capacityTokens(), 16, "the default capacity holds twice the positions");
        assertEquals(floats.capacityBytes(), halves.capacityBytes(), 12 * 2 * 16 * 768 * 4, "in the same bytes");
        KvCachePool pool = new KvCachePool(2, 8, 100, 16, 64, KvCacheType.F16);
        assertEquals(4L * 2 * 2 * 16 * 8 * 2, pool.capacityBytes());
        KvCache c = pool.getOrCreate(7);
        pool.reserve(c, 20);
        float[] key = {1f / 3, -2.5f, 1e-6f, 70000f, -1e9f, 65519f, 0f, -0f};
        float[] value = {0.1f, 65504f, 65520f, -3e-8f, 1e-3f, 2f, -7.75f, 12345.678f};
        int headDim = 4;
        pool.write(c, 1, 17, headDim, key, 0, value, 0);
        var page = c.page(17);
        for (int j = 0; j < 8; j++) {
            int head = j / headDim * headDim;
            int row = head + io.tnsr.engine.kernels.AttentionKernels.keyRow(j % headDim, headDim);
            short k = page.getShort(pool.keyOffset(1, 0) + (row * 16 + 1) * 2);
            short v = page.getShort(pool.valueOffset(1, head) + (headDim + j % headDim) * 2);
            assertEquals(KvCachePool.half(key[j]), k, "key " + j);
            assertEquals(KvCachePool.half(value[j]), v, "value " + j);
        }
        // a whole position of stories110M's width, through the vector rounding where a vector's values are all normal
        // halves and the scalar one elsewhere: the same bits either way
        java.util.SplittableRandom r = new java.util.SplittableRandom(3);
        float[] wide = new float[768 + 5];
        for (int i = 0; i < wide.length; i++) {
            double scale = i < 200 ? 8 : Math.pow(2, r.nextInt(-30, 20)); // then zeros, subnormals, overflows among them
            wide[i] = i % 97 == 0 ? 0f : (float) (r.nextGaussian() * scale);
        }
        wide[300] = Float.NaN;
        short[] got = new short[768];
        KvCachePool.halves(wide, 5, got, 768);
        for (int i = 0; i < 768; i++) {
            assertEquals(KvCachePool.half(wide[5 + i]), got[i], "value " + i + ": " + wide[5 + i]);
        }
        assertEquals(0x3555, KvCachePool.half(1f / 3) & 0xFFFF, "rounded to nearest");
        assertEquals(0x7BFF, KvCachePool.half(70000f) & 0xFFFF, "saturated, not infinite");
        assertEquals(0xFBFF, KvCachePool.half(-1e9f) & 0xFFFF);
        assertEquals(0x7BFF, KvCachePool.half(65520f) & 0xFFFF, "what would round to infinity");
        assertEquals(0x8000, KvCachePool.half(-0f) & 0xFFFF);
    }

    @Test
    void aPromptLongerThanTheContextIsATypedErrorAndChangesNothing() {
        KvCachePool pool = new KvCachePool(1, 8, 100, 16, 1000);
        KvCache c = pool.getOrCreate(1);
        SequenceException e = assertThrows(SequenceException.class, () -> pool.reserve(c, 101));
        assertEquals(SequenceException.Kind.CONTEXT_OVERFLOW, e.kind());
        assertEquals(1, e.seqId());
        assertTrue(e.getMessage().contains("101") && e.getMessage().contains("100"), e.getMessage());
        assertEquals(0, pool.usedPages());
    }

    @Test
    void runningOutFailsOnlyTheSequenceThatAskedAndFreedPagesAreReused() {
        KvCachePool pool = new KvCachePool(1, 8, 1000, 16, 64); // 4 pages in all
        KvCache a = pool.getOrCreate(1);
        KvCache b = pool.getOrCreate(2);
        pool.reserve(a, 48);
        SequenceException e = assertThrows(SequenceException.class, () -> pool.reserve(b, 32));
        assertEquals(SequenceException.Kind.OUT_OF_KV_CACHE, e.kind());
        assertEquals(2, e.seqId());
        assertEquals(3, pool.usedPages());
        pool.reserve(b, 16); // what is left still serves
        var page = a.page(0);
        pool.release(1);
        assertEquals(1, pool.usedPages());
        assertEquals(1, pool.liveSequences());
        pool.reserve(b, 64);
        assertEquals(4, pool.allocatedPages(), "freed pages are reused, not reallocated");
        assertTrue(page == b.page(16) || page == b.page(32) || page == b.page(48));
    }

    @Test
    void theSystemIsAskedForPagesSixteenAtATimeWithinTheCapacity() {
        KvCachePool pool = new KvCachePool(1, 8, 10_000, 16, 16 * 40); // 40 pages in all
        KvCache a = pool.getOrCreate(1);
        pool.reserve(a, 1);
        assertEquals(1, pool.usedPages());
        assertEquals(KvCachePool.SLAB_PAGES, pool.allocatedPages(), "one allocation of a slab, not one page");
        pool.reserve(a, 16 * 17);   // the 17th page takes a second slab
        assertEquals(17, pool.usedPages());
        assertEquals(2 * KvCachePool.SLAB_PAGES, pool.allocatedPages());
        pool.reserve(a, 16 * 40);   // the last slab holds only what the capacity has left
        assertEquals(40, pool.allocatedPages());
        // every page its own bytes: write each page's number through every float of it, then read them all back
        int pageFloats = 16 * 8 * 2;
        for (int p = 0; p < 40; p++) {
            for (int f = 0; f < pageFloats; f++) {
                a.page(16 * p).putFloat(4L * f, p);
            }
        }
        for (int p = 0; p < 40; p++) {
            assertEquals(4L * pageFloats, a.page(16 * p).byteSize());
            for (int f = 0; f < pageFloats; f++) {
                assertEquals(p, a.page(16 * p).getFloat(4L * f), "page " + p + ", float " + f);
            }
        }
    }

    @Test
    void preallocatedPagesServeTheFirstSequencesAndStopAtTheCapacity() {
        KvCachePool pool = new KvCachePool(2, 8, 10_000, 16, 16 * 100); // pages of 2 x 2 x 16 x 8 x 4 = 2048 bytes
        assertEquals(20, pool.preallocate(20 * 2048 - 100), "whole pages, rounded up");
        assertEquals(20, pool.allocatedPages());
        assertEquals(0, pool.usedPages());
        assertEquals(0, pool.preallocate(10 * 2048), "already there");
        KvCache a = pool.getOrCreate(1);
        pool.reserve(a, 16 * 20);
        assertEquals(20, pool.allocatedPages(), "the sequence took preallocated pages, no new ones");
        assertEquals(80, pool.preallocate(Long.MAX_VALUE), "up to the capacity, no further");
        assertEquals(100, pool.allocatedPages());
    }

    @Test
    void releasingAnUnknownSequenceIsHarmless() {
        KvCachePool pool = new KvCachePool(1, 8, 100, 16, 100);
        pool.release(42);
        assertEquals(0, pool.liveSequences());
    }

    @Test
    void aWrittenPositionLandsWhereTheOffsetsSay() {
        int headDim = 4, kvDim = 8, pageTokens = 16; // two KV heads
        KvCachePool pool = new KvCachePool(2, kvDim, 100, pageTokens, 64);
        KvCache c = pool.getOrCreate(1);
        pool.reserve(c, 20);
        float[] key = new float[3 + kvDim];
        float[] value = new float[5 + kvDim];
        for (int j = 0; j < kvDim; j++) {
            key[3 + j] = 100 + j;
            value[5 + j] = 200 + j;
        }
        pool.write(c, 1, 18, headDim, key, 3, value, 5); // layer 1, second page, slot 2
        io.tnsr.engine.memory.Region page = c.page(18);
        for (int head = 0; head < 2; head++) {
            for (int d = 0; d < headDim; d++) {
                int j = head * headDim + d;
                int row = io.tnsr.engine.kernels.AttentionKernels.keyRow(d, headDim);
                assertEquals(100 + j, page.getFloat(pool.keyOffset(1, head * headDim) + (row * pageTokens + 2) * 4),
                        "key dimension " + j);
                assertEquals(200 + j, page.getFloat(pool.valueOffset(1, head * headDim) + (2 * headDim + d) * 4),
                        "value dimension " + j);
            }
        }
        assertEquals(0f, c.page(2).getFloat(pool.keyOffset(1, 0) + 2 * 4), "the first page is untouched");
    }
}
