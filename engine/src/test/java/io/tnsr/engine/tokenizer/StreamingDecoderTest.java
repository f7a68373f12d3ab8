package io.tnsr.engine.tokenizer;

import org.junit.jupiter.api.Test;

import java.nio.charset.StandardCharsets;
import java.util.Random;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** UTF-8 reassembly and the leading-space rule of {@link StreamingDecoder}, on a synthetic vocabulary. */
class StreamingDecoderTest {
    static final Tokenizer T = SyntheticVocab.tokenizer(SyntheticVocab.spm("▁", "H", "i", "▁H", "▁Hi", "!", "▁!"));

    static int b(int value) {
        return 3 + value;   // the byte token of {@code value}
    }

    @Test
    void reassemblesUtf8SplitAcrossByteTokens() {
        StreamingDecoder d = T.newDecoder(T.tokenId("▁Hi"));
        assertSame("", d.next(b(0xE2)));
        assertTrue(d.hasPending());
        assertSame("", d.next(b(0x80)));
        assertEquals("’", d.next(b(0x99)));
        assertFalse(d.hasPending());
        // A 4-byte character (U+1F999, the llama emoji) comes out whole, as a surrogate pair.
        assertSame("", d.next(b(0xF0)));
        assertSame("", d.next(b(0x9F)));
        assertSame("", d.next(b(0xA6)));
        assertEquals("🦙", d.next(b(0x99)));
        assertEquals("!", d.next(T.tokenId("!")));
        assertSame("", d.finish());
    }

    @Test
    void invalidBytesBecomeReplacementCharacters() {
        StreamingDecoder d = T.newDecoder(T.tokenId("!"));
        assertEquals("\uFFFD", d.next(b(0x80)));              // continuation byte out of place
        assertSame("", d.next(b(0xE2)));
        assertEquals("\uFFFDH", d.next(T.tokenId("H")));      // sequence cut short by an ASCII token
        assertSame("", d.next(b(0xC3)));
        assertEquals("\uFFFD", d.finish());                    // incomplete at the end
        assertEquals("\uFFFD", d.next(b(0xFF)));               // never valid in UTF-8
        assertEquals("\uFFFD", d.next(b(0xC0)));               // overlong lead
    }

    /**
     * Whatever the bytes, the decoder never prints half a character and keeps every valid character that
     * Java's own UTF-8 decoder keeps; on valid UTF-8 the two agree exactly. (On invalid input the number of
     * U+FFFD can differ: we write one per maximal invalid subpart, as Unicode recommends, while Java's
     * decoder writes one for "ED B2" at the end of input, for example, where we write two.)
     */
    @Test
    void agreesWithJavaDecoderOnRandomBytes() {
        Random r = new Random(42);
        int[] interesting = {0x41, 0x80, 0xBF, 0xC2, 0xC3, 0xDF, 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x9F, 0xA0, 0x90, 0x8F};
        for (int round = 0; round < 5000; round++) {
            int n = r.nextInt(12);
            byte[] bytes = new byte[n];
            int[] ids = new int[n];
            for (int i = 0; i < n; i++) {
                int v = r.nextBoolean() ? interesting[r.nextInt(interesting.length)] : r.nextInt(256);
                bytes[i] = (byte) v;
                ids[i] = b(v);
            }
            String want = new String(bytes, StandardCharsets.UTF_8);
            StreamingDecoder d = T.newDecoder(T.tokenId("!"));
            StringBuilder sb = new StringBuilder();
            for (int id : ids) {
                String piece = d.next(id);
                assertFalse(!piece.isEmpty() && Character.isHighSurrogate(piece.charAt(piece.length() - 1)),
                        "half a surrogate pair printed");
                sb.append(piece);
            }
            sb.append(d.finish());
            String got = sb.toString();
            if (want.indexOf('\uFFFD') < 0) {
                assertEquals(want, got, () -> "bytes " + java.util.HexFormat.ofDelimiter(" ").formatHex(bytes));
            } else {
                assertEquals(want.replace("\uFFFD", ""), got.replace("\uFFFD", ""),
                        () -> "bytes " + java.util.HexFormat.ofDelimiter(" ").formatHex(bytes));
                assertTrue(got.indexOf('\uFFFD') >= 0);
            }
        }
    }

    @Test
    void leadingSpaceDroppedAtStartAndAfterBosOnly() {
        int hi = T.tokenId("▁Hi");
        int bang = T.tokenId("▁!");
        assertEquals("Hi !", T.decode(new int[] {hi, bang}));
        assertEquals("Hi !", T.decode(new int[] {1, hi, bang}));
        assertEquals("Hi !Hi", T.decode(new int[] {1, hi, bang, 1, hi}));
        StreamingDecoder afterText = T.newDecoder(T.tokenId("!"));
        assertEquals(" Hi", afterText.next(hi));
        StreamingDecoder afterBos = T.newDecoder(1);
        assertEquals("Hi", afterBos.next(hi));
        afterBos.reset(-1);
        assertEquals("Hi", afterBos.next(hi));
        assertEquals(" !", afterBos.next(bang));
    }

    @Test
    void controlTokensRenderAsNothingAndBadIdsAreRejected() {
        assertEquals("", T.decode(new int[] {0, 1, 2}));
        assertThrows(IllegalArgumentException.class, () -> T.decode(new int[] {T.vocabSize()}));
        assertThrows(IllegalArgumentException.class, () -> T.newDecoder().next(-5));
    }

    @Test
    void streamEqualsWholeDecode() {
        String text = "Hi! ’🦙 H i";
        int[] ids = T.encode(text, true);
        StreamingDecoder d = T.newDecoder();
        StringBuilder sb = new StringBuilder();
        for (int id : ids) {
            d.next(id, sb);
        }
        d.finish(sb);
        assertEquals(text, sb.toString());
        assertEquals(text, T.decode(ids));
    }
}
