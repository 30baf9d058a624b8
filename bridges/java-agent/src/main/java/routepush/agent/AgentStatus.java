package routepush.agent;

import java.lang.management.ManagementFactory;
import javax.management.InstanceAlreadyExistsException;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import javax.management.StandardMBean;

/** The {@link AgentMXBean}, read from the agent's {@link Source} at each call. */
final class AgentStatus implements AgentMXBean {
    static final String NAME = "routepush:type=Agent";

    /** Where the numbers come from: the {@link Watcher} of this copy of the agent. */
    interface Source {
        Counts totals();

        String[] clientLines();

        String options();
    }

    private final Source source;
    private ObjectName registered;

    AgentStatus(Source source) {
        this.source = source;
    }

    /**
     * Registers the MBean on the platform MBean server, as {@link #NAME} or, when another copy of
     * the agent (another class loader) holds that name, as {@code NAME,copy=N}. Returns the name,
     * or null (and logs why) when it could not be registered.
     */
    synchronized ObjectName register() {
        if (registered != null) {
            return registered;
        }
        try {
            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            for (int copy = 1; copy <= 16; copy++) {
                ObjectName name = new ObjectName(copy == 1 ? NAME : NAME + ",copy=" + copy);
                try {
                    server.registerMBean(new StandardMBean(this, AgentMXBean.class, true), name);
                    registered = name;
                    return name;
                } catch (InstanceAlreadyExistsException e) {
                    // another copy of the agent: try the next name
                }
            }
            Log.warn("jmx", "status MBean not registered: " + NAME + " and its copies are all taken", null);
        } catch (Throwable t) {
            Log.warn("jmx", "status MBean not registered", t);
        }
        return null;
    }

    synchronized void unregister() {
        if (registered != null) {
            try {
                ManagementFactory.getPlatformMBeanServer().unregisterMBean(registered);
            } catch (Throwable t) {
                // already gone
            }
            registered = null;
        }
    }

    synchronized ObjectName name() {
        return registered;
    }

    @Override
    public String getVersion() {
        return AgentVersion.text();
    }

    @Override
    public String getClientVersions() {
        return AgentVersion.CLIENTS;
    }

    @Override
    public String getOptions() {
        return source.options();
    }

    @Override
    public long getClients() {
        return source.totals().clients;
    }

    @Override
    public long getClientsWithoutPush() {
        return source.totals().noPush;
    }

    @Override
    public long getClientsWarming() {
        return source.totals().warming;
    }

    @Override
    public long getSubscribedTopics() {
        return source.totals().subscribedTopics;
    }

    @Override
    public long getSubscribes() {
        return source.totals().subscribes;
    }

    @Override
    public long getSubscribeFailures() {
        return source.totals().subscribeFailures;
    }

    @Override
    public long getNotifications() {
        return source.totals().notifications;
    }

    @Override
    public long getRefreshes() {
        return source.totals().refreshes;
    }

    @Override
    public long getRefreshFailures() {
        return source.totals().refreshFailures;
    }

    @Override
    public long getCoalescedRefreshes() {
        return source.totals().coalesced;
    }

    @Override
    public long getResyncs() {
        return source.totals().resyncs;
    }

    @Override
    public long getDroppedFrames() {
        return source.totals().dropped;
    }

    @Override
    public long getOversizedFrames() {
        return source.totals().oversized;
    }

    @Override
    public long getMalformedFrames() {
        return source.totals().malformed;
    }

    @Override
    public long getForeignFrames() {
        return source.totals().foreign;
    }

    @Override
    public long getIgnoredEntries() {
        return source.totals().ignored;
    }

    @Override
    public long getGoAways() {
        return source.totals().goAways;
    }

    @Override
    public long getSuppressedLogLines() {
        return Log.SUPPRESSED.get();
    }

    @Override
    public String getSummary() {
        return summary(source.totals());
    }

    @Override
    public String[] getClientLines() {
        return source.clientLines();
    }

    /** The status line as logged and shown: {@code route push VERSION: ...}. */
    static String summary(Counts totals) {
        return "route push " + AgentVersion.text() + " status: " + totals.line();
    }
}
