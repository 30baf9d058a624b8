package routepush.agent;

/**
 * The agent's status as JMX attributes, under {@code routepush:type=Agent}: readable with
 * {@code jconsole}, VisualVM, any JMX client, or {@code java -jar rocketmq-routepush-agent.jar
 * PID}. An MXBean, so every attribute is a plain number or string and a client needs none of the
 * agent's classes. Gauges are "now"; every other number counts since the agent started, summed
 * over every client instance it served (those since let go included).
 */
public interface AgentMXBean {
    /** The agent's version. */
    String getVersion();

    /** The RocketMQ Java client lines the agent serves. */
    String getClientVersions();

    /** The options that differ from the defaults. */
    String getOptions();

    /** Gauge: client instances served now. */
    long getClients();

    /** Gauge: of those, the ones whose name server has no route push (they keep their poll). */
    long getClientsWithoutPush();

    /** Gauge: of those, the ones waiting out their name server's start-up window. */
    long getClientsWarming();

    /** Gauge: topics subscribed now, over every client. */
    long getSubscribedTopics();

    long getSubscribes();

    long getSubscribeFailures();

    /** NOTIFY frames read from the name servers subscribed at. */
    long getNotifications();

    /** Route refreshes run through the clients' own lookup. */
    long getRefreshes();

    long getRefreshFailures();

    /** Refreshes owed again while one was already owed: merged into it. */
    long getCoalescedRefreshes();

    /** Refreshes of every held topic after a sequence gap, a new epoch or a lost frame. */
    long getResyncs();

    /** Frames dropped unread because too many or too many bytes were waiting. */
    long getDroppedFrames();

    /** Frames dropped unread because longer than {@code maxFrameBytes}. */
    long getOversizedFrames();

    long getMalformedFrames();

    /** Frames from a connection the agent did not subscribe on (a broker's): ignored. */
    long getForeignFrames();

    /** Entries naming a topic not subscribed there: read past. */
    long getIgnoredEntries();

    long getGoAways();

    /** Log lines the agent left out by pacing. */
    long getSuppressedLogLines();

    /** The one-line summary, as the periodic status line logs it. */
    String getSummary();

    /** One line per client instance served now. */
    String[] getClientLines();
}
