package io.tnsr.engine.cli;

import io.tnsr.wire.ErrorCode;
import io.tnsr.wire.ErrorPayload;
import io.tnsr.wire.FrameEncoder;
import io.tnsr.wire.FrameFormatException;
import io.tnsr.wire.FrameChannel;
import io.tnsr.wire.FrameHeader;
import io.tnsr.wire.FrameStreams;
import io.tnsr.wire.FramePayload;
import io.tnsr.wire.HelloPayload;
import io.tnsr.wire.MessageType;
import io.tnsr.wire.SequenceTable;
import org.agrona.DirectBuffer;
import org.agrona.ExpandableArrayBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.OutputStreamWriter;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.charset.StandardCharsets;
import java.nio.file.AccessDeniedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.concurrent.Callable;

/**
 * {@code tools/tnsr-dump}: prints one line per TNSR frame of a byte stream (a file, or stdin), and on the first
 * malformed frame says which frame, at which byte offset, and what was wrong, on stderr.
 *
 * <p>Exit status: 0 when every frame was valid, 2 on a malformed stream, a missing/unreadable file or a usage error.
 * Tests call {@link #run(String[], InputStream, PrintStream, PrintStream)} in-process.
 */
@Command(
    name = "tnsr-dump",
    mixinStandardHelpOptions = true,
    version = "tnsr-dump (TNSR protocol version " + HelloPayload.PROTOCOL_VERSION + ")",
    sortOptions = false,
    description = {
        "Decodes a stream of TNSR frames (docs/PROTOCOL.md) and prints one line per" +
            " frame: index, byte offset, type, step_id, micro_batch_id, shape, payload bytes," +
            " sequence table and trace stamp if any; the ids of TOKENS and END_SEQUENCE, the" +
            " fields of HELLO, the code and message of ERROR.",
        "On the first malformed frame it prints the frame index, the byte offset and what" +
            " was wrong to stderr, and exits 2.",
        ""
    },
    exitCodeListHeading = "%nExit status:%n",
    exitCodeList = {
        "0:every frame was valid (also for an empty stream)",
        "2:malformed or truncated stream, unreadable file, or bad usage"
    })
public final class TnsrDump implements Callable<Integer>
{
    static final int EXIT_OK = 0;
    static final int EXIT_BAD = 2;
    private static final int INITIAL_FRAME_BUFFER = 64 * 1024;

    @Option(names = "--max-frame-size", paramLabel = "BYTES",
        description = "Largest total frame length accepted (default: ${DEFAULT-VALUE} = 64 MiB; " +
            FrameHeader.MIN_FRAME_SIZE + ".." + FrameHeader.MAX_FRAME_SIZE_LIMIT + ").")
    int maxFrameSize = FrameHeader.DEFAULT_MAX_FRAME_SIZE;

    @Option(names = "--max-ids", paramLabel = "N",
        description = "Print at most N ids of a TOKENS or END_SEQUENCE frame (default: ${DEFAULT-VALUE}).")
    int maxIds = 64;

    @Option(names = "--write-example", paramLabel = "OUT",
        description = "Instead of dumping, write a small sample stream (one frame of each type) to OUT and exit.")
    Path exampleOut;

    @Parameters(index = "0", arity = "0..1", paramLabel = "FILE",
        description = "The stream to decode; '-' or nothing for stdin.")
    String file = "-";

    private final InputStream stdin;
    private final PrintWriter out;
    private final PrintWriter err;

    private TnsrDump(final InputStream stdin, final PrintWriter out, final PrintWriter err)
    {
        this.stdin = stdin;
        this.out = out;
        this.err = err;
    }

    /** Command-line entry point: {@code System.exit} with the status of {@link #run}. */
    public static void main(final String[] args)
    {
        System.exit(run(args, System.in, System.out, System.err));
    }

    /**
     * Runs the command in-process.
     *
     * @return the exit status (0 valid, 2 malformed input, unreadable file or usage error).
     */
    public static int run(final String[] args, final InputStream stdin, final PrintStream stdout, final PrintStream stderr)
    {
        final PrintWriter out = writer(stdout);
        final PrintWriter err = writer(stderr);
        final CommandLine cmd = new CommandLine(new TnsrDump(stdin, out, err));
        cmd.setOut(out).setErr(err);
        cmd.setParameterExceptionHandler((ex, a) ->
        {
            err.println("tnsr-dump: " + ex.getMessage());
            err.println("Try 'tnsr-dump --help'.");
            return EXIT_BAD;
        });
        cmd.setExecutionExceptionHandler((ex, c, parseResult) ->
        {
            err.println("tnsr-dump: internal error: " + ex);
            return EXIT_BAD;
        });
        try
        {
            return cmd.execute(args);
        }
        finally
        {
            out.flush();
            err.flush();
        }
    }

    @Override
    public Integer call()
    {
        if (maxFrameSize < FrameHeader.MIN_FRAME_SIZE || maxFrameSize > FrameHeader.MAX_FRAME_SIZE_LIMIT)
        {
            err.println("tnsr-dump: --max-frame-size " + maxFrameSize + " not in [" + FrameHeader.MIN_FRAME_SIZE + ", " +
                FrameHeader.MAX_FRAME_SIZE_LIMIT + "]");
            return EXIT_BAD;
        }
        if (exampleOut != null)
        {
            return writeExample(exampleOut);
        }

        final boolean useStdin = "-".equals(file);
        if (useStdin)
        {
            try
            {
                return dump(stdin); // not closed: it is the caller's
            }
            catch (final IOException ex)
            {
                return ioError("cannot read stdin: " + ex.getMessage());
            }
        }
        try (InputStream in = Files.newInputStream(Path.of(file)))
        {
            return dump(in);
        }
        catch (final NoSuchFileException ex)
        {
            return ioError("no such file: " + file);
        }
        catch (final AccessDeniedException ex)
        {
            return ioError("permission denied: " + file);
        }
        catch (final IOException ex)
        {
            return ioError("cannot read " + file + ": " + ex.getMessage());
        }
    }

    private int dump(final InputStream in) throws IOException
    {
        final FrameChannel frames = FrameChannel.reading(Channels.newChannel(in), "the input", maxFrameSize);
        final Printer printer = new Printer(out, maxIds);
        final FrameHeader header = new FrameHeader();
        ByteBuffer frame = ByteBuffer.allocate(Math.min(INITIAL_FRAME_BUFFER, maxFrameSize)).order(FrameHeader.ORDER);
        final UnsafeBuffer view = new UnsafeBuffer(frame);
        try
        {
            int length;
            while ((length = frames.readHeader(frame)) != FrameChannel.END_OF_STREAM)
            {
                if (length > frame.capacity())
                {
                    final ByteBuffer larger = ByteBuffer.allocate(length).order(FrameHeader.ORDER);
                    larger.put(0, frame, 0, FrameHeader.HEADER_LENGTH);
                    frame = larger;
                    view.wrap(frame);
                }
                frames.readRest(frame);
                printer.print(view, 0, header.wrap(view, 0), frames.frameIndex(), frames.frameStreamOffset());
            }
            return EXIT_OK;
        }
        catch (final FrameFormatException ex)
        {
            out.flush();
            err.println("tnsr-dump: malformed stream: " + ex.getMessage());
            return EXIT_BAD;
        }
    }

    private int ioError(final String message)
    {
        out.flush();
        err.println("tnsr-dump: " + message);
        return EXIT_BAD;
    }

    private int writeExample(final Path target)
    {
        final byte[] example = FrameStreams.example();
        try
        {
            Files.write(target, example);
        }
        catch (final IOException ex)
        {
            return ioError("cannot write " + target + ": " + ex.getMessage());
        }
        out.println("wrote an example stream of every message type (" + example.length + " bytes) to " + target);
        return EXIT_OK;
    }

    private static PrintWriter writer(final OutputStream stream)
    {
        return new PrintWriter(new BufferedWriter(new OutputStreamWriter(stream, StandardCharsets.UTF_8)), false);
    }

    /** Formats one line per frame; reuses one StringBuilder. */
    static final class Printer
    {
        private final PrintWriter out;
        private final int maxIds;
        private final StringBuilder line = new StringBuilder(256);

        Printer(final PrintWriter out, final int maxIds)
        {
            this.out = out;
            this.maxIds = maxIds;
        }

        /** Prints the frame at {@code (buf, off)}, the {@code index}-th of the stream, starting at byte {@code offset}. */
        void print(final DirectBuffer buf, final int off, final FrameHeader header, final long index, final long offset)
        {
            final StringBuilder sb = line;
            sb.setLength(0);
            final MessageType type = header.messageType();
            final int rank = header.rank();
            sb.append('#').append(index).append(" @").append(offset)
                .append(' ').append(type.printName())
                .append(" step=").append(Long.toUnsignedString(header.stepId()))
                .append(" mb=").append(Integer.toUnsignedString(header.microBatchId()))
                .append(" shape=[");
            for (int i = 0; i < rank; i++)
            {
                sb.append(i == 0 ? "" : ",").append(header.dim(i));
            }
            sb.append("] payload=").append(header.payloadLength());

            switch (type)
            {
                case TOKENS:
                    appendU32s(sb, " ids=[", buf, off, (int)header.dim(0));
                    break;
                case END_SEQUENCE:
                    appendU32s(sb, " end_seqs=[", buf, off, (int)header.dim(0));
                    break;
                case HELLO:
                    final io.tnsr.wire.Hello h = io.tnsr.wire.Hello.from(buf, off);
                    sb.append(" hello={version=").append(h.protocolVersion())
                        .append(" role=").append(roleName(h.role()))
                        .append(" stage=").append(h.stageIndex()).append('/').append(h.stageCount())
                        .append(" layers=").append(h.layerFrom()).append("..").append(h.layerTo()).append(" of ").append(h.modelLayers())
                        .append(" hidden_dim=").append(h.hiddenDim())
                        .append(" vocab=").append(h.vocabSize())
                        .append(" max_tokens_per_frame=").append(h.maxTokensPerFrame())
                        .append(" max_sequences_per_frame=").append(h.maxSequencesPerFrame())
                        .append(" max_frame_bytes=").append(h.maxFrameBytes())
                        .append(" flags=").append(h.flags())
                        .append(" heartbeat_ms=").append(h.heartbeatMillis())
                        .append(" fingerprint=").append(java.util.HexFormat.of().formatHex(h.fingerprint(), 0, 6)).append('}');
                    break;
                case ERROR:
                    final int code = ErrorPayload.errorCodeValue(buf, off);
                    final ErrorCode errorCode = ErrorPayload.errorCode(buf, off);
                    final int seqId = ErrorPayload.seqId(buf, off);
                    sb.append(" error=").append(errorCode == null ? "UNKNOWN" : errorCode.name())
                        .append('(').append(Integer.toUnsignedString(code)).append(')')
                        .append(" seq=").append(seqId == ErrorCode.SEQ_ID_NONE ? "none" : Integer.toUnsignedString(seqId))
                        .append(" message=\"");
                    appendEscaped(sb, ErrorPayload.message(buf, off));
                    sb.append('"');
                    break;
                default:
                    break;
            }

            final int seqCount = header.sequenceCount();
            if (seqCount > 0)
            {
                sb.append(" seqs=[");
                for (int i = 0; i < seqCount; i++)
                {
                    sb.append(i == 0 ? "{" : " {")
                        .append("seq=").append(Integer.toUnsignedString(SequenceTable.seqId(buf, off, i)))
                        .append(" pos=").append(Integer.toUnsignedString(SequenceTable.position(buf, off, i)))
                        .append(" n=").append(Integer.toUnsignedString(SequenceTable.nTokens(buf, off, i)));
                    if (SequenceTable.wantsLogits(buf, off, i))
                    {
                        sb.append(" WANT_LOGITS");
                    }
                    sb.append('}');
                }
                sb.append(']');
            }
            if (header.hasTrace())
            {
                sb.append(" trace=").append(header.traceNanos());
            }
            out.append(sb).append('\n');
        }

        private void appendU32s(final StringBuilder sb, final String label, final DirectBuffer buf, final int off, final int count)
        {
            sb.append(label);
            final int shown = Math.min(count, maxIds);
            for (int i = 0; i < shown; i++)
            {
                sb.append(i == 0 ? "" : ",").append(Integer.toUnsignedString(FramePayload.u32(buf, off, i)));
            }
            if (shown < count)
            {
                sb.append(shown == 0 ? "" : ",").append("...+").append(count - shown).append(" more");
            }
            sb.append(']');
        }

        private static String roleName(final int role)
        {
            switch (role)
            {
                case HelloPayload.ROLE_COORDINATOR: return "coordinator";
                case HelloPayload.ROLE_STAGE: return "stage";
                default: return "unknown(" + Integer.toUnsignedString(role) + ")";
            }
        }

        private static void appendEscaped(final StringBuilder sb, final String s)
        {
            for (int i = 0; i < s.length(); i++)
            {
                final char c = s.charAt(i);
                if (c == '"' || c == '\\')
                {
                    sb.append('\\').append(c);
                }
                else if (c < 0x20 || c == 0x7F)
                {
                    sb.append(String.format("\\x%02x", (int)c));
                }
                else
                {
                    sb.append(c);
                }
            }
        }
    }
}
