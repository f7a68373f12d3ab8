package io.tnsr.engine.testing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/** The reference outputs in {@code ../shared/golden/}. */
public final class Golden {
    private Golden() {
    }

    /** One case of stories260K-greedy.json. */
    public record Case(String prompt, int[] promptTokens, int maxNewTokens, int[] generatedTokens, String stoppedBy,
                       String text) {
    }

    public static List<Case> greedyCases() {
        Path p = SharedData.path("golden/stories260K-greedy.json");
        try {
            @SuppressWarnings("unchecked")
            Map<String, Object> root = (Map<String, Object>) TestJson.read(p);
            List<Case> cases = new ArrayList<>();
            for (Object o : (List<?>) root.get("cases")) {
                Map<?, ?> m = (Map<?, ?>) o;
                cases.add(new Case((String) m.get("prompt"), ints(m.get("prompt_tokens")),
                        ((Number) m.get("max_new_tokens")).intValue(), ints(m.get("generated_tokens")),
                        (String) m.get("stopped_by"), (String) m.get("text")));
            }
            return cases;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Rows of 512 logits from stories260K-once-upon-a-time-logits.f32. */
    public static float[][] onceUponATimeLogits() {
        Path p = SharedData.path("golden/stories260K-once-upon-a-time-logits.f32");
        try {
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(p)).order(ByteOrder.LITTLE_ENDIAN);
            int vocab = 512;
            float[][] rows = new float[b.capacity() / 4 / vocab][vocab];
            for (float[] row : rows) {
                for (int i = 0; i < vocab; i++) {
                    row[i] = b.getFloat();
                }
            }
            return rows;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int[] ints(Object list) {
        return TestJson.ints(list);
    }
}
