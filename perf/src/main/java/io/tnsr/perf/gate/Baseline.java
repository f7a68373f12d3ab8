package io.tnsr.perf.gate;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.tnsr.engine.util.Jackson;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Pattern;

/**
 * {@code perf/baseline.json}: which commit's performance was last accepted. The gate builds that commit and
 * measures it beside the tree under test, so the file holds no figures (figures do not travel between hosts).
 *
 * <pre>
 * {
 *   "format": 2,
 *   "reference": "9f3c...",          the accepted commit, 40 hex digits
 *   "accepted": "2026-12-01T10:00:00Z",
 *   "reason": "why it was accepted (also in the commit message)",
 *   "comment": "how to move it"
 * }
 * </pre>
 *
 * @param reference the commit, 40 hex digits
 * @param accepted  when it was accepted (ISO-8601), informative
 * @param reason    why, informative
 */
public record Baseline(String reference, String accepted, String reason) {
    public static final int FORMAT = 2;
    private static final Pattern SHA = Pattern.compile("[0-9a-f]{40}");
    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);
    private static final String COMMENT = "The commit whose performance was last accepted. tools/perf-gate builds it and measures it "
            + "beside the tree under test, interleaved on this host. Move it only with tools/perf-gate --update-baseline "
            + "--reason TEXT, in a commit of its own whose message says why (README.md, The performance gate).";

    public Baseline {
        if (reference == null || !SHA.matcher(reference).matches()) {
            throw new IllegalArgumentException("reference must be a full commit id (40 lowercase hex digits), got '" + reference + "'");
        }
    }

    public String shortReference() {
        return reference.substring(0, 10);
    }

    public static Baseline read(Path path) throws IOException {
        JsonNode root;
        try {
            root = JSON.readTree(Files.readString(path, StandardCharsets.UTF_8));
        } catch (JsonProcessingException e) {
            throw new IOException(path + ": " + Jackson.describe(e), e);
        }
        if (root == null || !root.isObject()) {
            throw new IOException(path + ": not a perf baseline (expected a JSON object)");
        }
        if (root.path("format").asInt() != FORMAT) {
            throw new IOException(path + ": format " + root.path("format").asText("(none)") + ", expected " + FORMAT
                    + " (a \"reference\" commit; figures are no longer kept in the file)");
        }
        try {
            return new Baseline(root.path("reference").asText(null), root.path("accepted").asText(""), root.path("reason").asText(""));
        } catch (IllegalArgumentException e) {
            throw new IOException(path + ": " + e.getMessage(), e);
        }
    }

    public void write(Path path) throws IOException {
        Files.writeString(path, toJson(), StandardCharsets.UTF_8);
    }

    public String toJson() {
        ObjectNode o = JSON.createObjectNode();
        o.put("format", FORMAT);
        o.put("reference", reference);
        o.put("accepted", accepted);
        o.put("reason", reason);
        o.put("comment", COMMENT);
        try {
            return JSON.writeValueAsString(o) + "\n";
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }
}
