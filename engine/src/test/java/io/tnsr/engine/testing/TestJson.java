package io.tnsr.engine.testing;

import io.tnsr.engine.util.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** JSON for test data (the golden files), read with the engine's own {@link JsonParser}. */
public final class TestJson {
    private TestJson() {
    }

    public static Object parse(String text) {
        return JsonParser.parse(text);
    }

    public static Object read(Path file) throws IOException {
        return parse(Files.readString(file, StandardCharsets.UTF_8));
    }

    /** {@code list} (a parsed JSON array of integers) as an int[]. */
    public static int[] ints(Object list) {
        List<?> l = (List<?>) list;
        int[] r = new int[l.size()];
        for (int k = 0; k < r.length; k++) {
            r[k] = Math.toIntExact((Long) l.get(k));
        }
        return r;
    }
}
