package io.tnsr.engine.kernels;

import jdk.incubator.vector.FloatVector;
import jdk.incubator.vector.VectorOperators;

/**
 * The lanes of a vector added in order, lane 0 first. JDK 17 build: {@code reduceLanes(ADD)}, which C2 compiles
 * to exactly that sequence (and the interpreter computes the same). The JDK 22+ build adds the lanes itself.
 */
final class LaneSum {
    private LaneSum() {
    }

    static float of(FloatVector v) {
        return v.reduceLanes(VectorOperators.ADD);
    }
}
