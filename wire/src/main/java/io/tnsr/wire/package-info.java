/**
 * The TNSR frame codec: the bytes stages and the coordinator exchange over TCP. See docs/PROTOCOL.md.
 *
 * <ul>
 * <li>{@link io.tnsr.wire.FrameHeader}: layout constants, static accessors, reusable flyweight.</li>
 * <li>{@link io.tnsr.wire.FrameValidator}: allocation-free header and trailer validation (PULL mode: read 56
 * bytes, validate, read the rest of the frame into the same buffer, validate the trailer).</li>
 * <li>{@link io.tnsr.wire.StreamFrameDecoder} + {@link io.tnsr.wire.FrameHandler}: PUSH mode over any byte
 * stream split anywhere.</li>
 * <li>{@link io.tnsr.wire.FrameEncoder}: writes headers, payloads, sequence entries, trace stamps.</li>
 * <li>{@link io.tnsr.wire.FramePayload}, {@link io.tnsr.wire.SequenceTable}, {@link io.tnsr.wire.ErrorPayload},
 * {@link io.tnsr.wire.HelloPayload}: payload readers.</li>
 * <li>{@link io.tnsr.wire.FrameFormatException}: what was wrong, with the frame index and the stream offset.</li>
 * </ul>
 */
package io.tnsr.wire;
