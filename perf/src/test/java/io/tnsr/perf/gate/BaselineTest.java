package io.tnsr.perf.gate;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BaselineTest {
    @Test
    void writesOneMetricPerLineAndReadsItBack(@TempDir Path dir) throws Exception {
        Map<String, Baseline.Entry> m = new LinkedHashMap<>();
        m.put("time.kernel.f32", new Baseline.Entry(Metric.Kind.RATIO, 0.651371, 0.25, 0.0812));
        m.put("alloc.codec.decode16k", new Baseline.Entry(Metric.Kind.ALLOC, 0, 1, Double.NaN));
        m.put("info.copy64m", new Baseline.Entry(Metric.Kind.INFO, 6130000, Double.NaN, 0.1));
        Map<String, String> notes = new LinkedHashMap<>();
        notes.put("machine", "AMD EPYC, 2 CPUs");
        Baseline b = new Baseline(m, 16384, notes);
        Path f = dir.resolve("baseline.json");
        b.write(f);
        String text = Files.readString(f);
        assertTrue(text.contains("\n    \"time.kernel.f32\": {\"kind\": \"ratio\", \"value\": 0.6514, \"tolerance\": 0.25, \"spread\": 0.0812},\n"), text);
        assertTrue(text.contains("\n    \"alloc.codec.decode16k\": {\"kind\": \"alloc\", \"value\": 0, \"tolerance\": 1},\n"), text);
        Baseline back = Baseline.read(f);
        assertEquals(16384, back.backgroundAllocBytesPerIteration());
        assertEquals("AMD EPYC, 2 CPUs", back.notes().get("machine"));
        assertEquals(0.6514, back.metrics().get("time.kernel.f32").value(), 1e-12);
        assertEquals(Metric.Kind.INFO, back.metrics().get("info.copy64m").kind());
        assertTrue(Double.isNaN(back.metrics().get("info.copy64m").tolerance()));
        assertEquals(text, back.toJson(), "a read and rewritten baseline is unchanged");
    }

    @Test
    void fourSignificantDigits() {
        assertEquals("0.0001235", Baseline.fmt(0.00012345678));
        assertEquals("1.146", Baseline.fmt(1.14567));
        assertEquals("6130000", Baseline.fmt(6130000.0));
        assertEquals("16.4", Baseline.fmt(16.4));
    }
}
