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

    @Override
    public String clientId() {
        return "fake@1";
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
                return new Reply(answer, null, "no");
            }
            Proto.Writer ack = new Proto.Writer();
            for (String topic : topics) {
                Proto.Writer tv = new Proto.Writer().string(1, topic).uint(2, version(topic)).uint(3, 1);
                ack.bytes(1, tv.toByteArray());
            }
            ack.string(2, epoch);
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

    /** A NOTIFY body: {@code changes} as topic=version pairs. */
    static byte[] notify(long sequence, String epoch, String... changes) {
        Proto.Writer w = new Proto.Writer();
        for (String change : changes) {
            String[] kv = change.split("=");
            w.bytes(1, new Proto.Writer().string(1, kv[0]).uint(2, Long.parseLong(kv[1])).toByteArray());
        }
        w.uint(2, sequence).uint(3, 1000).string(4, epoch);
        return w.toByteArray();
    }
}
