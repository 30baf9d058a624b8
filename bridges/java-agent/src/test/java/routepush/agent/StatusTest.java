package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.Test;

/**
 * What an operator sees without code: the start line (version, client versions, options), a
 * warning per option mistake with push left on, the status MBean and its command, and the
 * periodic status line.
 */
public class StatusTest {
    private static final String VERSION = System.getProperty("agenttest.agentVersion", "");

    /**
     * Records of the agent's logger while {@code body} runs, with no {@code routepush.*} system
     * property set (Maven hands its own {@code -Droutepush.legacyLib} to the tests' JVM).
     */
    private static List<LogRecord> logged(Runnable body) {
        Properties saved = new Properties();
        for (String key : System.getProperties().stringPropertyNames()) {
            if (key.startsWith(Options.PREFIX)) {
                saved.setProperty(key, System.getProperty(key));
                System.clearProperty(key);
            }
        }
        try {
            return LogLines.capture(body);
        } finally {
            for (String key : saved.stringPropertyNames()) {
                System.setProperty(key, saved.getProperty(key));
            }
        }
    }

    @Test
    public void theVersionIsTheMavenProjects() {
        assertFalse("run by Maven", VERSION.isEmpty());
        assertEquals(VERSION, AgentVersion.text());
    }

    @Test
    public void theStartLineNamesTheVersionTheClientsAndTheOptions() {
        List<LogRecord> records = logged(() -> {
            try {
                RoutePush.start("exclude=%RETRY%*;Audit,checkIntervalMs=15000,chekIntervalMs=1,scanIntervalMs=fast", null);
                assertNotNull("a mistake leaves push on", RoutePush.watcher());
            } finally {
                RoutePush.shutdown();
            }
        });
        List<String> warnings = new ArrayList<String>();
        List<String> infos = new ArrayList<String>();
        for (LogRecord r : records) {
            (r.getLevel() == Level.WARNING ? warnings : infos).add(r.getMessage());
        }
        assertEquals(records.toString(), 2, warnings.size());
        assertTrue(warnings.get(0), warnings.get(0).startsWith("[routepush] unknown route push option "
                + "'chekIntervalMs' (agent argument) ignored (did you mean checkIntervalMs?); known options: "));
        assertEquals("[routepush] route push option scanIntervalMs=fast (agent argument) is malformed: expected "
                + "a whole number in [10, 60000]; using the default 1000", warnings.get(1));
        assertEquals(infos.toString(), "[routepush] route push " + VERSION + " started as an agent for Apache "
                + "RocketMQ Java clients 4.9.x and 5.x and proxies 5.1 to 5.3; options: exclude=%RETRY%*;Audit, checkIntervalMs=15000; "
                + "status: MBean routepush:type=Agent once a client is served", infos.get(0));
    }

    @Test
    public void offIsSaidWithTheVersion() {
        List<LogRecord> records = logged(() -> {
            RoutePush.start("enabled=false", null);
            assertNull(RoutePush.watcher());
        });
        assertEquals(1, records.size());
        assertEquals("[routepush] route push " + VERSION + " off (enabled=false): no client is touched",
                records.get(0).getMessage());
    }

    @Test
    public void theMBeanShowsWhatTheAgentDidForAClient() throws Exception {
        FakeClient client = new FakeClient();
        client.id = "mbean@" + System.nanoTime();
        client.held.add("A");
        client.held.add("B");
        Options options = Options.parse("", new Properties());
        RefreshQueue queue = new RefreshQueue(100);
        Bridge bridge = new Bridge(client, options, queue, RefreshWorker.SYSTEM, new Random(1));
        FrameInbox inbox = new FrameInbox(options.maxPendingNotifications, options.maxPendingBytes, options.maxFrameBytes);
        RefreshWorker worker = new RefreshWorker("test-refresh", queue, topic -> client.refresh(topic),
                RefreshWorker.SYSTEM);
        bridge.tick();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e1", "A=5"));
        bridge.frame(new Object(), Messages.NOTIFY, FakeClient.notify(1, "e1", "B=9"));
        inbox.offer(client.connection, Messages.NOTIFY, new byte[options.maxFrameBytes + 1]);
        worker.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (queue.size() > 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        Thread.sleep(50);
        worker.stop();
        final Counts counts = Counts.of(bridge, worker, queue, inbox);
        final Counts retired = new Counts();
        retired.notifications = 7;
        AgentStatus status = new AgentStatus(new AgentStatus.Source() {
            @Override
            public Counts totals() {
                Counts sum = new Counts();
                sum.add(retired, false);
                sum.add(counts, true);
                return sum;
            }

            @Override
            public String[] clientLines() {
                return new String[] {"client " + client.id + ": a line"};
            }

            @Override
            public String options() {
                return options.summary();
            }
        });
        MBeanServer server = ManagementFactory.getPlatformMBeanServer();
        ObjectName name = status.register();
        try {
            assertEquals(new ObjectName("routepush:type=Agent"), name);
            assertEquals(VERSION, server.getAttribute(name, "Version"));
            assertEquals("4.9.x and 5.x", server.getAttribute(name, "ClientVersions"));
            assertEquals("defaults", server.getAttribute(name, "Options"));
            assertEquals(1L, server.getAttribute(name, "Clients"));
            assertEquals(0L, server.getAttribute(name, "ClientsWithoutPush"));
            assertEquals(2L, server.getAttribute(name, "SubscribedTopics"));
            assertEquals(1L, server.getAttribute(name, "Subscribes"));
            assertEquals("one from the client, 7 from one let go", 8L, server.getAttribute(name, "Notifications"));
            assertEquals(1L, server.getAttribute(name, "ForeignFrames"));
            assertEquals(1L, server.getAttribute(name, "OversizedFrames"));
            assertEquals(0L, server.getAttribute(name, "DroppedFrames"));
            assertEquals(worker.refreshed(), server.getAttribute(name, "Refreshes"));
            assertTrue("A refreshed", client.refreshed.contains("A"));
            assertTrue(worker.refreshed() >= 1);

            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            assertTrue(Status.print(server, new PrintStream(bytes, true, "UTF-8")));
            String out = bytes.toString("UTF-8");
            System.out.print(out);
            String[] lines = out.split("\n");
            assertEquals("routepush:type=Agent", lines[0]);
            assertTrue(lines[1], lines[1].startsWith("  route push " + VERSION + " status: 1 client(s) served (0 at "
                    + "a name server without push, 0 waiting out a server's start-up), 2 topic(s) subscribed; "
                    + "since start: 1 subscribes (0 failed), 8 notifications, "));
            assertEquals(String.format("  %-20s %s", "Version", VERSION), lines[2]);
            assertTrue(out, out.contains("\n  Notifications        8\n"));
            assertTrue(out, out.endsWith("  client " + client.id + ": a line\n"));
            assertEquals(3 + Status.ATTRIBUTES.length, lines.length);

            AgentStatus second = new AgentStatus(new AgentStatus.Source() {
                @Override
                public Counts totals() {
                    return new Counts();
                }

                @Override
                public String[] clientLines() {
                    return new String[0];
                }

                @Override
                public String options() {
                    return "defaults";
                }
            });
            ObjectName copy = second.register();
            assertEquals("another copy of the agent", new ObjectName("routepush:type=Agent,copy=2"), copy);
            second.unregister();
        } finally {
            status.unregister();
        }
        assertFalse(server.isRegistered(name));
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        assertFalse(Status.print(server, new PrintStream(bytes, true, "UTF-8")));
        assertTrue(bytes.toString("UTF-8").startsWith("no routepush:type=Agent MBean"));
    }

    @Test
    public void thePeriodicStatusLineIsTheSummary() {
        Watcher watcher = new Watcher(Options.parse("statusIntervalMs=10000", new Properties()));
        List<LogRecord> records = logged(watcher::logStatus);
        assertEquals(1, records.size());
        assertEquals(Level.INFO, records.get(0).getLevel());
        assertEquals("[routepush] route push " + VERSION + " status: 0 client(s) served (0 at a name server "
                + "without push, 0 waiting out a server's start-up), 0 topic(s) subscribed; since start: "
                + "0 subscribes (0 failed), 0 notifications, 0 refreshes (0 failed, 0 coalesced), 0 resyncs, "
                + "0 frames dropped, 0 oversized, 0 malformed, 0 foreign, 0 GO_AWAY",
                records.get(0).getMessage());
    }
}
