package routepush.agent;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/** A stand-in for a RocketMQ client instance and the name server behind it. */
final class FakeClient implements ClientPort {
    final Set<String> held = new TreeSet<String>();
    final Map<String, Long> versions = new HashMap<String, Long>();
    final List<String> requests = new ArrayList<String>();
    final List<String> refreshed = new ArrayList<String>();
    List<String> namesrvs = new ArrayList<String>(Arrays.asList("ns1:9876", "ns2:9876"));
    String chosen = "ns1:9876";
    Object connection = new Object();
    int answer = Messages.SUCCESS;
    String epoch = "e1";
    Exception failure;
    boolean running = true;
    String id = "fake@1";
    String remark = "no";
    /** The server's start-up window, as its SubscribeAck says. */
    boolean warmingUp;
    long warmInMs;
    /** Topics the server answers with exists = false. */
    final Set<String> absent = new TreeSet<String>();
    /** Topics the server puts in its SubscribeAck though nobody asked for them. */
    final List<String> unasked = new ArrayList<String>();

    @Override
    public String clientId() {
        return id;
    }

    @Override
    public boolean running() {
        return running;
    }

    @Override
    public Set<String> heldTopics() {
        return new TreeSet<String>(held);
    }

    @Override
    public String nameServer() {
        return chosen;
    }

    @Override
    public List<String> nameServers() {
        return namesrvs;
    }

    @Override
    public Object connection(String addr) {
        return addr.equals(chosen) ? connection : null;
    }

    @Override
    public Reply invoke(String addr, int code, byte[] body, long timeoutMs) throws Exception {
        if (failure != null) {
            throw failure;
        }
        if (code == Messages.SUBSCRIBE) {
            List<String> topics = new ArrayList<String>();
            Proto.Reader r = new Proto.Reader(body);
            for (int f = r.next(); f != 0; f = r.next()) {
                if (f == 1) {
                    topics.add(r.string());
                } else {
                    r.skip();
                }
            }
            requests.add("SUBSCRIBE " + addr + " " + topics);
            if (answer != Messages.SUCCESS) {
                return new Reply(answer, null, remark);
            }
            Proto.Writer ack = new Proto.Writer();
            for (String topic : topics) {
                Proto.Writer tv = new Proto.Writer().string(1, topic).uint(2, version(topic))
                        .uint(3, absent.contains(topic) ? 0 : 1);
                ack.bytes(1, tv.toByteArray());
            }
            for (String topic : unasked) {
                ack.bytes(1, new Proto.Writer().string(1, topic).uint(2, 1).uint(3, 1).toByteArray());
            }
            ack.string(2, epoch);
            if (warmingUp) {
                ack.uint(3, 1).uint(4, warmInMs);
            }
            return new Reply(0, ack.toByteArray(), null);
        }
        requests.add("code " + code + " " + addr);
        return new Reply(0, null, null);
    }

    long version(String topic) {
        Long v = versions.get(topic);
        return v == null ? 1 : v;
    }

    @Override
    public boolean refresh(String topic) {
        refreshed.add(topic);
        return true;
    }

    @Override
    public void rebalanceNow() {
    }

    @Override
    public boolean hasConsumers() {
        return false;
    }

    @Override
    public boolean switchNameServer(String addr) {
        chosen = addr;
        connection = new Object();
        return true;
    }

    /** A NOTIFY body: {@code changes} as topic=version or topic=version=kind. */
    static byte[] notify(long sequence, String epoch, String... changes) {
        Proto.Writer w = new Proto.Writer();
        for (String change : changes) {
            String[] kv = change.split("=");
            Proto.Writer c = new Proto.Writer().string(1, kv[0]).uint(2, Long.parseLong(kv[1]));
            if (kv.length > 2) {
                c.uint(3, Long.parseLong(kv[2]));
            }
            w.bytes(1, c.toByteArray());
        }
        w.uint(2, sequence).uint(3, 1000).string(4, epoch);
        return w.toByteArray();
    }
}
