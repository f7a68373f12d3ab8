package io.tnsr.engine.kernels;

import jdk.incubator.vector.FloatVector;

/**
 * The lanes of a vector added in order, lane 0 first. JDK 22+ build: added one by one, since C2 there compiles
 * {@code reduceLanes(ADD)} (whose order is unspecified) as a tree, so that a compiled call and an interpreted one
 * would differ in the last bit. With the lane count a constant, C2 unrolls the loop into lane extractions.
 */
final class LaneSum {
    private static final int L = VectorOps.F.length();

    private LaneSum() {
    }

    static float of(FloatVector v) {
        float s = v.lane(0);
        for (int i = 1; i < L; i++) {
            s += v.lane(i);
        }
        return s;
    }
}
