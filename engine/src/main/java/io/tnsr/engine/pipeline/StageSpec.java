package io.tnsr.engine.pipeline;

import java.util.List;

/**
 * One stage of a pipeline as configured.
 *
 * @param layerFrom first layer (inclusive)
 * @param layerTo   last layer (exclusive)
 * @param port      TCP port the stage listens on for its upstream; 0 = any free port
 * @param cpus      CPUs the stage's compute thread may be pinned to (empty = chosen by the tool)
 * @param external  "host:port" of a stage started elsewhere (not spawned by the tool), or null
 * @param alternatives more "host:port" addresses where a replacement of an external stage may come up (tried in
 *                     turn when the stage is lost); empty for a stage the tool starts
 */
public record StageSpec(int layerFrom, int layerTo, int port, List<Integer> cpus, String external, List<String> alternatives) {
    /** Without alternatives. */
    public StageSpec(int layerFrom, int layerTo, int port, List<Integer> cpus, String external) {
        this(layerFrom, layerTo, port, cpus, external, List.of());
    }

    public StageSpec {
        if (layerFrom < 0 || layerTo <= layerFrom) {
            throw new IllegalArgumentException("stage layers [" + layerFrom + ", " + layerTo + ") are empty or negative");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        cpus = List.copyOf(cpus);
        alternatives = List.copyOf(alternatives);
        if (!alternatives.isEmpty() && external == null) {
            throw new IllegalArgumentException("alternatives are addresses of an external stage: give \"external\" too");
        }
        for (String a : alternatives) {
            int colon = a.lastIndexOf(':');
            if (colon <= 0 || !a.substring(colon + 1).matches("\\d{1,5}")) {
                throw new IllegalArgumentException("alternative \"" + a + "\" is not host:port");
            }
        }
    }

    /** Every address of an external stage: {@code external}, then the alternatives. */
    public List<String> addresses() {
        List<String> all = new java.util.ArrayList<>();
        if (external != null) {
            all.add(external);
        }
        all.addAll(alternatives);
        return all;
    }

    public int layerCount() {
        return layerTo - layerFrom;
    }
}
