/** The TNSR frame codec: the bytes stages and the coordinator exchange over TCP. See docs/PROTOCOL.md. */
package io.tnsr.wire;
