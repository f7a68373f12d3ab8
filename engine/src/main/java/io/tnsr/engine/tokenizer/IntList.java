package io.tnsr.engine.tokenizer;

import java.util.Arrays;

/** A growable list of ints, without boxing. */
final class IntList {
    private int[] a;
    private int n;

    IntList(int capacity) {
        a = new int[Math.max(4, capacity)];
    }

    void add(int v) {
        if (n == a.length) {
            a = Arrays.copyOf(a, a.length * 2);
        }
        a[n++] = v;
    }

    int[] toArray() {
        return Arrays.copyOf(a, n);
    }
}
