package io.tnsr.engine.tokenizer;

/**
 * BPE merge rules by token ids: (left id, right id) -> (rank, id of the merged token). Open addressing
 * with linear probing over one {@code long[]} holding each slot's key and value side by side (one cache
 * line per probe), so that Llama 3's 280k merges load in milliseconds and a lookup allocates nothing.
 */
final class MergeTable {
    private static final long EMPTY = -1L;

    /** 2 longs per slot: key (left << 32 | right), value (rank << 32 | result). */
    private final long[] table;
    private final int mask;
    private final int capacity;
    private int count;

    MergeTable(int expected) {
        int cap = Integer.highestOneBit(Math.max(4, expected + expected / 2)) << 1;   // load factor < 3/4
        capacity = cap;
        table = new long[cap * 2];
        for (int i = 0; i < table.length; i += 2) {
            table[i] = EMPTY;
        }
        mask = cap - 1;
    }

    private static long key(int left, int right) {
        return ((long) left << 32) | (right & 0xFFFFFFFFL);
    }

    private int slot(long key) {
        long h = key * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32)) & mask;
    }

    /** Adds a rule unless the pair already has one (the first, lowest rank wins, as in llama.cpp); returns whether added. */
    boolean putIfAbsent(int left, int right, int rank, int result) {
        if (count + 1 > capacity - capacity / 4) {
            throw new IllegalStateException("merge table full: sized for fewer rules");
        }
        long k = key(left, right);
        int i = slot(k);
        while (table[2 * i] != EMPTY) {
            if (table[2 * i] == k) {
                return false;
            }
            i = (i + 1) & mask;
        }
        table[2 * i] = k;
        table[2 * i + 1] = ((long) rank << 32) | (result & 0xFFFFFFFFL);
        count++;
        return true;
    }

    /** The slot of the pair's rule, or -1 if the pair does not merge. */
    int find(int left, int right) {
        long k = key(left, right);
        int i = slot(k);
        while (true) {
            long ki = table[2 * i];
            if (ki == k) {
                return i;
            }
            if (ki == EMPTY) {
                return -1;
            }
            i = (i + 1) & mask;
        }
    }

    int rank(int slot) {
        return (int) (table[2 * slot + 1] >>> 32);
    }

    int result(int slot) {
        return (int) table[2 * slot + 1];
    }

    int size() {
        return count;
    }

    @Override
    public String toString() {
        return "MergeTable[" + count + " rules in " + capacity + " slots]";
    }
}
