package routepush.agent;

/**
 * What the agent did, for one client instance or summed over the JVM: gauges (clients, topics
 * subscribed now, clients at a server without push or warming up) and counters since the agent
 * started. Read without stopping the agent's threads, so a snapshot, not a transaction.
 */
final class Counts {
    long clients;
    long noPush;
    long warming;
    long subscribedTopics;
    long subscribes;
    long subscribeFailures;
    long notifications;
    long refreshes;
    long refreshFailures;
    long coalesced;
    long resyncs;
    long malformed;
    long dropped;
    long oversized;
    long foreign;
    long ignored;
    long goAways;

    /** The counts of one served client instance. */
    static Counts of(Bridge bridge, RefreshWorker worker, RefreshQueue queue, FrameInbox inbox) {
        Counts c = new Counts();
        c.clients = 1;
        c.noPush = bridge.unsupported() ? 1 : 0;
        c.warming = bridge.warmingUp() ? 1 : 0;
        c.subscribedTopics = bridge.subscribedCount();
        c.subscribes = bridge.subscribes.get();
        c.subscribeFailures = bridge.subscribeFailures.get();
        c.notifications = bridge.frames.get();
        c.refreshes = worker.refreshed();
        c.refreshFailures = worker.failed();
        c.coalesced = queue.coalesced();
        c.resyncs = bridge.resyncs.get();
        c.malformed = bridge.malformed.get();
        c.dropped = inbox.dropped();
        c.oversized = inbox.oversized();
        c.foreign = bridge.foreign.get();
        c.ignored = bridge.ignored.get();
        c.goAways = bridge.goAways.get();
        return c;
    }

    /** Adds {@code o}'s counters, and its gauges when {@code gauges}. */
    void add(Counts o, boolean gauges) {
        if (gauges) {
            clients += o.clients;
            noPush += o.noPush;
            warming += o.warming;
            subscribedTopics += o.subscribedTopics;
        }
        subscribes += o.subscribes;
        subscribeFailures += o.subscribeFailures;
        notifications += o.notifications;
        refreshes += o.refreshes;
        refreshFailures += o.refreshFailures;
        coalesced += o.coalesced;
        resyncs += o.resyncs;
        malformed += o.malformed;
        dropped += o.dropped;
        oversized += o.oversized;
        foreign += o.foreign;
        ignored += o.ignored;
        goAways += o.goAways;
    }

    /** The status line: the same words for the log, the MBean and the status command. */
    String line() {
        return clients + " client(s) served (" + noPush + " at a name server without push, " + warming
                + " waiting out a server's start-up), " + subscribedTopics + " topic(s) subscribed; since start: "
                + subscribes + " subscribes (" + subscribeFailures + " failed), " + notifications
                + " notifications, " + refreshes + " refreshes (" + refreshFailures + " failed, " + coalesced
                + " coalesced), " + resyncs + " resyncs, " + dropped + " frames dropped, " + oversized
                + " oversized, " + malformed + " malformed, " + foreign + " foreign, " + goAways + " GO_AWAY";
    }
}
