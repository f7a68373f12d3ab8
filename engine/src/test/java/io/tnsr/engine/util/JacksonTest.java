package io.tnsr.engine.util;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.core.JsonProcessingException;
import io.tnsr.engine.testing.TestJson;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class JacksonTest {
    record Point(int x, int y) {
    }

    @Test
    void anUnknownKeyIsAnErrorThatNamesItAndTheKnownOnes() {
        JsonProcessingException e = assertThrows(JsonProcessingException.class,
                () -> Jackson.MAPPER.readValue("{\"x\": 1, \"y\": 2, \"z\": 3}", Point.class));
        assertEquals("unknown key 'z' (known: x, y)", Jackson.describe(e));
    }

    @Test
    void aSyntaxErrorSaysWhere() {
        JsonProcessingException e = assertThrows(JsonProcessingException.class,
                () -> Jackson.MAPPER.readValue("{\"x\": 1,\n \"y\" 2}", Point.class));
        assertEquals("not valid JSON: unexpected character ('2'): was expecting a colon to separate field name and value"
                + " at line 2, column 6", Jackson.describe(e));
    }

    /** Jackson's token kinds, features and "[Source: ...]" are left out of a parser's complaint. */
    @Test
    void aParsersComplaintIsInPlainWords() {
        assertEquals("not valid JSON: unexpected end of input at line 1, column 9", describe("{\"x\": 1,"));
        assertEquals("not valid JSON: more data after the JSON value at line 1, column 18", describe("{\"x\": 1, \"y\": 2} 3"));
        assertEquals("not valid JSON: unexpected close marker ']': expected '}' at line 1, column 8", describe("{\"x\": 1]"));
    }

    private static String describe(String json) {
        return Jackson.describe(assertThrows(JsonProcessingException.class, () -> Jackson.MAPPER.readValue(json, Point.class)));
    }

    @Test
    void prettyPutsTheOuterTwoLevelsOneEntryPerLine() {
        Map<String, Object> metrics = new LinkedHashMap<>();
        metrics.put("hop", Map.of("p50_us", 7.5));
        metrics.put("ttft", Map.of("p50_us", 120));
        Map<String, Object> root = new LinkedHashMap<>();
        root.put("stages", 2);
        root.put("hops", List.of("a", "b"));
        root.put("metrics", metrics);
        assertEquals("""
                {
                  "stages": 2,
                  "hops": [ "a", "b" ],
                  "metrics": {
                    "hop": { "p50_us": 7.5 },
                    "ttft": { "p50_us": 120 }
                  }
                }""", Jackson.pretty(root));
        assertEquals(root.toString(), TestJson.parse(Jackson.pretty(root)).toString());
    }

    /** Every string survives a write and a read, whatever its characters. */
    @Test
    void roundTripsAllCharacters() {
        StringBuilder sb = new StringBuilder();
        for (char c = 0; c < 0x3000; c++) {
            if (!Character.isSurrogate(c)) {
                sb.append(c);
            }
        }
        sb.append("🦙\uD83D\uDE00\u2028\u2029");
        String s = sb.toString();
        assertEquals(s, TestJson.parse(Jackson.write(s)));
    }
}
