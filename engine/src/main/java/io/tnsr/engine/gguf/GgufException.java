package io.tnsr.engine.gguf;

import java.nio.file.Path;

/**
 * A GGUF file that cannot be used: not GGUF, truncated, a length, nesting, size or tensor offset it cannot hold,
 * an unsupported version or tensor type, a missing tensor or metadata key, or a shape that disagrees with the
 * metadata. The message always names the file and, where one is involved, the tensor or key.
 */
public final class GgufException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final Path file;

    public GgufException(Path file, String what) {
        super(file + ": " + what);
        this.file = file;
    }

    public GgufException(Path file, String what, Throwable cause) {
        super(file + ": " + what, cause);
        this.file = file;
    }

    /** The file the problem is in. */
    public Path file() {
        return file;
    }
}
