package io.tnsr.engine.testing;

import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectReader;
import io.tnsr.engine.util.Jackson;
import java.io.UncheckedIOException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/** JSON for test data (the golden files) and the tools' JSON output, read with the engine's {@link Jackson} mapper. */
public final class TestJson {
    /** Every JSON integer read as a Long, so that tests compare numbers of one type. */
    private static final ObjectReader INTEGERS_AS_LONGS = Jackson.MAPPER.reader().with(DeserializationFeature.USE_LONG_FOR_INTS);

    private TestJson() {
    }

    public static Object parse(String text) {
        try {
            return INTEGERS_AS_LONGS.readValue(text, Object.class);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    public static Object read(Path file) throws IOException {
        return parse(Files.readString(file, StandardCharsets.UTF_8));
    }

    /** {@code list} (a parsed JSON array of integers) as an int[]. */
    public static int[] ints(Object list) {
        List<?> l = (List<?>) list;
        int[] r = new int[l.size()];
        for (int k = 0; k < r.length; k++) {
            r[k] = Math.toIntExact(((Number) l.get(k)).longValue());
        }
        return r;
    }
}
