package io.tnsr.engine.testing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.tnsr.engine.process.ChildJvm;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** Processes in different namespaces of a {@link NetNamespaces} reach each other over TCP, and link faults stop that. */
@Timeout(60)
class NetNamespacesTest {
    private static final int PORT = 7000;

    @Test
    void aHostReachesAnotherUntilItsLinkIsCutAndAgainOnceRestoredAndCloseLeavesNothing(@TempDir Path dir)
            throws Exception {
        NetNamespaces net = NetNamespaces.createOrSkip(getClass().getSimpleName(), 3);
        List<String> names = net.namespaces();
        Process listener;
        try {
            assertRootNamespaceUntouched(net);
            listener = listen(net, 0, dir);
            listen(net, 1, dir);
            assertEquals("hello", connect(net, 1, 0), "host 1 reaches host 0");

            net.cut(0);
            assertNotEquals("hello", connect(net, 1, 0), "host 0's link is cut");
            assertEquals("hello", connect(net, 2, 1), "host 2 still reaches host 1: only host 0's link is cut");

            net.restore(0);
            assertEquals("hello", connect(net, 1, 0), "host 0's link is back");
        } finally {
            net.close();
        }
        net.close();
        assertFalse(listener.isAlive(), "close kills what start started");
        String left = NetNamespaces.run("ip", "netns", "list");
        for (String ns : names) {
            assertFalse(left.lines().anyMatch(l -> l.trim().split("\\s+")[0].equals(ns)), () -> ns + " left: " + left);
        }
    }

    @Test
    void aHundredPercentLossStopsTrafficAndNoLossLetsItThrough(@TempDir Path dir) throws Exception {
        try (NetNamespaces net = NetNamespaces.createOrSkip(getClass().getSimpleName(), 2)) {
            try {
                net.loss(0, 100);
            } catch (UnsupportedOperationException e) {
                System.err.println("SKIPPED: " + e.getMessage());
                Assumptions.abort(e.getMessage());
            }
            listen(net, 0, dir);
            assertNotEquals("hello", connect(net, 1, 0), "every packet to and from host 0 is dropped");
            net.loss(0, 0);
            assertEquals("hello", connect(net, 1, 0), "the loss is gone");
        }
    }

    /** No interface or route of the root namespace is in the hosts' subnet: nothing there was changed. */
    private static void assertRootNamespaceUntouched(NetNamespaces net) {
        String prefix = net.subnet().substring(0, net.subnet().length() - "0/24".length());
        String addrs = NetNamespaces.run("ip", "-o", "-4", "addr", "show");
        assertFalse(addrs.contains("inet " + prefix), () -> "root namespace has an address in " + net.subnet() + ":\n" + addrs);
        String routes = NetNamespaces.run("ip", "-4", "route", "show", "table", "all");
        assertFalse(routes.contains(prefix), () -> "root namespace has a route for " + net.subnet() + ":\n" + routes);
    }

    /** An EchoPeer listening on host {@code host}, once it says so. */
    private static Process listen(NetNamespaces net, int host, Path dir) throws Exception {
        Path log = dir.resolve("listener-" + host + ".log");
        Process p = net.start(host, peer("listen", net.address(host), String.valueOf(PORT)), log);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        while (System.nanoTime() < deadline) {
            String out = Files.exists(log) ? Files.readString(log) : "";
            if (out.contains("listening")) {
                return p;
            }
            if (!p.isAlive()) {
                fail("listener on host " + host + " exited " + p.exitValue() + ":\n" + out);
            }
            Thread.sleep(20);
        }
        return fail("listener on host " + host + " did not start:\n" + Files.readString(log));
    }

    /** What an EchoPeer on host {@code from} got back from host {@code to} (1 s connect timeout), or its error. */
    private static String connect(NetNamespaces net, int from, int to) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(net.command(from, peer("connect", net.address(to), String.valueOf(PORT), "1000",
                "hello"))).redirectErrorStream(true).start();
        p.getOutputStream().close();
        if (!p.waitFor(20, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return fail("connect from host " + from + " to host " + to + " did not finish");
        }
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertTrue(p.exitValue() == 0 || p.exitValue() == 1, () -> "EchoPeer exited " + p.exitValue() + ": " + out);
        return p.exitValue() == 0 ? out.lines().reduce((a, b) -> b).orElse("") : "failed (" + out + ")";
    }

    /** java (this JVM's options, a small heap, quick start) running EchoPeer with {@code args}. */
    private static List<String> peer(String... args) {
        List<String> cmd = new ArrayList<>(ChildJvm.options(a -> a.startsWith("-Xmx")));
        cmd.addAll(List.of("-Xmx64m", "-XX:TieredStopAtLevel=1"));
        cmd.addAll(ChildJvm.classPath());
        cmd.add(EchoPeer.class.getName());
        cmd.addAll(List.of(args));
        return cmd;
    }
}
