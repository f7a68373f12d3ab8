/** Command-line tools over the TNSR codec: {@link io.tnsr.wire.cli.TnsrDump} ({@code tools/tnsr-dump}). */
package io.tnsr.wire.cli;
