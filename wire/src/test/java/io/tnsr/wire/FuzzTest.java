package io.tnsr.wire;

import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;

import static org.junit.jupiter.api.Assertions.*;

/**
 * Random and mutated streams: the frame channel only ever delivers valid frames or throws {@link FrameFormatException},
 * never anything else, never buffers more than the maximum frame size, and gives the same outcome however the stream
 * is split.
 *
 * <p>Bounded for CI (5,000 iterations, about a second). For millions:
 * {@code mvn -q -B -pl wire test -Dtest=FuzzTest -Dtnsr.fuzz.iterations=2000000 [-Dtnsr.fuzz.seed=N]}.
 * A failure names the seed and iteration that reproduce it.
 */
class FuzzTest
{
    private static final int ITERATIONS = Integer.getInteger("tnsr.fuzz.iterations", 5000);
    private static final long SEED = Long.getLong("tnsr.fuzz.seed", 0x7E5E_2024L);
    private static final int[] MAX_FRAME_SIZES = {56, 64, 100, 256, 1024, 4096, 1 << 16, 1 << 20};
    private static final long[] INTERESTING = {0, 1, 2, 3, 4, 7, 8, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 1 << 20,
        Integer.MAX_VALUE, 0x8000_0000L, 0xFFFF_FFFFL, 1L << 32, Long.MAX_VALUE, Long.MIN_VALUE, -1L};
    private static final String[] MUTATIONS = {"none", "flip-bits", "set-bytes", "header-field", "truncate", "insert",
        "delete", "random-bytes", "random-header", "splice"};

    @Test
    void randomAndMutatedStreamsYieldOnlyFramesOrFrameFormatException()
    {
        final int[] outcomes = new int[2];
        final java.util.Map<FrameFormatException.Reason, Integer> reasons = new java.util.EnumMap<>(FrameFormatException.Reason.class);
        for (int it = 0; it < ITERATIONS; it++)
        {
            final long seed = SEED + 0x9E37_79B9_7F4A_7C15L * it;
            final SplittableRandom r = new SplittableRandom(seed);
            final int max = MAX_FRAME_SIZES[r.nextInt(MAX_FRAME_SIZES.length)];
            final List<Integer> frameOffsets = new ArrayList<>();
            final byte[] valid = validStream(r, max, frameOffsets);
            final int mutation = r.nextInt(MUTATIONS.length);
            final byte[] stream = mutate(r, valid, frameOffsets, mutation);
            try
            {
                final TestStreams.Decoded whole = TestStreams.decode(stream, max, FuzzTest::readEverything);
                final int[] cuts = r.ints(r.nextInt(6), 0, stream.length + 1).sorted().toArray();
                final TestStreams.Decoded split = TestStreams.decode(stream, max, FuzzTest::readEverything, cuts);
                assertEquals(whole.toString(), split.toString(), "split at " + Arrays.toString(cuts));
                if (mutation == 0)
                {
                    assertNull(whole.error, whole::errorSummary);
                    assertEquals(frameOffsets.size(), whole.frames.size());
                }
                outcomes[whole.error == null ? 0 : 1]++;
                if (whole.error != null)
                {
                    reasons.merge(whole.error.reason(), 1, Integer::sum);
                }
            }
            catch (final Throwable t)
            {
                throw new AssertionError("fuzz iteration " + it + " (-Dtnsr.fuzz.seed=" + SEED + "), mutation " +
                    MUTATIONS[mutation] + ", max frame size " + max + ", stream (" + stream.length + " bytes) " +
                    TestStreams.hex(Arrays.copyOf(stream, Math.min(stream.length, 512))), t);
            }
        }
        System.out.println("fuzz: " + ITERATIONS + " iterations, seed " + SEED + ": " + outcomes[0] + " valid streams, " +
            outcomes[1] + " rejected: " + reasons);
        assertTrue(ITERATIONS < 1000 || reasons.size() >= 12, () -> "the fuzzer reaches most checks: " + reasons);
        assertTrue(ITERATIONS < 100 || (outcomes[0] > ITERATIONS / 20 && outcomes[1] > ITERATIONS / 20),
            "both valid and malformed streams exercised: " + Arrays.toString(outcomes));
    }

    /** Touches every byte a consumer could read through the payload views; must never throw on a delivered frame. */
    private static void readEverything(final DirectBuffer buf, final int off, final FrameHeader h)
    {
        try
        {
            assertEquals(h.frameLength(), FrameValidator.validateHeader(buf, off, 0, 0, FrameHeader.MAX_FRAME_SIZE_LIMIT));
            FrameValidator.validateTrailer(buf, off, 0, 0);
        }
        catch (final FrameFormatException ex)
        {
            throw new AssertionError("delivered frame does not validate", ex);
        }
        final MessageType type = h.messageType();
        final int elements = (int)(h.payloadLength() / type.elementSize());
        long sink = 0;
        if (type == MessageType.ERROR)
        {
            sink += ErrorPayload.errorCodeValue(buf, off) + ErrorPayload.seqId(buf, off) + ErrorPayload.message(buf, off).length();
        }
        else if (type.elementSize() == 4)
        {
            for (int i = 0; i < elements; i++)
            {
                sink += FramePayload.u32(buf, off, i) + (long)FramePayload.f32(buf, off, i);
            }
        }
        for (int i = 0; i < h.sequenceCount(); i++)
        {
            sink += SequenceTable.seqId(buf, off, i) + SequenceTable.position(buf, off, i) +
                SequenceTable.nTokens(buf, off, i) + SequenceTable.entryFlags(buf, off, i);
        }
        if (h.hasTrace())
        {
            sink += h.traceNanos();
        }
        assertNotNull(h.toString() + sink);
    }

    /** 0..6 random valid frames that fit {@code max} (occasionally one that does not: too large is a valid outcome too). */
    private static byte[] validStream(final SplittableRandom r, final int max, final List<Integer> offsets)
    {
        final FrameStreams.Builder b = new FrameStreams.Builder();
        final int count = r.nextInt(7);
        for (int i = 0; i < count; i++)
        {
            final int before = b.length();
            appendRandomFrame(r, b, max);
            if (b.length() - before > max)
            {
                b.truncate(before); // keep the unmutated stream valid
                continue;
            }
            offsets.add(before);
        }
        return b.bytes();
    }

    private static void appendRandomFrame(final SplittableRandom r, final FrameStreams.Builder b, final int max)
    {
        final long step = r.nextLong();
        final int mb = r.nextInt(4);
        final int flags = r.nextBoolean() ? FrameHeader.FLAG_TRACE : 0;
        final int budget = Math.max(1, Math.min(max, 1 << 16) / 16);
        if (max >= 1 << 20 && r.nextInt(100) == 0)
        {
            b.activations(step, mb, 256, 256, flags); // 256 KiB: larger than the reader's first buffer
            return;
        }
        switch (1 + r.nextInt(7))
        {
            case 1:
            {
                final int[] ids = r.ints(r.nextInt(Math.min(40, budget)), 0, 32000).toArray();
                b.tokens(step, mb, ids, flags, entries(r, ids.length, false));
                break;
            }
            case 2:
            {
                final int rows = r.nextInt(1, 6);
                final int width = r.nextInt(1, Math.max(2, Math.min(64, budget / rows)));
                b.activations(step, mb, rows, width, flags, entries(r, rows, false));
                break;
            }
            case 3:
            {
                final int rows = r.nextInt(0, 4);
                final int vocab = r.nextInt(1, Math.max(2, Math.min(64, budget / Math.max(1, rows))));
                final int[][] e = rows == 0 && r.nextBoolean() ? new int[0][] : entries(r, rows, true);
                b.logits(step, mb, rows, vocab, flags, e);
                break;
            }
            case 4:
            {
                final byte[] msg = new byte[r.nextInt(Math.min(60, budget))];
                r.nextBytes(msg); // not necessarily UTF-8: a reader must cope
                final int off = b.start();
                final int len = FrameEncoder.encodeError(b.buffer(), off, step, mb, ErrorCode.INTERNAL, r.nextInt(), "");
                b.buffer().putBytes(off + len, msg);
                FrameEncoder.encodeHeader(b.buffer(), off, MessageType.ERROR, step, mb, 0, 0, 1, 8 + msg.length, 0, 0, 0, 8 + msg.length);
                b.end(len + msg.length);
                break;
            }
            case 5:
                b.hello(r.nextInt(4));
                break;
            case 6:
                b.endSequence(step, r.ints(r.nextInt(Math.min(20, budget)), 0, 1000).toArray());
                break;
            default:
                b.shutdown(step);
                break;
        }
    }

    /**
     * A consistent sequence table over {@code rows} rows: for TOKENS/ACTIVATIONS the n_tokens sum to rows; for LOGITS
     * exactly {@code rows} entries have WANT_LOGITS. Often none.
     */
    private static int[][] entries(final SplittableRandom r, final int rows, final boolean logits)
    {
        if (r.nextInt(3) == 0)
        {
            return new int[0][];
        }
        final List<int[]> list = new ArrayList<>();
        if (logits)
        {
            final int extra = r.nextInt(3);
            for (int i = 0; i < rows + extra; i++)
            {
                list.add(new int[] {r.nextInt(), r.nextInt(4096), r.nextInt(8), 0});
            }
            for (int i = 0; i < rows; i++)
            {
                list.get(i)[3] = SequenceTable.WANT_LOGITS;
            }
            java.util.Collections.shuffle(list, new java.util.Random(r.nextLong()));
        }
        else
        {
            int left = rows;
            while (left > 0 || list.isEmpty())
            {
                final int n = left == 0 ? 0 : r.nextInt(1, left + 1);
                list.add(new int[] {r.nextInt(), r.nextInt(4096), n, r.nextInt(2)});
                left -= n;
            }
        }
        return list.toArray(new int[0][]);
    }

    private static byte[] mutate(final SplittableRandom r, final byte[] s, final List<Integer> frames, final int mutation)
    {
        switch (mutation)
        {
            case 0:
                return s;
            case 1:
            {
                final byte[] m = s.clone();
                for (int i = 0, n = r.nextInt(1, 9); i < n && m.length > 0; i++)
                {
                    m[r.nextInt(m.length)] ^= (byte)(1 << r.nextInt(8));
                }
                return m;
            }
            case 2:
            {
                final byte[] m = s.clone();
                for (int i = 0, n = r.nextInt(1, 5); i < n && m.length > 0; i++)
                {
                    m[r.nextInt(m.length)] = (byte)r.nextInt(256);
                }
                return m;
            }
            case 3:
            {
                if (frames.isEmpty())
                {
                    return randomBytes(r);
                }
                final byte[] m = s.clone();
                final UnsafeBuffer buf = new UnsafeBuffer(m);
                final int frame = frames.get(r.nextInt(frames.size()));
                final long value = r.nextInt(3) == 0 ? r.nextLong() : INTERESTING[r.nextInt(INTERESTING.length)];
                final int field = r.nextInt(8);
                switch (field)
                {
                    case 0: buf.putByte(frame + FrameHeader.MSG_TYPE_OFFSET, (byte)value); break;
                    case 1: buf.putByte(frame + FrameHeader.RANK_OFFSET, (byte)value); break;
                    case 2: buf.putByte(frame + FrameHeader.FLAGS_OFFSET, (byte)value); break;
                    case 3: buf.putByte(frame + FrameHeader.SEQUENCE_COUNT_OFFSET, (byte)value); break;
                    case 4: buf.putInt(frame + FrameHeader.PAYLOAD_LENGTH_OFFSET, (int)value, FrameHeader.ORDER); break;
                    default:
                        buf.putLong(frame + FrameHeader.DIMS_OFFSET + 8 * (field - 5 + r.nextInt(2)), value, FrameHeader.ORDER);
                        break;
                }
                return m;
            }
            case 4:
                return Arrays.copyOf(s, s.length == 0 ? 0 : r.nextInt(s.length));
            case 5:
            {
                final int at = r.nextInt(s.length + 1);
                final byte[] ins = randomBytes(r);
                final byte[] m = new byte[s.length + ins.length];
                System.arraycopy(s, 0, m, 0, at);
                System.arraycopy(ins, 0, m, at, ins.length);
                System.arraycopy(s, at, m, at + ins.length, s.length - at);
                return m;
            }
            case 6:
            {
                if (s.length == 0)
                {
                    return s;
                }
                final int from = r.nextInt(s.length);
                final int to = r.nextInt(from, s.length + 1);
                final byte[] m = new byte[s.length - (to - from)];
                System.arraycopy(s, 0, m, 0, from);
                System.arraycopy(s, to, m, from, s.length - to);
                return m;
            }
            case 7:
                return randomBytes(r);
            case 8:
            {
                // A plausible header (magic, known type, small rank and dims, payload_len near the product) + bytes.
                final UnsafeBuffer buf = new UnsafeBuffer(new byte[FrameHeader.HEADER_LENGTH + r.nextInt(300)]);
                r.nextBytes(buf.byteArray());
                final int rank = r.nextInt(6);
                final long[] d = new long[4];
                long product = 1;
                for (int i = 0; i < Math.min(rank, 4); i++)
                {
                    d[i] = r.nextInt(4) == 0 ? INTERESTING[r.nextInt(INTERESTING.length)] : r.nextInt(0, 9);
                    product *= d[i];
                }
                final MessageType type = MessageType.values()[r.nextInt(MessageType.values().length)];
                final long payload = r.nextBoolean() ? product * type.elementSize() : r.nextInt(300);
                FrameEncoder.encodeHeader(buf, 0, type, r.nextLong(), r.nextInt(), r.nextInt(4) == 0 ? r.nextInt(256) : r.nextInt(2),
                    r.nextInt(3) == 0 ? r.nextInt(256) : r.nextInt(3), rank, d[0], d[1], d[2], d[3], (int)payload);
                final byte[] m = Arrays.copyOf(s, s.length + buf.capacity());
                buf.getBytes(0, m, s.length, buf.capacity());
                return m;
            }
            default:
            {
                // Splice: the stream's bytes re-cut and concatenated, which often lands a frame start mid-frame.
                if (s.length == 0)
                {
                    return s;
                }
                final int a = r.nextInt(s.length);
                final int b = r.nextInt(s.length);
                final byte[] m = Arrays.copyOf(s, a + (s.length - b));
                System.arraycopy(s, b, m, a, s.length - b);
                return m;
            }
        }
    }

    private static byte[] randomBytes(final SplittableRandom r)
    {
        final byte[] b = new byte[r.nextInt(300)];
        r.nextBytes(b);
        if (b.length >= 4 && r.nextBoolean())
        {
            b[0] = 'T';
            b[1] = 'N';
            b[2] = 'S';
            b[3] = 'R';
        }
        return b;
    }
}
