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
import java.util.logging.Level;

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
    /** Frames from a connection the agent did not subscribe on (a broker's), ignored. */
    final AtomicLong foreign = new AtomicLong();
    /** Entries naming topics not subscribed here, read past. */
    final AtomicLong ignored = new AtomicLong();

    /** The longest start-up window the agent waits out, whatever a server says. */
    static final long MAX_WARM_MS = 600_000;

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
    /** When the server's start-up window ends (its last SubscribeAck said so); 0: warm. */
    private long warmUntil;
    private boolean warming;
    private long uptimeMs = -1;
    /** Where the last resync's spread starts. */
    private long resyncFrom = Long.MIN_VALUE / 2;
    private long lastMoveAt = Long.MIN_VALUE / 2;
    private final Messages.Interest interest = new Messages.Interest() {
        @Override
        public boolean wants(String topic) {
            if (subscribed.contains(topic)) {
                return true;
            }
            ignored.incrementAndGet();
            return false;
        }
    };

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

    /** Whether the server in use said it is inside its start-up window. */
    boolean warmingUp() {
        return warming && warmUntil > clock.nowMs();
    }

    /** Topics whose versions are held (only ever subscribed ones). */
    int heldVersions() {
        return held.size();
    }

    /** Topics subscribed now; readable from any thread (a size, never an iteration). */
    int subscribedCount() {
        return subscribed.size();
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
            Log.paced(Level.INFO, "moved:" + client.clientId(), client.clientId() + ": name-server connection to "
                    + target + (conn == null ? " lost" : " changed") + ", subscribing again", null);
        }
        addr = target;
        connection = conn;
        unsupported = false;
        subscribed.clear();
        warming = false;
        warmUntil = 0;
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
                failed("SUBSCRIBE at " + addr + " failed: " + Log.peer(String.valueOf(e)), null);
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
                        + " has no route push (REQUEST_CODE_NOT_SUPPORTED); " + client.ownRefresh()
                        + " keeps its routes");
                return false;
            }
            if (reply.code != Messages.SUCCESS) {
                failed("SUBSCRIBE at " + addr + " refused: code " + reply.code + ", " + Log.peer(reply.remark), null);
                return false;
            }
            Messages.Ack ack;
            try {
                ack = Messages.ack(reply.body);
            } catch (Proto.Malformed e) {
                malformed.incrementAndGet();
                failed("SUBSCRIBE answer from " + addr + " unreadable: " + Log.peer(e.getMessage()), null);
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
        warmth(ack, now);
        boolean fresh = epoch != null && !epoch.equals(ack.epoch);
        if (fresh) {
            newEpoch(ack.epoch);
        }
        epoch = ack.epoch;
        subscribed.addAll(batch);
        Set<String> asked = new HashSet<String>(batch);
        for (Messages.TopicVersion tv : ack.topics) {
            if (!asked.contains(tv.topic)) {
                ignored.incrementAndGet();
                continue;
            }
            Long have = held.get(tv.topic);
            if (have == null || tv.version > have) {
                held.put(tv.topic, tv.version);
                // A topic first subscribed is refreshed once too: its route may have changed
                // between the client's own lookup and this subscription. One the server has no
                // route for is not: the lookup would only answer TOPIC_NOT_EXIST.
                if (!fresh && tv.exists && !tv.deleted) {
                    owe(tv.topic, now);
                }
            }
        }
        if (fresh) {
            resync(now);
        }
    }

    /**
     * Reads the server's start-up window from its answer. While it lasts the server has not
     * heard every broker, so its routes may be partial or missing: refreshes wait for its end
     * (the client's own poll goes on meanwhile and keeps its routes on the server's refusals).
     */
    private void warmth(Messages.Ack ack, long now) {
        uptimeMs = ack.uptimeMs;
        boolean was = warming;
        warming = ack.warmingUp;
        warmUntil = ack.warmingUp ? now + Math.min(ack.warmInMs, MAX_WARM_MS) : 0;
        if (warming && !was) {
            Log.paced(Level.INFO, "warming:" + client.clientId(), client.clientId() + ": the name server at " + addr
                    + " is starting up (" + Math.min(ack.warmInMs, MAX_WARM_MS) + " ms left); refreshes wait"
                    + " for it and the client keeps the routes it holds", null);
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
                + "; retrying in " + backoff + " ms (" + client.ownRefresh() + " goes on)", error);
    }

    /**
     * A frame of the extension from the client's connection {@code conn}. Only frames from the
     * connection the subscriptions live on count: the client's Netty pipeline hands the agent
     * these codes from every connection it has, brokers' included, and a broker (or a name
     * server the agent left) has no say over this client's name server or its refreshes.
     */
    void frame(Object conn, int code, byte[] body) {
        if (conn == null || conn != connection) {
            foreign.incrementAndGet();
            Log.paced(Level.FINE, "foreign:" + client.clientId(), client.clientId() + ": a frame (code " + code
                    + ") from a connection the agent did not subscribe on was ignored", null);
            return;
        }
        if (code == Messages.NOTIFY) {
            notified(conn, body);
        } else if (code == Messages.GO_AWAY) {
            goAway(body);
        }
    }

    /** Frames the agent could not keep (its inbox was full, or a frame was too large): what
     * they announced is unknown, so every held topic is refetched. */
    void lost(long count) {
        if (count <= 0) {
            return;
        }
        Log.warn("lost:" + client.clientId(), client.clientId() + ": " + count + " notification(s) dropped unread"
                + " (too large, or too many waiting); every held topic is refetched", null);
        resync(clock.nowMs());
    }

    private void notified(Object conn, byte[] body) {
        frames.incrementAndGet();
        long now = clock.nowMs();
        Messages.Notify n;
        try {
            // Entries for topics not subscribed here are read past, never kept: a frame naming
            // thousands of topics the client never used costs its reading and nothing after.
            n = Messages.notify(body, interest);
        } catch (Proto.Malformed e) {
            malformed.incrementAndGet();
            Log.warn("malformed:" + client.clientId(), client.clientId() + ": an unreadable notification ("
                    + Log.peer(e.getMessage()) + "): every held topic is refetched", null);
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
            resync(now);
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
            // DELETED and UNROUTED leave nothing to fetch: the lookup would answer
            // TOPIC_NOT_EXIST, which the client logs while keeping the route it holds, exactly
            // as after its own poll. The version is held so that the topic's return is news.
            boolean gone = c.kind == Messages.CHANGE_DELETED || c.kind == Messages.CHANGE_UNROUTED;
            if (newer(c.topic, c.version) && !gone) {
                owe(c.topic, now);
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
                queue.offerSpread(topics, Math.max(now, warmUntil), window, random);
            } else {
                for (String topic : topics) {
                    owe(topic, now);
                }
            }
        }
    }

    /**
     * Owes {@code topic} a refresh now. A change or departure the server names is news even
     * while it warms up (a master that died then must be learned within a tick); only the
     * refreshes a new epoch or an arrival brings wait for the window's end, since a server that
     * has not heard every broker yet would answer them with a partial route, or none.
     */
    private void owe(String topic, long now) {
        queue.offer(topic, now);
    }

    /** Whether {@code version} is newer than the one held; if so it is held from now on. Only
     * subscribed topics are ever held. */
    private boolean newer(String topic, long version) {
        if (!subscribed.contains(topic)) {
            ignored.incrementAndGet();
            return false;
        }
        Long have = held.get(topic);
        if (have != null && have >= version) {
            return false;
        }
        held.put(topic, version);
        return true;
    }

    /** The server restarted (or it is another one): versions of the old epoch mean nothing. */
    private void newEpoch(String fresh) {
        Log.paced(Level.INFO, "epoch:" + client.clientId(), client.clientId() + ": name server epoch "
                + Log.peer(epoch) + " -> " + Log.peer(fresh) + ", refetching held topics"
                + (warmUntil > clock.nowMs() ? " once its start-up window ends" : ""), null);
        held.clear();
        sequences.clear();
    }

    /**
     * Owes every held topic a refresh, spread over {@code resyncWindowMs}. At most one resync
     * waits at a time, and each starts no sooner than the previous one's window ended, so a
     * name server sending gap after gap costs each held topic one refresh per window.
     */
    private void resync(long now) {
        resyncs.incrementAndGet();
        if (resyncFrom > now) {
            return; // one that has not started yet covers this one
        }
        long start = Math.max(Math.max(now, warmUntil), resyncFrom + options.resyncWindowMs);
        resyncFrom = start;
        queue.offerSpread(wanted(), start, options.resyncWindowMs, random);
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
        long now = clock.nowMs();
        boolean paced = now - lastMoveAt < options.scanIntervalMs;
        String next = options.goAwaySwitch && options.namesrv.isEmpty() && !paced
                ? nextNameServer(g.alternatives) : null;
        Log.paced(Level.INFO, "goaway:" + client.clientId(), client.clientId() + ": name server " + addr
                + " is going away (" + Log.peer(g.reason) + ", grace " + g.gracePeriodMs + " ms)"
                + (next == null ? "" : "; moving to " + next), null);
        if (next != null && client.switchNameServer(next)) {
            // One move per scan interval: two name servers sending GO_AWAY back and forth cost
            // this client one SUBSCRIBE per interval at most.
            lastMoveAt = now;
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
