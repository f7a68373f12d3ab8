package io.tnsr.engine.cli;

import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FrameStreams;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

import static org.junit.jupiter.api.Assertions.*;

/** {@code tools/tnsr-dump} run in-process: stdout, stderr and exit status for valid and each kind of malformed input. */
class TnsrDumpTest
{
    @TempDir
    Path dir;

    /** Exit status and captured streams of one run. */
    record Run(int status, String out, String err)
    {
        String[] lines()
        {
            return out.isEmpty() ? new String[0] : out.split("\n");
        }
    }

    private static Run run(final byte[] stdin, final String... args)
    {
        final ByteArrayOutputStream out = new ByteArrayOutputStream();
        final ByteArrayOutputStream err = new ByteArrayOutputStream();
        final int status = TnsrDump.run(args, new ByteArrayInputStream(stdin),
            new PrintStream(out, true, StandardCharsets.UTF_8), new PrintStream(err, true, StandardCharsets.UTF_8));
        return new Run(status, out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8));
    }

    /** Runs on a malformed stream: exit 2, nothing but one clean line on stderr naming frame, offset and problem. */
    private static Run malformed(final byte[] stream, final long frame, final long offset, final String reason, final String... args)
    {
        final Run r = run(stream, args);
        assertEquals(2, r.status, r::toString);
        assertFalse(r.err.contains("Exception") || r.err.contains("\tat "), "no stack trace: " + r.err);
        assertEquals(1, r.err.split("\n").length, r.err);
        assertTrue(r.err.startsWith("tnsr-dump: malformed stream: frame #" + frame + " at stream offset "), r.err);
        assertTrue(r.err.contains("[" + reason + " at byte " + offset + "]"), r.err);
        assertEquals(frame, r.lines().length, "the valid frames before the bad one are printed");
        return r;
    }

    private static byte[] concat(final byte[] a, final byte[] b)
    {
        final byte[] c = Arrays.copyOf(a, a.length + b.length);
        System.arraycopy(b, 0, c, a.length, b.length);
        return c;
    }

    private static byte[] tokens()
    {
        return new FrameStreams.Builder().tokens(3, 1, new int[] {10, 20, 30}, 0).bytes(); // 68 bytes
    }

    @Test
    void validStreamFromStdinAndFromFile() throws Exception
    {
        final byte[] stream = FrameStreams.example();
        final Run r = run(stream);
        assertEquals(0, r.status, r::toString);
        assertEquals("", r.err);
        final String[] lines = r.lines();
        assertEquals(12, lines.length, r.out);
        assertEquals("#0 @0 HELLO step=0 mb=0 shape=[34] payload=136 hello={version=" + io.tnsr.wire.HelloPayload.PROTOCOL_VERSION + " role=stage stage=1/2 layers=0..3 of 3 " +
            "hidden_dim=64 vocab=512 max_tokens_per_frame=512 max_sequences_per_frame=32 max_frame_bytes=1048576 flags=0 " +
            "heartbeat_ms=500 fingerprint=000000000000}", lines[0]);
        assertEquals("#1 @192 TOKENS step=1 mb=0 shape=[3] payload=12 ids=[1,2,3]", lines[1]);
        assertEquals("#2 @260 TOKENS step=2 mb=1 shape=[4] payload=16 ids=[5,6,7,8] " +
            "seqs=[{seq=7 pos=0 n=3 WANT_LOGITS} {seq=9 pos=40 n=1 WANT_LOGITS}] trace=1000000260", lines[2]);
        assertTrue(lines[3].matches("#3 @\\d+ ACTIVATIONS step=3 mb=0 shape=\\[3,4] payload=48"), lines[3]);
        assertTrue(lines[5].matches("#5 @\\d+ LOGITS step=5 mb=0 shape=\\[1,6] payload=24 seqs=\\[\\{seq=7 pos=6 n=3 WANT_LOGITS} " +
            "\\{seq=9 pos=42 n=1}] trace=\\d+"), lines[5]);
        assertTrue(lines[7].endsWith("ERROR step=7 mb=0 shape=[25] payload=25 error=OUT_OF_KV_CACHE(5) seq=9 message=\"kv cache full: é\""),
            lines[7]);
        assertTrue(lines[8].endsWith("error=INTERNAL(255) seq=none message=\"\""), lines[8]);
        assertTrue(lines[9].endsWith("END_SEQUENCE step=9 mb=0 shape=[2] payload=8 end_seqs=[7,9]"), lines[9]);
        assertTrue(lines[10].endsWith("END_SEQUENCE step=10 mb=0 shape=[0] payload=0 end_seqs=[]"), lines[10]);
        assertEquals("#11 @" + (stream.length - 56) + " SHUTDOWN step=11 mb=0 shape=[] payload=0", lines[11]);

        final Path file = dir.resolve("stream.tnsr");
        Files.write(file, stream);
        assertEquals(r, run(new byte[0], file.toString()));
        assertEquals(r, run(stream, "-"));
    }

    @Test
    void emptyStreamIsValid()
    {
        assertEquals(new Run(0, "", ""), run(new byte[0]));
    }

    @Test
    void longTokenListsAreCut()
    {
        final int[] ids = new int[100];
        Arrays.setAll(ids, i -> i);
        final Run r = run(new FrameStreams.Builder().tokens(1, 0, ids, 0).bytes(), "--max-ids", "3");
        assertEquals(0, r.status);
        assertTrue(r.out.contains(" ids=[0,1,2,...+97 more]"), r.out);
    }

    @Test
    void badMagic()
    {
        final byte[] s = concat(tokens(), tokens());
        s[68 + 1] = 'X';
        final Run r = malformed(s, 1, 68, "BAD_MAGIC");
        assertTrue(r.err.contains("bad magic 54 58 53 52, expected 54 4E 53 52"), r.err);
    }

    @Test
    void absurdPayloadLength()
    {
        final byte[] bad = tokens();
        new UnsafeBuffer(bad).putInt(FrameHeader.PAYLOAD_LENGTH_OFFSET, 0xFFFF_FFF0, FrameHeader.ORDER);
        final Run r = malformed(concat(tokens(), bad), 1, 68 + 20, "FRAME_TOO_LARGE");
        assertTrue(r.err.contains("payload_len 4294967280 > max frame size 67108864"), r.err);
    }

    @Test
    void configuredMaxFrameSize()
    {
        malformed(concat(tokens(), tokens()), 0, 20, "FRAME_TOO_LARGE", "--max-frame-size", "60");
        assertEquals(0, run(tokens(), "--max-frame-size", "68").status);
    }

    @Test
    void rankOverFour()
    {
        final byte[] bad = tokens();
        bad[FrameHeader.RANK_OFFSET] = 5;
        final Run r = malformed(concat(tokens(), bad), 1, 68 + 5, "RANK_TOO_LARGE");
        assertTrue(r.err.contains("shape_rank 5 > 4"), r.err);
    }

    @Test
    void shapePayloadMismatch()
    {
        final byte[] bad = tokens();
        new UnsafeBuffer(bad).putLong(FrameHeader.DIMS_OFFSET, 4, FrameHeader.ORDER);
        final Run r = malformed(concat(tokens(), bad), 1, 68 + 20, "SHAPE_PAYLOAD_MISMATCH");
        assertTrue(r.err.contains("TOKENS shape [4] x 4 bytes = 16 bytes, but payload_len is 12"), r.err);
    }

    @Test
    void truncatedHeader()
    {
        final Run r = malformed(Arrays.copyOf(concat(tokens(), tokens()), 68 + 30), 1, 68 + 30, "TRUNCATED_HEADER");
        assertTrue(r.err.contains("stream from the input ended after 30 of the 56 header bytes"), r.err);
    }

    @Test
    void truncatedPayload()
    {
        final Run r = malformed(Arrays.copyOf(concat(tokens(), tokens()), 68 + 60), 1, 68 + 60, "TRUNCATED_PAYLOAD");
        assertTrue(r.err.contains("stream from the input ended after 60 of the 68 frame bytes (TOKENS, payload_len 12, 0 sequence entries)"), r.err);
    }

    @Test
    void unknownType()
    {
        final byte[] bad = tokens();
        bad[FrameHeader.MSG_TYPE_OFFSET] = 42;
        final Run r = malformed(concat(tokens(), bad), 1, 68 + 4, "UNKNOWN_MESSAGE_TYPE");
        assertTrue(r.err.contains("unknown msg_type 42, expected 1..7"), r.err);
    }

    @Test
    void garbageAfterAValidFrame()
    {
        final byte[] garbage = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\nmore garbage padding....".getBytes(StandardCharsets.US_ASCII);
        assertTrue(garbage.length >= 56);
        malformed(concat(tokens(), garbage), 1, 68, "BAD_MAGIC");
        malformed(concat(tokens(), new byte[] {1, 2, 3}), 1, 68 + 3, "TRUNCATED_HEADER");
    }

    @Test
    void missingFile()
    {
        final Run r = run(new byte[0], dir.resolve("nope.tnsr").toString());
        assertEquals(2, r.status);
        assertEquals("", r.out);
        assertEquals("tnsr-dump: no such file: " + dir.resolve("nope.tnsr") + "\n", r.err);
    }

    @Test
    void usage()
    {
        final Run help = run(new byte[0], "--help");
        assertEquals(0, help.status);
        assertTrue(help.out.contains("Usage: tnsr-dump") && help.out.contains("--max-frame-size=BYTES"), help.out);
        final Run bad = run(new byte[0], "--no-such-option");
        assertEquals(2, bad.status);
        assertTrue(bad.err.startsWith("tnsr-dump: Unknown option: '--no-such-option'"), bad.err);
        final Run range = run(new byte[0], "--max-frame-size", "10");
        assertEquals(2, range.status);
        assertTrue(range.err.contains("--max-frame-size 10 not in [56, 1073741824]"), range.err);
    }

    @Test
    void writeExampleThenDumpIt() throws Exception
    {
        final Path file = dir.resolve("example.tnsr");
        final Run w = run(new byte[0], "--write-example", file.toString());
        assertEquals(0, w.status, w::toString);
        assertTrue(w.out.startsWith("wrote an example stream of every message type (" + FrameStreams.example().length + " bytes)"), w.out);
        final Run r = run(new byte[0], file.toString());
        assertEquals(0, r.status, r::toString);
        assertEquals(run(FrameStreams.example()), r, "the example stream, as dumped from stdin");
        assertEquals(12, r.lines().length, r.out);
        assertTrue(r.lines()[2].contains("TOKENS") && r.lines()[2].contains("trace=1000000260"), r.out);
    }
}
