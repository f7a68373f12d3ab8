package io.tnsr.engine.util;

import io.tnsr.engine.testing.TestJson;
import org.junit.jupiter.api.Test;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

class JsonTest {

    @Test
    void escapesStrings() {
        assertEquals("\"plain\"", Json.quote("plain"));
        assertEquals("\"a\\\"b\\\\c\"", Json.quote("a\"b\\c"));
        assertEquals("\"\\n\\r\\t\\b\\f\\u0000\\u001f\"", Json.quote("\n\r\t\b\f\u0000\u001f"));
        assertEquals("\"’ 🦙 é\"", Json.quote("’ 🦙 é"));                 // non-ASCII as is
        assertEquals("\"\\u2028\\u2029\"", Json.quote("\u2028\u2029"));
        assertEquals("\"\\ud83d x\"", Json.quote("\ud83d x"));             // unpaired surrogate
        assertEquals("\"/\"", Json.quote("/"));
    }

    @Test
    void writesValues() {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("text", "Hi\n");
        m.put("ids", new int[] {1, 2, 3});
        m.put("none", new int[0]);
        m.put("list", List.of(1L, 2.5, true, "x"));
        m.put("null", null);
        m.put("f", new float[] {0.5f});
        String json = Json.write(m);
        assertEquals("{\"text\": \"Hi\\n\", \"ids\": [1, 2, 3], \"none\": [], \"list\": [1, 2.5, true, \"x\"], \"null\": null, \"f\": [0.5]}", json);
        assertEquals(m.get("text"), ((Map<?, ?>) TestJson.parse(json)).get("text"));
        assertThrows(IllegalArgumentException.class, () -> Json.write(Double.NaN));
        assertThrows(IllegalArgumentException.class, () -> Json.write(new Object()));
    }

    /** Every string survives a write and a parse, whatever its characters. */
    @Test
    void roundTripsAllCharacters() {
        StringBuilder sb = new StringBuilder();
        for (char c = 0; c < 0x3000; c++) {
            if (!Character.isSurrogate(c)) {
                sb.append(c);
            }
        }
        sb.append("🦙\uD83D\uDE00");
        String s = sb.toString();
        assertEquals(s, TestJson.parse(Json.quote(s)));
    }
}
