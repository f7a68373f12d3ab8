package io.tnsr.engine.cli;

import io.tnsr.engine.metrics.LatencyChart;
import io.tnsr.engine.metrics.LatencySummary;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/** {@code tools/latency-report}: the percentile table and chart of a run directory, or of two side by side. */
@Command(name = "latency-report", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Reads the HdrHistogram interval logs (.hlog) that"
            + " run-pipeline --histograms DIR wrote, adds up each metric over the run,"
            + " prints a percentile table (microseconds) and writes a latency-by-"
            + "percentile chart (SVG). With two directories: the runs side by side with"
            + " the ratio DIR2/DIR1 per percentile (above 1: DIR2 is slower), and both"
            + " in one chart (DIR solid, DIR2 dashed). Column co: yes = corrected for"
            + " coordinated omission (measured from each sequence's intended start);"
            + " no = per-frame times recorded as they happened."})
public final class LatencyReportCommand implements Callable<Integer> {
    @Parameters(index = "0", paramLabel = "DIR", description = "A run directory (run-pipeline --histograms DIR).")
    Path dir;

    @Parameters(index = "1", arity = "0..1", paramLabel = "DIR2", description = "A second run to compare with the first.")
    Path dir2;

    @Option(names = "--out", paramLabel = "FILE.svg",
            description = "Where the chart goes (default: DIR/latency.svg, or DIR2/latency-compare.svg with two runs).")
    Path out;

    @Option(names = "--no-chart", description = "Print the table only.")
    boolean noChart;

    @Override
    public Integer call() throws IOException {
        PrintStream stdout = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        LatencySummary a = load(dir);
        LatencySummary b = dir2 == null ? null : load(dir2);
        if (b == null) {
            stdout.printf("%s%s%n", dir, suffix(a));
            stdout.print(a.table(true));
        } else {
            stdout.printf("A = %s%s%nB = %s%s%n", dir, suffix(a), dir2, suffix(b));
            stdout.print(LatencySummary.compare(a, b));
            stdout.print(a.notes());
        }
        if (!noChart) {
            Path file = out != null ? out : dir2 == null ? dir.resolve("latency.svg") : dir2.resolve("latency-compare.svg");
            List<LatencyChart.Run> runs = new ArrayList<>();
            String la = label(dir, dir2);
            runs.add(new LatencyChart.Run(la, a));
            String title = "Latency by percentile: " + la;
            if (b != null) {
                String lb = label(dir2, dir);
                runs.add(new LatencyChart.Run(lb, b));
                title = "Latency by percentile: " + la + " vs " + lb;
            }
            Path parent = file.toAbsolutePath().getParent();
            if (parent != null) {
                Files.createDirectories(parent);
            }
            Files.writeString(file, LatencyChart.svg(title, runs));
            stdout.println("chart: " + file);
        }
        return 0;
    }

    private static String suffix(LatencySummary s) {
        String mode = s.modeDescription();
        return mode.isEmpty() ? "" : " (" + mode + ")";
    }

    /** The directory's name, or its whole path when both runs' directories have the same name. */
    private static String label(Path d, Path other) {
        Path name = d.toAbsolutePath().normalize().getFileName();
        Path otherName = other == null ? null : other.toAbsolutePath().normalize().getFileName();
        return name == null || name.equals(otherName) ? d.toString() : name.toString();
    }

    private static LatencySummary load(Path d) throws IOException {
        if (!Files.isDirectory(d)) {
            throw new IllegalArgumentException(d + ": no such directory");
        }
        boolean any = false;
        try (DirectoryStream<Path> logs = Files.newDirectoryStream(d, "*.hlog")) {
            any = logs.iterator().hasNext();
        }
        if (!any) {
            throw new IllegalArgumentException(d + ": no .hlog files (make one with tools/run-pipeline --histograms " + d + ")");
        }
        return LatencySummary.read(d);
    }

    public static void main(String[] args) {
        System.exit(Cli.run(new LatencyReportCommand(), args));
    }
}
