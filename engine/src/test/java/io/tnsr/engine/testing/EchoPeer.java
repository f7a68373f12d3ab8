package io.tnsr.engine.testing;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;

/**
 * A minimal TCP peer to run as a child process, e.g. inside a {@link NetNamespaces} host, to see who reaches whom.
 *
 * <pre>
 * EchoPeer listen ADDR PORT                    prints "listening ADDR:PORT", then echoes one line per connection
 * EchoPeer connect ADDR PORT TIMEOUT_MS TEXT   sends TEXT, prints the echo; exit 1 (reason on stderr) on failure
 * </pre>
 */
public final class EchoPeer {
    private EchoPeer() {
    }

    public static void main(String[] args) throws IOException {
        if (args.length == 3 && args[0].equals("listen")) {
            listen(args[1], Integer.parseInt(args[2]));
        } else if (args.length == 5 && args[0].equals("connect")) {
            System.exit(connect(args[1], Integer.parseInt(args[2]), Integer.parseInt(args[3]), args[4]) ? 0 : 1);
        } else {
            System.err.println("usage: EchoPeer listen ADDR PORT | connect ADDR PORT TIMEOUT_MS TEXT");
            System.exit(2);
        }
    }

    private static void listen(String addr, int port) throws IOException {
        try (ServerSocket server = new ServerSocket(port, 50, InetAddress.getByName(addr))) {
            System.out.println("listening " + addr + ":" + port);
            System.out.flush();
            while (true) {
                Socket s = server.accept();
                Thread t = new Thread(() -> echo(s), "echo");
                t.setDaemon(true);
                t.start();
            }
        }
    }

    private static void echo(Socket s) {
        try (s; BufferedReader in = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8));
             PrintWriter out = new PrintWriter(s.getOutputStream(), true, StandardCharsets.UTF_8)) {
            String line = in.readLine();
            if (line != null) {
                out.println(line);
            }
        } catch (IOException e) {
            System.err.println("echo failed: " + e);
        }
    }

    private static boolean connect(String addr, int port, int timeoutMillis, String text) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress(addr, port), timeoutMillis);
            s.setSoTimeout(timeoutMillis);
            PrintWriter out = new PrintWriter(s.getOutputStream(), true, StandardCharsets.UTF_8);
            out.println(text);
            String echo = new BufferedReader(new InputStreamReader(s.getInputStream(), StandardCharsets.UTF_8)).readLine();
            if (echo == null) {
                System.err.println("connection closed before the echo");
                return false;
            }
            System.out.println(echo);
            return true;
        } catch (IOException e) {
            System.err.println("failed: " + e);
            return false;
        }
    }
}
