package routepush.agent;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Route push for one client instance: subscribes the topics it holds at the name server it talks
 * to, reads the notifications, and owes each announced topic a refresh through the client's own
 * route refresh ({@link RefreshQueue}, run by a {@link RefreshWorker}).
 *
 * <p>Every method here runs on the instance's one control thread (the periodic {@link #tick} and
 * the frames from the client's Netty pipeline are both handed to it), so its state needs no lock;
 * only the refresh queue is shared with the refresh thread.
 *
 * <p>The rules are the extension's (docs/protocol-extension.md): a frame whose sequence is not
 * the previous one + 1 on its connection, or of a new epoch, refetches every held topic; otherwise
 * a topic is refetched unless its held version is at least the notified one; departed brokers'
 * topics at once, arrived brokers' spread over the longer of the server's window and the agent's.
 * The client's own 30 s poll is never switched off, so nothing the agent misses is lost.
 */
final class Bridge {
    /** Counters, read by tests and shown by {@link RoutePush#status()}. */
    final AtomicLong subscribes = new AtomicLong();
    final AtomicLong subscribeFailures = new AtomicLong();
    final AtomicLong frames = new AtomicLong();
    final AtomicLong malformed = new AtomicLong();
    final AtomicLong resyncs = new AtomicLong();
    final AtomicLong goAways = new AtomicLong();

    private final ClientPort client;
    private final Options options;
    private final RefreshQueue queue;
    private final RefreshWorker.Clock clock;
    private final Random random;

    private String addr;
    private Object connection;
    private boolean unsupported;
    private final Set<String> subscribed = new HashSet<String>();
    private final Map<String, Long> held = new HashMap<String, Long>();
    private String epoch;
    private final Map<Object, Long> sequences = new HashMap<Object, Long>();
    private long nextCheckAt;
    private long retryAt;
    private int failures;

    Bridge(ClientPort client, Options options, RefreshQueue queue, RefreshWorker.Clock clock, Random random) {
        this.client = client;
        this.options = options;
        this.queue = queue;
        this.clock = clock;
        this.random = random;
    }

    /** Whether the name server in use answered SUBSCRIBE with REQUEST_CODE_NOT_SUPPORTED. */
    boolean unsupported() {
        return unsupported;
    }

    /** The name server the subscriptions were last sent to. */
    String subscribedAt() {
        return addr;
    }

    Set<String> subscribedTopics() {
        return new TreeSet<String>(subscribed);
    }

    /**
     * The periodic step: follows the client to the name server (and connection) it uses, and
     * subscribes what it holds there: new topics at once, all of them every check interval.
     */
    void tick() {
        if (!client.running()) {
            return;
        }
        String target = options.namesrv.isEmpty() ? client.nameServer() : options.namesrv.get(0);
        if (target == null) {
            return;
        }
        Object conn = client.connection(target);
        boolean newTarget = !target.equals(addr);
        if (newTarget || conn != connection) {
            // Another name server, a reconnect, or a connection lost while the client asked
            // nothing (the subscriptions died with it): subscribe again, which reconnects.
            moved(target, conn, newTarget);
        }
        if (unsupported) {
            return;
        }
        long now = clock.nowMs();
        if (now < retryAt) {
            return;
        }
        Set<String> topics = wanted();
        List<String> owed = new ArrayList<String>();
        boolean check = now >= nextCheckAt;
        for (String topic : topics) {
            if (check || !subscribed.contains(topic)) {
                owed.add(topic);
            }
        }
        Set<String> gone = new HashSet<String>(subscribed);
        gone.removeAll(topics);
        if (!gone.isEmpty()) {
            unsubscribe(gone);
        }
        if (!owed.isEmpty() && subscribe(owed) && check) {
            nextCheckAt = now + options.checkIntervalMs;
        }
    }

    private Set<String> wanted() {
        Set<String> out = new TreeSet<String>();
        for (String topic : client.heldTopics()) {
            if (!options.excluded(topic)) {
                out.add(topic);
            }
        }
        return out;
    }

    /**
     * A new name server or connection, or none: it holds none of this client's subscriptions.
     * The backoff after failures is kept unless the name server changed, so a name server that
     * is down is not asked every tick.
     */
    private void moved(String target, Object conn, boolean newTarget) {
        if (addr != null && (conn != null || connection != null)) {
            Log.info(client.clientId() + ": name-server connection to " + target
                    + (conn == null ? " lost" : " changed") + ", subscribing again");
        }
        addr = target;
        connection = conn;
        unsupported = false;
        subscribed.clear();
        if (newTarget) {
            retryAt = 0;
            failures = 0;
        }
        nextCheckAt = clock.nowMs() + jitter(options.checkIntervalMs);
    }

    private boolean subscribe(List<String> topics) {
        for (int i = 0; i < topics.size(); i += options.subscribeBatch) {
            List<String> batch = topics.subList(i, Math.min(topics.size(), i + options.subscribeBatch));
            ClientPort.Reply reply;
            try {
                reply = client.invoke(addr, Messages.SUBSCRIBE, Messages.subscribe(batch, client.clientId()),
                        options.requestTimeoutMs);
            } catch (Exception e) {
                failed("SUBSCRIBE at " + addr + " failed: " + e, null);
                return false;
            }
            // The request may have opened the connection: the one it went over is the one
            // the subscriptions live on.
            Object conn = client.connection(addr);
            if (conn != null) {
                connection = conn;
            }
            if (reply.code == Messages.REQUEST_CODE_NOT_SUPPORTED) {
                unsupported = true;
                Log.once("unsupported:" + addr, client.clientId() + ": the name server at " + addr
                        + " has no route push (REQUEST_CODE_NOT_SUPPORTED); the client's own 30 s poll"
                        + " keeps its routes");
                return false;
            }
            if (reply.code != Messages.SUCCESS) {
                failed("SUBSCRIBE at " + addr + " refused: code " + reply.code + ", " + reply.remark, null);
                return false;
            }
            Messages.Ack ack;
            try {
                ack = Messages.ack(reply.body);
            } catch (Proto.Malformed e) {
                malformed.incrementAndGet();
                failed("SUBSCRIBE answer from " + addr + " unreadable: " + e.getMessage(), null);
                return false;
            }
            subscribes.incrementAndGet();
            acked(ack, batch);
        }
        failures = 0;
        return true;
    }

    private void acked(Messages.Ack ack, List<String> batch) {
        long now = clock.nowMs();
        if (epoch != null && !epoch.equals(ack.epoch)) {
            newEpoch(ack.epoch);
        }
        epoch = ack.epoch;
        subscribed.addAll(batch);
        for (Messages.TopicVersion tv : ack.topics) {
            Long have = held.get(tv.topic);
            if (have == null || tv.version > have) {
                // A topic first subscribed is refreshed once too: its route may have changed
                // between the client's own lookup and this subscription.
                held.put(tv.topic, tv.version);
                queue.offer(tv.topic, now);
            }
        }
    }

    private void unsubscribe(Set<String> topics) {
        subscribed.removeAll(topics);
        for (String topic : topics) {
            held.remove(topic);
        }
        try {
            client.invoke(addr, Messages.UNSUBSCRIBE, Messages.unsubscribe(topics), options.requestTimeoutMs);
        } catch (Exception e) {
            // Best effort: the server drops the subscriptions with the connection anyway.
            Log.fine("UNSUBSCRIBE at " + addr + " failed: " + e);
        }
    }

    private void failed(String why, Throwable error) {
        subscribeFailures.incrementAndGet();
        failures = Math.min(failures + 1, 16);
        long backoff = Math.min(options.checkIntervalMs, 1000L << Math.min(failures - 1, 5));
        retryAt = clock.nowMs() + backoff;
        Log.warn("subscribe:" + client.clientId(), client.clientId() + ": " + why
                + "; retrying in " + backoff + " ms (the client's own poll goes on)", error);
    }

    /** A frame of the extension from the client's connection {@code conn}. */
    void frame(Object conn, int code, byte[] body) {
        if (code == Messages.NOTIFY) {
            notified(conn, body);
        } else if (code == Messages.GO_AWAY) {
            goAway(body);
        }
    }

    private void notified(Object conn, byte[] body) {
        frames.incrementAndGet();
        long now = clock.nowMs();
        Messages.Notify n;
        try {
            n = Messages.notify(body);
        } catch (Proto.Malformed e) {
            malformed.incrementAndGet();
            Log.warn("malformed:" + client.clientId(), "an unreadable notification (" + e.getMessage()
                    + "): every held topic is refetched", null);
            resync(now);
            return;
        }
        Long last = sequences.get(conn);
        if (last == null && sequences.size() >= 8) {
            sequences.clear();
        }
        sequences.put(conn, n.sequence);
        boolean gap = n.sequence != (last == null ? 1 : last + 1);
        boolean fresh = epoch != null && !epoch.equals(n.epoch);
        if (fresh) {
            newEpoch(n.epoch);
            epoch = n.epoch;
            sequences.put(conn, n.sequence);
            return;
        }
        if (epoch == null) {
            epoch = n.epoch;
        }
        if (gap) {
            resync(now);
            return;
        }
        for (Messages.Change c : n.changes) {
            if (c.kind == Messages.CHANGE_DELETED || newer(c.topic, c.version)) {
                queue.offer(c.topic, now);
            }
        }
        for (Messages.BrokerChange b : n.brokers) {
            List<String> topics = new ArrayList<String>();
            for (Messages.Change step : b.topics) {
                if (newer(step.topic, step.version)) {
                    topics.add(step.topic);
                }
            }
            if (b.kind == Messages.BROKER_ARRIVED) {
                long window = Math.max(options.arrivalWindowMs, b.refetchWindowMs);
                queue.offerSpread(topics, now, window, random);
            } else {
                for (String topic : topics) {
                    queue.offer(topic, now);
                }
            }
        }
    }

    /** Whether {@code version} is newer than the one held; if so it is held from now on. */
    private boolean newer(String topic, long version) {
        if (options.excluded(topic)) {
            return false;
        }
        Long have = held.get(topic);
        if (have != null && have >= version) {
            return false;
        }
        held.put(topic, version);
        return true;
    }

    /** The server restarted: versions of the old epoch mean nothing, refetch everything held. */
    private void newEpoch(String fresh) {
        Log.info(client.clientId() + ": name server epoch " + epoch + " -> " + fresh + ", refetching held topics");
        held.clear();
        sequences.clear();
        resync(clock.nowMs());
    }

    private void resync(long now) {
        resyncs.incrementAndGet();
        Collection<String> topics = wanted();
        queue.offerSpread(topics, now, options.resyncWindowMs, random);
    }

    private void goAway(byte[] body) {
        goAways.incrementAndGet();
        Messages.GoAway g;
        try {
            g = Messages.goAway(body);
        } catch (Proto.Malformed e) {
            malformed.incrementAndGet();
            g = new Messages.GoAway(0, new ArrayList<String>(), "");
        }
        String next = options.goAwaySwitch && options.namesrv.isEmpty() ? nextNameServer(g.alternatives) : null;
        Log.info(client.clientId() + ": name server " + addr + " is going away (" + g.reason + ", grace "
                + g.gracePeriodMs + " ms)" + (next == null ? "" : "; moving to " + next));
        if (next != null && client.switchNameServer(next)) {
            tick();
        }
    }

    /** The client's next name server after a GO_AWAY: an offered alternative it knows, else the
     * next of its own list; null when it knows no other. */
    private String nextNameServer(List<String> alternatives) {
        List<String> known = client.nameServers();
        for (String alt : alternatives) {
            if (known.contains(alt) && !alt.equals(addr)) {
                return alt;
            }
        }
        int at = known.indexOf(addr);
        for (int i = 1; i < known.size(); i++) {
            String candidate = known.get((Math.max(at, 0) + i) % known.size());
            if (!candidate.equals(addr)) {
                return candidate;
            }
        }
        return null;
    }

    private long jitter(long interval) {
        return interval / 2 + (long) (random.nextDouble() * (interval / 2));
    }
}
