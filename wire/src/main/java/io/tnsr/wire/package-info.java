/**
 * The TNSR frame codec: the bytes stages and the coordinator exchange over TCP. See docs/PROTOCOL.md.
 *
 * <ul>
 * <li>{@link io.tnsr.wire.FrameHeader}: layout constants, static accessors, reusable flyweight.</li>
 * <li>{@link io.tnsr.wire.FrameValidator}: allocation-free header and trailer validation.</li>
 * <li>{@link io.tnsr.wire.FrameChannel}: whole frames over a socket, a file or stdin (read 56 bytes, validate, read
 * the rest into the same buffer, validate the trailer; a stream ending inside a frame is an error, never a frame),
 * writes, and the {@link io.tnsr.wire.Hello} handshake with a time limit.</li>
 * <li>{@link io.tnsr.wire.FrameEncoder}: writes headers, payloads, sequence entries, trace stamps.</li>
 * <li>{@link io.tnsr.wire.FramePayload}, {@link io.tnsr.wire.SequenceTable}, {@link io.tnsr.wire.ErrorPayload},
 * {@link io.tnsr.wire.HelloPayload}: payload readers.</li>
 * <li>{@link io.tnsr.wire.FrameFormatException}: what was wrong, with the frame index and the stream offset.</li>
 * </ul>
 */
package io.tnsr.wire;
