package io.tnsr.engine.cli;

import java.io.IOException;
import java.io.InputStream;
import java.util.Properties;

/** The product's version, as the build wrote it into {@code io/tnsr/engine/version.properties} from the pom. */
final class ProductVersion {
    private static final String UNKNOWN = "version unknown: built without Maven's resource step";

    private ProductVersion() {
    }

    static String get() {
        try (InputStream in = ProductVersion.class.getResourceAsStream("/io/tnsr/engine/version.properties")) {
            if (in == null) {
                return UNKNOWN;
            }
            Properties p = new Properties();
            p.load(in);
            String v = p.getProperty("version", "");
            return v.isBlank() || v.contains("${") ? UNKNOWN : v;
        } catch (IOException e) {
            return UNKNOWN;
        }
    }
}
