package io.tnsr.engine.forward;

import io.tnsr.engine.gguf.GgufFile;
import io.tnsr.engine.kvcache.KvCachePool;
import io.tnsr.engine.model.LlamaConfig;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

/**
 * Run in a fresh JVM by {@link RangeWarmupTest}: warms a whole model's layer range up as a stage does, then runs
 * calls of other batch and prompt sizes and prints the first that ran a kernel boxed, or "none boxed". A kernel
 * that traps back to the interpreter boxes every vector it touches: such a call allocated 0.4 to 9.6 MB on this tiny
 * model, so more than {@link #BOXED_BYTES} on this thread is the mark. (Four in ten fresh JVMs also allocated 88 to
 * 280 bytes once, in one of the first calls after the warm-up, at no fixed call: not a boxed kernel, and not what
 * this checks.) Exits 1 when the warm-up did not settle or a call ran boxed. One call as wide as the range takes runs before the
 * warm-up: the kernels' scratch grows to the widest call so far, once, and a call that grows it after the warm-up
 * takes a branch the warm-up never took; what is checked here is the token counts, not that growth. The calls run
 * three times: as a stage makes them, then with every matrix's choice of touching its panels first set each way
 * ({@link LayerRange#useTouch}; its probes still take the other way), since a matrix's timing may settle on either.
 */
public final class WarmupAllocationProbe {
    /** Bytes a call may allocate on this thread without having run a kernel boxed. */
    static final long BOXED_BYTES = 4096;
    /** Calls after the warm-up: {sequences, tokens each}. */
    private static final int[][] CALLS = {{2, 1}, {3, 1}, {5, 1}, {7, 1}, {12, 1}, {13, 1}, {16, 1}, {17, 1},
            {1, 21}, {1, 22}, {1, 45}, {1, 47}, {1, 7}};

    private WarmupAllocationProbe() {
    }

    public static void main(String[] args) {
        try (GgufFile f = GgufFile.open(Path.of(args[0]))) {
            LlamaConfig c = LlamaConfig.fromGguf(f);
            try (LayerRange r = new LayerRange(f, c, 0, c.layers(),
                    new KvCachePool(c.layers(), c.kvDim(), c.contextLength(), 16, 64L * c.contextLength()), 64, 32, 1, bytes -> { })) {
                com.sun.management.ThreadMXBean mx = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
                Batch b = new Batch(32, 64);
                int[] tokens = new int[64];
                float[] x = new float[64 * c.dim()];
                float[] logits = new float[32 * c.vocabSize()];
                int id = 100;
                call(r, b, 32, 2, id, tokens, x, logits);   // the scratch sized for the widest call, cold
                id += 32;
                RangeWarmup.Outcome o = new RangeWarmup(r).run(TimeUnit.SECONDS.toNanos(60));
                if (!o.settled()) {
                    System.out.println("the warm-up did not settle: " + o);
                    System.exit(1);
                }
                // the calls as a stage makes them, each matrix choosing its way; then with every choice set each way
                String[] ways = {"", " with every matrix touching its panels first",
                        " with no matrix touching its panels first"};
                for (int way = 0; way < ways.length; way++) {
                    if (way > 0) {
                        r.useTouch(way == 1);
                    }
                    for (int[] call : CALLS) {
                        long before = mx.getCurrentThreadAllocatedBytes();
                        call(r, b, call[0], call[1], id, tokens, x, logits);
                        long allocated = mx.getCurrentThreadAllocatedBytes() - before;
                        id += call[0];
                        if (allocated > BOXED_BYTES) {
                            System.out.println(call[0] + " sequences of " + call[1] + " tokens each" + ways[way] + " allocated "
                                    + allocated + " bytes after a warm-up of " + o.rounds() + " rounds");
                            System.exit(1);
                        }
                    }
                }
            }
        }
        System.out.println("none boxed");
    }

    /** {@code seqs} new sequences (ids from {@code id}) of {@code each} tokens from position 0 through r, then ended. */
    private static void call(LayerRange r, Batch b, int seqs, int each, int id, int[] tokens, float[] x, float[] logits) {
        b.clear();
        for (int s = 0; s < seqs; s++) {
            b.add(id + s, 0, each, true);
        }
        r.prepare(b, tokens, 0);
        r.embed(b, tokens, 0, x);
        r.forward(b, x);
        r.logits(b, x, logits);
        for (int s = 0; s < seqs; s++) {
            r.endSequence(id + s);
        }
    }
}
