package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;
import static routepush.agent.RealJars.await;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.ServerSocket;
import java.net.URLClassLoader;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import javax.management.MBeanServer;
import javax.management.ObjectName;
import org.junit.Test;

/**
 * The agent against real Apache clients, each loaded in a class loader of its own (as a fat jar
 * or a container would), none of it visible to the agent's own loader: version detection, the
 * members the agent reaches, discovery through the client's registry, and frames handled
 * without ever throwing into the client's threads.
 */
public class RealClientTest {
    @Test
    public void theCurrentClient() throws Exception {
        String version = System.getProperty("agenttest.version", "");
        File dir = new File(System.getProperty("agenttest.clients", ""), version);
        assumeTrue("no client jars in " + dir, dir.isDirectory());
        exercise(dir, version);
    }

    @Test
    public void theLegacyClient() throws Exception {
        String lib = System.getProperty("agenttest.legacyLib", "");
        assumeTrue("routepush.legacyLib not given", !lib.isEmpty() && new File(lib).isDirectory());
        exercise(new File(lib), "4.9");
    }

    @Test
    public void theCurrentClientKeepsItsRouteWhateverTheAgentIsTold() throws Exception {
        String version = System.getProperty("agenttest.version", "");
        File dir = new File(System.getProperty("agenttest.clients", ""), version);
        assumeTrue("no client jars in " + dir, dir.isDirectory());
        keepsRoutes(dir);
    }

    @Test
    public void theLegacyClientKeepsItsRouteWhateverTheAgentIsTold() throws Exception {
        String lib = System.getProperty("agenttest.legacyLib", "");
        assumeTrue("routepush.legacyLib not given", !lib.isEmpty() && new File(lib).isDirectory());
        keepsRoutes(new File(lib));
    }

    /**
     * The agent's refresh is the client's own: a name server answering TOPIC_NOT_EXIST or
     * SYSTEM_ERROR (a warming one) leaves the route the client holds in place, and DELETED and
     * UNROUTED notifications, read through the client's real Netty pipeline, neither fetch nor
     * remove anything. Frames far over the agent's bounds cost it no more than its bounds.
     */
    private void keepsRoutes(File dir) throws Exception {
        URLClassLoader loader = RealJars.loader(dir);
        ClassLoader before = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(loader);
        FakeNameServer ns = new FakeNameServer();
        Watcher watcher = new Watcher(Options.parse("scanIntervalMs=50", new java.util.Properties()));
        Object producer = null;
        Class<?> producerType = loader.loadClass("org.apache.rocketmq.client.producer.DefaultMQProducer");
        try {
            producer = producerType.getConstructor(String.class).newInstance("routepush_keep");
            producerType.getMethod("setNamesrvAddr", String.class).invoke(producer, ns.addr());
            producerType.getMethod("setInstanceName", String.class).invoke(producer, "k" + System.nanoTime());
            producerType.getMethod("start").invoke(producer);
            Object instance = RoutePush.instanceOf(producer);
            ClientAccess access = ClientAccess.of(instance);

            assertTrue("the first lookup brings the route", access.refresh("T"));
            assertEquals(1, brokersOf(instance, "T"));
            for (int code : new int[] {FakeNameServer.TOPIC_NOT_EXIST, FakeNameServer.SYSTEM_ERROR}) {
                ns.answer = code;
                int asked = ns.lookupsOf("T");
                assertFalse(access.refresh("T"));
                assertEquals("asked", asked + 1, ns.lookupsOf("T"));
                assertEquals("the route is kept after code " + code, 1, brokersOf(instance, "T"));
            }

            // The whole agent: it subscribes, refreshes T once (answered SYSTEM_ERROR: kept).
            watcher.addLoader(loader);
            watcher.scan();
            Attachment a = watcher.attachments().get(0);
            await(() -> a.bridge.subscribedTopics().contains("T"), "T subscribed");
            await(() -> ns.lookupsOf("T") >= 4, "the first-subscription refresh");
            int asked = ns.lookupsOf("T");
            ns.push(Messages.NOTIFY, notify(1, "T", 2, Messages.CHANGE_DELETED));
            ns.push(Messages.NOTIFY, notify(2, "T", 3, Messages.CHANGE_UNROUTED));
            await(() -> a.bridge.frames.get() >= 2, "two notifications read");
            // A frame naming thousands of topics this client never used: read past.
            Proto.Writer ghosts = new Proto.Writer();
            for (int i = 0; i < 20_000; i++) {
                ghosts.bytes(1, new Proto.Writer().string(1, "ghost-" + i).uint(2, 5).toByteArray());
            }
            ns.push(Messages.NOTIFY, ghosts.uint(2, 3).string(4, "epoch-1").toByteArray());
            await(() -> a.bridge.frames.get() >= 3, "the ghost frame read");
            Thread.sleep(300);
            assertEquals("DELETED and UNROUTED fetch nothing", asked, ns.lookupsOf("T"));
            assertEquals("made-up topics are never looked up", 0, ns.lookupsOf("ghost-1"));
            assertEquals(20_000, a.bridge.ignored.get());
            // Versions are held for what the client holds (its own topics) and nothing else.
            assertTrue(a.bridge.subscribedTopics() + " " + access.heldTopics(),
                    access.heldTopics().containsAll(a.bridge.subscribedTopics())
                    && a.bridge.heldVersions() <= access.heldTopics().size());
            assertEquals("the route is kept", 1, brokersOf(instance, "T"));
            assertTrue(access.heldTopics().contains("T"));

            // Frames far past the agent's bounds (8 MiB each): dropped unread.
            byte[] big = new byte[8 << 20];
            for (int i = 0; i < 8; i++) {
                ns.push(Messages.NOTIFY, big);
            }
            await(() -> a.inbox.oversized() >= 8, "the large frames seen");
            assertTrue(a.inbox.peakBytes() <= Options.defaults().maxPendingBytes);
            assertEquals(1, brokersOf(instance, "T"));

            // The status MBean, registered with the first client served, shows the same.
            ObjectName name = watcher.mbean().name();
            assertNotNull("the MBean is registered once a client is served", name);
            MBeanServer server = ManagementFactory.getPlatformMBeanServer();
            assertEquals(1L, server.getAttribute(name, "Clients"));
            long topics = a.bridge.subscribedCount();
            assertTrue(topics >= 1);
            assertEquals(topics, server.getAttribute(name, "SubscribedTopics"));
            assertTrue((Long) server.getAttribute(name, "Notifications") >= 3);
            assertEquals(20_000L, server.getAttribute(name, "IgnoredEntries"));
            assertTrue((Long) server.getAttribute(name, "OversizedFrames") >= 8);
            String[] lines = (String[]) server.getAttribute(name, "ClientLines");
            assertEquals(1, lines.length);
            assertTrue(lines[0], lines[0].contains("(RocketMQ client V") && lines[0].contains(" " + topics + " topics subscribed"));
            watcher.stop();
            assertFalse("let go with the agent", server.isRegistered(name));
        } finally {
            watcher.stop();
            if (producer != null) {
                producerType.getMethod("shutdown").invoke(producer);
            }
            ns.close();
            Thread.currentThread().setContextClassLoader(before);
            awaitNettyThreads();
            loader.close();
        }
    }

    private static byte[] notify(long sequence, String topic, long version, int kind) {
        byte[] change = new Proto.Writer().string(1, topic).uint(2, version).uint(3, kind).toByteArray();
        return new Proto.Writer().bytes(1, change).uint(2, sequence).string(4, "epoch-1").toByteArray();
    }

    /** Broker names in the client's held route of {@code topic} (0 when it holds none). */
    private static int brokersOf(Object instance, String topic) throws Exception {
        Map<?, ?> table = (Map<?, ?>) instance.getClass().getMethod("getTopicRouteTable").invoke(instance);
        Object route = table.get(topic);
        if (route == null) {
            return 0;
        }
        return ((List<?>) route.getClass().getMethod("getBrokerDatas").invoke(route)).size();
    }

    private void exercise(File dir, String version) throws Exception {
        URLClassLoader loader = RealJars.loader(dir);
        // As in a container, the application's threads see its own loader.
        ClassLoader before = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(loader);
        try {
            assertTrue(version, ClientVersion.of(loader).toString().startsWith(version));
            assertTrue(ClientVersion.of(loader).supported());
            Class<?> producerType = loader.loadClass("org.apache.rocketmq.client.producer.DefaultMQProducer");
            Object producer = producerType.getConstructor(String.class).newInstance("routepush_test");
            String namesrv = "127.0.0.1:" + deadPort();
            producerType.getMethod("setNamesrvAddr", String.class).invoke(producer, namesrv);
            producerType.getMethod("setInstanceName", String.class).invoke(producer, "t" + System.nanoTime());
            assertNull("no instance before start()", RoutePush.instanceOf(producer));
            producerType.getMethod("start").invoke(producer);
            Watcher watcher = new Watcher(Options.defaults());
            try {
                Object instance = RoutePush.instanceOf(producer);
                assertNotNull(instance);
                ClientAccess access = ClientAccess.of(instance);
                assertTrue(access.running());
                assertFalse(access.stoppedForGood());
                assertEquals(namesrv, access.nameServers().get(0));
                assertTrue(access.clientId().contains("@"));

                // Found through the client's own registry, in a loader the agent does not share.
                watcher.addLoader(loader);
                watcher.scan();
                List<Attachment> attached = watcher.attachments();
                assertEquals(1, attached.size());
                assertSame(instance, ((ClientAccess) attached.get(0).access).instance());

                // The processor the agent registered takes the extension's frames, and whatever
                // a frame holds, it returns nothing and throws nothing into the client.
                Object processor = processorFor(instance, Messages.NOTIFY);
                assertNotNull(processor);
                assertSame(processor, processorFor(instance, Messages.GO_AWAY));
                Method process = processor.getClass().getMethod("processRequest",
                        loader.loadClass("io.netty.channel.ChannelHandlerContext"),
                        loader.loadClass("org.apache.rocketmq.remoting.protocol.RemotingCommand"));
                assertNull(process.invoke(processor, null, command(loader, Messages.NOTIFY, new byte[] {0x0a, 0x7f})));
                assertNull(process.invoke(processor, null, command(loader, Messages.NOTIFY, null)));
                assertFalse((Boolean) processor.getClass().getMethod("rejectRequest").invoke(processor));

                // A request to a name server that is not there fails inside the agent's call.
                try {
                    access.invoke(namesrv, Messages.SUBSCRIBE, Messages.subscribe(new ArrayList<String>(), "x"), 500);
                } catch (Exception expected) {
                    // the Bridge catches exactly this and backs off
                }
            } finally {
                producerType.getMethod("shutdown").invoke(producer);
            }
            Object instance = RoutePush.instanceOf(producer);
            assertTrue(instance == null || ClientAccess.of(instance).stoppedForGood());
            watcher.scan();
            assertEquals("let go after shutdown", 0, watcher.attachments().size());
            watcher.stop();
        } finally {
            Thread.currentThread().setContextClassLoader(before);
            awaitNettyThreads();
            loader.close();
        }
    }

    /**
     * The client's Netty threads finish their last tasks after shutdown returns; the loader is
     * closed only once they have ended, or a late task cannot load its classes.
     */
    private static void awaitNettyThreads() throws InterruptedException {
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().startsWith("NettyClient")) {
                t.join(10000);
            }
        }
    }

    private static Object processorFor(Object instance, int code) throws Exception {
        Object api = instance.getClass().getMethod("getMQClientAPIImpl").invoke(instance);
        Object remoting = api.getClass().getMethod("getRemotingClient").invoke(api);
        Field table = null;
        for (Class<?> c = remoting.getClass(); c != null && table == null; c = c.getSuperclass()) {
            try {
                table = c.getDeclaredField("processorTable");
            } catch (NoSuchFieldException e) {
                // superclass
            }
        }
        assertNotNull(table);
        table.setAccessible(true);
        Object pair = ((Map<?, ?>) table.get(remoting)).get(code);
        return pair == null ? null : pair.getClass().getMethod("getObject1").invoke(pair);
    }

    private static Object command(ClassLoader loader, int code, byte[] body) throws Exception {
        Class<?> type = loader.loadClass("org.apache.rocketmq.remoting.protocol.RemotingCommand");
        Class<?> header = loader.loadClass("org.apache.rocketmq.remoting.CommandCustomHeader");
        Object cmd = type.getMethod("createRequestCommand", int.class, header).invoke(null, code, null);
        type.getMethod("markOnewayRPC").invoke(cmd);
        type.getMethod("setBody", byte[].class).invoke(cmd, (Object) body);
        return cmd;
    }

    private static int deadPort() throws Exception {
        ServerSocket s = new ServerSocket(0);
        int port = s.getLocalPort();
        s.close();
        return port;
    }

}
