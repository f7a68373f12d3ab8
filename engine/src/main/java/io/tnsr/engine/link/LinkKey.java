package io.tnsr.engine.link;

import java.io.IOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.Arrays;
import java.util.Set;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The key that the coordinator and every stage of a pipeline share, read from a key file: each end of a link
 * proves it holds it with an HMAC-SHA256 over both ends' HELLOs (each carrying a fresh nonce), so a peer without
 * the key, or one replaying an old handshake, is refused. {@link #NONE}: no key (loopback pipelines).
 *
 * <p>Key file: any bytes, at least {@link #MIN_BYTES} after trailing white space is removed; for example
 * {@code head -c 32 /dev/urandom | base64 > pipeline.key}. A file that others can read is used, with a warning.
 */
public final class LinkKey {
    /** Fewest key bytes accepted. */
    public static final int MIN_BYTES = 16;
    /** No key: links are not authenticated. */
    public static final LinkKey NONE = new LinkKey(null, null);

    private final byte[] key;
    private final Path file;

    private LinkKey(byte[] key, Path file) {
        this.key = key;
        this.file = file;
    }

    /** A key given directly (tests). */
    public static LinkKey of(byte[] key) {
        if (key.length < MIN_BYTES) {
            throw new IllegalArgumentException("a link key needs at least " + MIN_BYTES + " bytes, got " + key.length);
        }
        return new LinkKey(key.clone(), null);
    }

    /** Reads a key file; null gives {@link #NONE}. Errors name the file. */
    public static LinkKey load(Path file) {
        if (file == null) {
            return NONE;
        }
        byte[] raw;
        try {
            raw = Files.readAllBytes(file);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read the key file " + file + ": " + e.getMessage(), e);
        }
        int n = raw.length;
        while (n > 0 && Character.isWhitespace(raw[n - 1])) {
            n--;
        }
        if (n < MIN_BYTES) {
            throw new IllegalArgumentException("the key file " + file + " holds " + n + " bytes; a key needs at least " + MIN_BYTES
                    + " (for example: head -c 32 /dev/urandom | base64 > " + file + ")");
        }
        try {
            Set<PosixFilePermission> p = Files.getPosixFilePermissions(file);
            if (p.contains(PosixFilePermission.OTHERS_READ) || p.contains(PosixFilePermission.GROUP_READ)) {
                System.err.println("warning: the key file " + file + " can be read by other users (chmod 600 " + file + ")");
            }
        } catch (IOException | UnsupportedOperationException ignored) {
            // not a POSIX file system: nothing to check
        }
        return new LinkKey(Arrays.copyOf(raw, n), file);
    }

    /** The file the key was read from (null: none, or given directly). */
    public java.nio.file.Path file() {
        return file;
    }

    /** Whether links are authenticated. */
    public boolean present() {
        return key != null;
    }

    /** HMAC-SHA256 of the parts, in order. */
    public byte[] mac(byte[]... parts) {
        if (key == null) {
            throw new IllegalStateException("no link key");
        }
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(key, "HmacSHA256"));
            for (byte[] p : parts) {
                m.update(p);
            }
            return m.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is not available in this JVM", e);
        }
    }

    /** Compares MACs in constant time. */
    public static boolean same(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }

    /**
     * Refuses to serve or connect on an address that is not loopback without a key, unless {@code insecure}, which
     * is then said loudly on stderr. {@code who} and {@code option} name the process and its key option in the message.
     *
     * @throws IllegalArgumentException the address is not loopback, there is no key and {@code insecure} is false
     */
    public void requireFor(String host, boolean insecure, String who, String option) {
        if (present() || isLoopback(host)) {
            return;
        }
        if (!insecure) {
            throw new IllegalArgumentException(who + " uses " + host + ", which is not a loopback address, without a key: give "
                    + option + " FILE (the same key file on the coordinator and every stage), or --insecure to run"
                    + " without authentication");
        }
        System.err.println("WARNING: " + who + " uses " + host + " WITHOUT AUTHENTICATION (--insecure): anyone who can reach it"
                + " can join the pipeline, read its activations and send it frames");
    }

    /**
     * The coordinator's side of {@link #requireFor}: refuses to connect to stages at addresses that are not loopback
     * without a key, unless {@code insecure}, which is then said loudly on stderr. {@code stages} names each such stage
     * and address ("stage1 at 10.0.0.3:7001"); {@code who} names the process in the warning, {@code option} its key
     * option.
     *
     * @throws IllegalArgumentException {@code stages} is not empty, there is no key and {@code insecure} is false
     */
    public void requireForLinks(java.util.List<String> stages, boolean insecure, String who, String option) {
        if (present() || stages.isEmpty()) {
            return;
        }
        String them = String.join(", ", stages);
        boolean one = stages.size() == 1;
        if (!insecure) {
            throw new IllegalArgumentException(them + (one ? " is not at a loopback address" : " are not at loopback addresses")
                    + ", and there is no key: give " + option + " FILE (the same key file on the coordinator and every stage),"
                    + " or --insecure to run without authentication");
        }
        System.err.println("WARNING: " + who + " connects to " + them + " WITHOUT AUTHENTICATION (--insecure): anyone who can"
                + " reach " + (one ? "it" : "them") + " or the links can pose as a stage, read the activations and change the output");
    }

    /** Whether the host of {@code address} ("host:port", "[v6]:port") is a loopback address (an unresolvable name is not). */
    public static boolean isLoopbackAddress(String address) {
        int colon = address.lastIndexOf(':');
        return isLoopback(colon > 0 ? address.substring(0, colon) : address);
    }

    /** Whether {@code host} names a loopback address (an unresolvable name is not). */
    public static boolean isLoopback(String host) {
        try {
            String h = host.startsWith("[") && host.endsWith("]") ? host.substring(1, host.length() - 1) : host;
            return InetAddress.getByName(h).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }

    @Override
    public String toString() {
        return key == null ? "no key" : file != null ? "key from " + file : "key";
    }
}
