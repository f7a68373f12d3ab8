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
 */
public record StageSpec(int layerFrom, int layerTo, int port, List<Integer> cpus, String external) {
    public StageSpec {
        if (layerFrom < 0 || layerTo <= layerFrom) {
            throw new IllegalArgumentException("stage layers [" + layerFrom + ", " + layerTo + ") are empty or negative");
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port " + port + " is outside 0..65535");
        }
        cpus = List.copyOf(cpus);
    }

    public int layerCount() {
        return layerTo - layerFrom;
    }
}
