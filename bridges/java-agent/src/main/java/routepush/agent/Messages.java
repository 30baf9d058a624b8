package routepush.agent;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;

/**
 * The extension's request codes and bodies (package {@code routepush.v1} of
 * {@code protocol/routepush.proto}; docs/protocol-extension.md), the parts the agent reads.
 */
final class Messages {
    static final int SUBSCRIBE = 7001;
    static final int UNSUBSCRIBE = 7002;
    static final int NOTIFY = 7003;
    static final int GO_AWAY = 7004;
    static final int SUCCESS = 0;
    static final int REQUEST_CODE_NOT_SUPPORTED = 3;
    /** The longest epoch a body may carry: the server's are a few dozen characters, and the
     * agent keeps the current one. */
    static final int MAX_EPOCH_CHARS = 256;

    static final int CHANGE_DELETED = 2;
    static final int CHANGE_UNROUTED = 3;
    static final int BROKER_DEPARTED = 1;
    static final int BROKER_ARRIVED = 2;

    private Messages() {
    }

    static byte[] subscribe(Collection<String> topics, String clientId) {
        Proto.Writer w = new Proto.Writer();
        for (String topic : topics) {
            w.string(1, topic);
        }
        if (clientId != null && !clientId.isEmpty()) {
            w.string(2, clientId);
        }
        return w.toByteArray();
    }

    static byte[] unsubscribe(Collection<String> topics) {
        Proto.Writer w = new Proto.Writer();
        for (String topic : topics) {
            w.string(1, topic);
        }
        return w.toByteArray();
    }

    /** A topic's version in a SUBSCRIBE answer. */
    static final class TopicVersion {
        final String topic;
        final long version;
        final boolean exists;
        final boolean deleted;

        TopicVersion(String topic, long version, boolean exists, boolean deleted) {
            this.topic = topic;
            this.version = version;
            this.exists = exists;
            this.deleted = deleted;
        }
    }

    /** SubscribeAck. */
    static final class Ack {
        final List<TopicVersion> topics;
        final String epoch;
        /** The server is inside its start-up window: it has not heard every broker yet. */
        final boolean warmingUp;
        final long warmInMs;
        final long uptimeMs;

        Ack(List<TopicVersion> topics, String epoch, boolean warmingUp, long warmInMs, long uptimeMs) {
            this.topics = topics;
            this.epoch = epoch;
            this.warmingUp = warmingUp;
            this.warmInMs = warmInMs;
            this.uptimeMs = uptimeMs;
        }
    }

    static Ack ack(byte[] body) throws Proto.Malformed {
        Proto.Reader r = new Proto.Reader(body == null ? new byte[0] : body);
        List<TopicVersion> topics = new ArrayList<TopicVersion>();
        String epoch = "";
        boolean warming = false;
        long warmIn = 0;
        long uptime = 0;
        for (int f = r.next(); f != 0; f = r.next()) {
            if (f == 1) {
                Proto.Reader m = r.message();
                String topic = "";
                long version = 0;
                boolean exists = false;
                boolean deleted = false;
                for (int g = m.next(); g != 0; g = m.next()) {
                    if (g == 1) {
                        topic = m.string();
                    } else if (g == 2) {
                        version = m.uint();
                    } else if (g == 3) {
                        exists = m.bool();
                    } else if (g == 4) {
                        deleted = m.bool();
                    } else {
                        m.skip();
                    }
                }
                topics.add(new TopicVersion(topic, version, exists, deleted));
            } else if (f == 2) {
                epoch = epoch(r);
            } else if (f == 3) {
                warming = r.bool();
            } else if (f == 4) {
                warmIn = r.uint();
            } else if (f == 5) {
                uptime = r.uint();
            } else {
                r.skip();
            }
        }
        return new Ack(topics, epoch, warming, warmIn, uptime);
    }

    /** One TopicChange: a topic and its version now. */
    static final class Change {
        final String topic;
        final long version;
        final int kind;

        Change(String topic, long version, int kind) {
            this.topic = topic;
            this.version = version;
            this.kind = kind;
        }
    }

    /** One BrokerChange, with the receiving connection's topics it changed. */
    static final class BrokerChange {
        final int kind;
        final String brokerName;
        final List<Change> topics;
        final long refetchWindowMs;

        BrokerChange(int kind, String brokerName, List<Change> topics, long refetchWindowMs) {
            this.kind = kind;
            this.brokerName = brokerName;
            this.topics = topics;
            this.refetchWindowMs = refetchWindowMs;
        }
    }

    /** TopicRouteChanged. */
    static final class Notify {
        final List<Change> changes;
        final long sequence;
        final String epoch;
        final List<BrokerChange> brokers;

        Notify(List<Change> changes, long sequence, String epoch, List<BrokerChange> brokers) {
            this.changes = changes;
            this.sequence = sequence;
            this.epoch = epoch;
            this.brokers = brokers;
        }
    }

    /** Which topics a reader keeps from a notification; the others are read past and dropped. */
    interface Interest {
        boolean wants(String topic);
    }

    static final Interest EVERY_TOPIC = new Interest() {
        @Override
        public boolean wants(String topic) {
            return true;
        }
    };

    static Notify notify(byte[] body) throws Proto.Malformed {
        return notify(body, EVERY_TOPIC);
    }

    /**
     * The notification in {@code body}, keeping only the topic entries {@code interest} wants:
     * what it returns grows with the wanted topics, never with the frame's size.
     */
    static Notify notify(byte[] body, Interest interest) throws Proto.Malformed {
        Proto.Reader r = new Proto.Reader(body == null ? new byte[0] : body);
        List<Change> changes = new ArrayList<Change>();
        List<BrokerChange> brokers = new ArrayList<BrokerChange>();
        long sequence = 0;
        String epoch = "";
        for (int f = r.next(); f != 0; f = r.next()) {
            switch (f) {
                case 1: {
                    Change c = change(r.message(), true);
                    if (interest.wants(c.topic)) {
                        changes.add(c);
                    }
                    break;
                }
                case 2:
                    sequence = r.uint();
                    break;
                case 4:
                    epoch = epoch(r);
                    break;
                case 5: {
                    BrokerChange b = broker(r.message(), interest);
                    if (interest == EVERY_TOPIC || !b.topics.isEmpty()) {
                        brokers.add(b);
                    }
                    break;
                }
                default:
                    r.skip();
            }
        }
        return new Notify(changes, sequence, epoch, brokers);
    }

    private static String epoch(Proto.Reader r) throws Proto.Malformed {
        String epoch = r.string();
        if (epoch.length() > MAX_EPOCH_CHARS) {
            throw new Proto.Malformed("epoch of " + epoch.length() + " characters");
        }
        return epoch;
    }

    /** A TopicChange, or (without {@code kinded}) a TopicStep, whose field 3 is no kind. */
    private static Change change(Proto.Reader m, boolean kinded) throws Proto.Malformed {
        String topic = "";
        long version = 0;
        int kind = 0;
        for (int g = m.next(); g != 0; g = m.next()) {
            if (g == 1) {
                topic = m.string();
            } else if (g == 2) {
                version = m.uint();
            } else if (g == 3 && kinded) {
                kind = (int) m.uint();
            } else {
                m.skip();
            }
        }
        return new Change(topic, version, kind);
    }

    private static BrokerChange broker(Proto.Reader m, Interest interest) throws Proto.Malformed {
        int kind = 0;
        String name = "";
        long window = 0;
        List<Change> topics = new ArrayList<Change>();
        for (int g = m.next(); g != 0; g = m.next()) {
            switch (g) {
                case 1:
                    kind = (int) m.uint();
                    break;
                case 2:
                    name = m.string();
                    break;
                case 8: {
                    Change step = change(m.message(), false);
                    if (interest.wants(step.topic)) {
                        topics.add(step);
                    }
                    break;
                }
                case 9:
                    window = m.uint();
                    break;
                default:
                    m.skip();
            }
        }
        return new BrokerChange(kind, name, topics, window);
    }

    /** GoAway. */
    static final class GoAway {
        final long gracePeriodMs;
        final List<String> alternatives;
        final String reason;

        GoAway(long gracePeriodMs, List<String> alternatives, String reason) {
            this.gracePeriodMs = gracePeriodMs;
            this.alternatives = Collections.unmodifiableList(alternatives);
            this.reason = reason;
        }
    }

    static GoAway goAway(byte[] body) throws Proto.Malformed {
        Proto.Reader r = new Proto.Reader(body == null ? new byte[0] : body);
        long grace = 0;
        List<String> alternatives = new ArrayList<String>();
        String reason = "";
        for (int f = r.next(); f != 0; f = r.next()) {
            if (f == 1) {
                grace = r.uint();
            } else if (f == 2) {
                alternatives.add(r.string());
            } else if (f == 3) {
                reason = r.string();
            } else {
                r.skip();
            }
        }
        return new GoAway(grace, alternatives, reason);
    }
}
