package routepush.agent;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A name server on loopback speaking just enough RocketMQ remoting (JSON headers) for a real
 * client: GET_ROUTEINFO_BY_TOPIC answered as {@link #answer} says (a route on broker-a, master
 * {@link #master}), SUBSCRIBE acknowledged with every topic at version 1 (or, without
 * {@link #push}, refused as Apache's name server does), UNSUBSCRIBE followed, and oneway frames
 * pushed to the connections that subscribed.
 */
final class FakeNameServer implements AutoCloseable {
    static final int GET_ROUTEINFO_BY_TOPIC = 105;
    static final int TOPIC_NOT_EXIST = 17;
    static final int SYSTEM_ERROR = 1;

    /** How lookups are answered: SUCCESS (0) with a route on broker-a, or this error code. */
    volatile int answer = 0;
    volatile boolean warmingUp;
    /** The master address of broker-a in the routes answered. */
    volatile String master = "127.0.0.1:1";
    /** false: SUBSCRIBE is answered REQUEST_CODE_NOT_SUPPORTED, as by a name server without push. */
    volatile boolean push = true;
    /** Topics subscribed now, over every connection. */
    final Set<String> subscribed = ConcurrentHashMap.newKeySet();
    final Map<String, AtomicInteger> lookups = new ConcurrentHashMap<String, AtomicInteger>();
    final AtomicInteger subscribes = new AtomicInteger();
    private final List<OutputStream> subscribers = new CopyOnWriteArrayList<OutputStream>();
    private final ServerSocket server;
    private final AtomicInteger opaque = new AtomicInteger(1 << 20);

    FakeNameServer() throws IOException {
        server = new ServerSocket(0);
        Thread t = new Thread(new Runnable() {
            @Override
            public void run() {
                accept();
            }
        }, "fake-namesrv");
        t.setDaemon(true);
        t.start();
    }

    String addr() {
        return "127.0.0.1:" + server.getLocalPort();
    }

    int lookupsOf(String topic) {
        AtomicInteger n = lookups.get(topic);
        return n == null ? 0 : n.get();
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                final Socket s = server.accept();
                Thread t = new Thread(new Runnable() {
                    @Override
                    public void run() {
                        serve(s);
                    }
                }, "fake-namesrv-conn");
                t.setDaemon(true);
                t.start();
            } catch (IOException e) {
                return;
            }
        }
    }

    private void serve(Socket s) {
        try {
            DataInputStream in = new DataInputStream(s.getInputStream());
            OutputStream out = s.getOutputStream();
            while (true) {
                int total = in.readInt();
                int mark = in.readInt();
                int headerLength = mark & 0xffffff;
                byte[] header = new byte[headerLength];
                in.readFully(header);
                byte[] body = new byte[total - 4 - headerLength];
                in.readFully(body);
                String h = new String(header, StandardCharsets.UTF_8);
                int code = number(h, "code");
                int op = number(h, "opaque");
                if (code == GET_ROUTEINFO_BY_TOPIC) {
                    String topic = text(h, "topic");
                    lookups.computeIfAbsent(topic, k -> new AtomicInteger()).incrementAndGet();
                    if (answer == 0) {
                        respond(out, op, 0, null, route(master).getBytes(StandardCharsets.UTF_8));
                    } else {
                        respond(out, op, answer, answer == SYSTEM_ERROR ? "name server not ready" : "no route", null);
                    }
                } else if (code == Messages.SUBSCRIBE && !push) {
                    respond(out, op, Messages.REQUEST_CODE_NOT_SUPPORTED, "request type 7001 not supported", null);
                } else if (code == Messages.UNSUBSCRIBE) {
                    Proto.Reader r = new Proto.Reader(body);
                    for (int f = r.next(); f != 0; f = r.next()) {
                        if (f == 1) {
                            subscribed.remove(r.string());
                        } else {
                            r.skip();
                        }
                    }
                    respond(out, op, 0, null, null);
                } else if (code == Messages.SUBSCRIBE) {
                    subscribes.incrementAndGet();
                    Proto.Writer ack = new Proto.Writer();
                    Proto.Reader r = new Proto.Reader(body);
                    for (int f = r.next(); f != 0; f = r.next()) {
                        if (f == 1) {
                            String topic = r.string();
                            subscribed.add(topic);
                            ack.bytes(1, new Proto.Writer().string(1, topic).uint(2, 1).uint(3, 1).toByteArray());
                        } else {
                            r.skip();
                        }
                    }
                    ack.string(2, "epoch-1");
                    if (warmingUp) {
                        ack.uint(3, 1).uint(4, 45_000);
                    }
                    ack.uint(5, 1000);
                    if (!subscribers.contains(out)) {
                        subscribers.add(out);
                    }
                    respond(out, op, 0, null, ack.toByteArray());
                } else {
                    respond(out, op, 0, null, null);
                }
            }
        } catch (IOException | Proto.Malformed e) {
            // the client closed the connection, or sent what this stand-in does not read
        }
    }

    /** Pushes a oneway frame to every connection that subscribed; how many it reached. */
    int push(int code, byte[] body) throws IOException {
        int n = 0;
        for (OutputStream out : subscribers) {
            write(out, "{\"code\":" + code + ",\"flag\":2,\"language\":\"JAVA\",\"opaque\":" + opaque.incrementAndGet()
                    + ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":0}", body);
            n++;
        }
        return n;
    }

    private static String route(String master) {
        return "{\"brokerDatas\":[{\"brokerAddrs\":{\"0\":\"" + master + "\"},\"brokerName\":\"broker-a\","
                + "\"cluster\":\"c\"}],\"filterServerTable\":{},\"queueDatas\":[{\"brokerName\":\"broker-a\","
                + "\"perm\":6,\"readQueueNums\":4,\"topicSysFlag\":0,\"writeQueueNums\":4}]}";
    }

    private static void respond(OutputStream out, int op, int code, String remark, byte[] body) throws IOException {
        write(out, "{\"code\":" + code + ",\"flag\":1,\"language\":\"JAVA\",\"opaque\":" + op
                + (remark == null ? "" : ",\"remark\":\"" + remark + "\"")
                + ",\"serializeTypeCurrentRPC\":\"JSON\",\"version\":0}", body);
    }

    private static void write(OutputStream out, String header, byte[] body) throws IOException {
        byte[] h = header.getBytes(StandardCharsets.UTF_8);
        int bodyLength = body == null ? 0 : body.length;
        ByteArrayOutputStream frame = new ByteArrayOutputStream(8 + h.length + bodyLength);
        DataOutputStream d = new DataOutputStream(frame);
        d.writeInt(4 + h.length + bodyLength);
        d.writeInt(h.length);
        d.write(h);
        if (body != null) {
            d.write(body);
        }
        synchronized (out) {
            out.write(frame.toByteArray());
            out.flush();
        }
    }

    private static int number(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":(-?\\d+)").matcher(json);
        return m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    private static String text(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":\"([^\"]*)\"").matcher(json);
        return m.find() ? m.group(1) : "";
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (OutputStream out : subscribers) {
            try {
                out.close();
            } catch (IOException e) {
                // closing anyway
            }
        }
    }
}
