package io.tnsr.engine.tokenizer;

import java.util.Arrays;

/**
 * The work queue of candidate merges of adjacent symbols: a binary max-heap ordered by priority, then by the
 * smaller left symbol index (the leftmost pair wins a tie), the order of llama.cpp's {@code llm_bigram_spm}
 * and {@code llm_bigram_bpe} comparators. SentencePiece uses the merged token's score as priority; BPE uses
 * {@code -rank} (exact in a float for ranks below 2^24). Entries are kept in parallel primitive arrays; stale
 * entries are left in place and skipped by the caller when popped, as llama.cpp does.
 */
final class BigramQueue {
    private float[] priority = new float[16];
    private int[] left = new int[16];
    private int[] right = new int[16];
    private int[] size = new int[16];
    private int entries;
    private int[] heap = new int[16];
    private int heapSize;

    void clear() {
        entries = 0;
        heapSize = 0;
    }

    boolean isEmpty() {
        return heapSize == 0;
    }

    /** Adds a candidate merge of symbols {@code l} and {@code r} whose texts are {@code sz} chars long together. */
    void push(float p, int l, int r, int sz) {
        if (entries == priority.length) {
            int cap = entries * 2;
            priority = Arrays.copyOf(priority, cap);
            left = Arrays.copyOf(left, cap);
            right = Arrays.copyOf(right, cap);
            size = Arrays.copyOf(size, cap);
        }
        int e = entries++;
        priority[e] = p;
        left[e] = l;
        right[e] = r;
        size[e] = sz;
        if (heapSize == heap.length) {
            heap = Arrays.copyOf(heap, heapSize * 2);
        }
        int i = heapSize++;
        while (i > 0) {
            int parent = (i - 1) >>> 1;
            if (!before(e, heap[parent])) {
                break;
            }
            heap[i] = heap[parent];
            i = parent;
        }
        heap[i] = e;
    }

    /** Removes the best entry and returns its index, for {@link #left}, {@link #right} and {@link #size}. */
    int pop() {
        int top = heap[0];
        int last = heap[--heapSize];
        int i = 0;
        int half = heapSize >>> 1;
        while (i < half) {
            int c = 2 * i + 1;
            int r = c + 1;
            if (r < heapSize && before(heap[r], heap[c])) {
                c = r;
            }
            if (!before(heap[c], last)) {
                break;
            }
            heap[i] = heap[c];
            i = c;
        }
        if (heapSize > 0) {
            heap[i] = last;
        }
        return top;
    }

    int left(int e) {
        return left[e];
    }

    int right(int e) {
        return right[e];
    }

    int size(int e) {
        return size[e];
    }

    private boolean before(int a, int b) {
        return priority[a] > priority[b] || (priority[a] == priority[b] && left[a] < left[b]);
    }
}
