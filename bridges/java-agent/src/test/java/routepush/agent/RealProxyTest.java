package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assume.assumeTrue;
import static routepush.agent.RealJars.await;

import java.io.File;
import java.util.HashSet;
import java.util.Properties;
import java.util.Set;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * The agent on a real RocketMQ 5.x proxy's route cache (the proxy's own classes, in a loader of
 * their own, built as its start-up builds them) against a name server on loopback: it finds the
 * route service through the proxy's own objects, subscribes exactly the cache's keys (topics and
 * broker names), and a notification reloads exactly the entry it names, so the next forwarded
 * send goes to the new master; nothing else a name server says reaches the cache.
 */
public class RealProxyTest {
    private FakeNameServer ns;
    private RealProxy proxy;
    private Watcher watcher;

    @Before
    public void setUp() throws Exception {
        String lib = System.getProperty("agenttest.proxyLib", "");
        assumeTrue("routepush.proxyLib not given", !lib.isEmpty() && new File(lib).isDirectory());
        ns = new FakeNameServer();
        proxy = new RealProxy(new File(lib), ns.addr());
        watcher = new Watcher(Options.parse("scanIntervalMs=50,jmx=false", new Properties()));
    }

    @After
    public void tearDown() throws Exception {
        if (watcher != null) {
            watcher.stop();
        }
        if (proxy != null) {
            proxy.close();
        }
        if (ns != null) {
            ns.close();
        }
    }

    /** Starts the agent on the proxy and waits for it to serve the proxy's route cache. */
    private Attachment served() throws Exception {
        watcher.addProxyLoader(proxy.loader);
        watcher.start();
        await(() -> proxyAttachment() != null, "the proxy's route cache served");
        Attachment a = proxyAttachment();
        assertSame("the route service the proxy forwards by", proxy.routeService(),
                ((ProxyAccess) a.access).service());
        return a;
    }

    private Attachment proxyAttachment() {
        for (Attachment a : watcher.attachments()) {
            if (a.access instanceof ProxyAccess) {
                return a;
            }
        }
        return null;
    }

    private Set<String> keys() throws Exception {
        Set<String> out = new HashSet<String>();
        for (Object key : proxy.cache().keySet()) {
            out.add(String.valueOf(key));
        }
        return out;
    }

    @Test
    public void subscriptionsFollowTheCacheAndANotificationReloadsOnlyTheEntryItNames() throws Exception {
        proxy.load("T");
        assertEquals("127.0.0.1:1", proxy.brokerAddr("broker-a"));
        Attachment a = served();
        await(() -> ns.subscribed.equals(keys()) && ns.subscribed.contains("broker-a")
                && ns.subscribed.contains("T"), "the cache's keys subscribed");
        // Each key first subscribed is reloaded once (its route may have moved meanwhile).
        await(() -> a.counts().refreshes >= 2, "the first reloads");
        Object t = proxy.cache().get("T");
        int lookupsOfT = ns.lookupsOf("T");

        // The master of broker-a moves: the name server notifies the broker name's key.
        ns.master = "127.0.0.1:2";
        ns.push(Messages.NOTIFY, FakeClient.notify(1, "epoch-1", "broker-a=2"));
        await(() -> "127.0.0.1:2".equals(proxy.brokerAddr("broker-a")), "the next send goes to the new master");
        assertSame("the entry of T is not reloaded", t, proxy.cache().get("T"));
        assertEquals(lookupsOfT, ns.lookupsOf("T"));

        // A topic the proxy starts serving is subscribed; one it evicts is unsubscribed.
        proxy.load("U");
        await(() -> ns.subscribed.contains("U"), "U subscribed");
        proxy.invalidate("T");
        await(() -> !ns.subscribed.contains("T"), "T unsubscribed");
        assertEquals(keys(), ns.subscribed);
        assertEquals(keys(), a.bridge.subscribedTopics());
    }

    @Test
    public void whateverTheNameServerSaysTheProxyKeepsItsRouteAndTheAgentItsBounds() throws Exception {
        proxy.load("T");
        Attachment a = served();
        await(() -> ns.subscribed.contains("T") && a.counts().refreshes >= 1, "T subscribed and reloaded");
        Object t = proxy.cache().get("T");
        int size = proxy.cache().size();

        // The name server answers "no route" while it notifies T: the cached route stays.
        ns.answer = FakeNameServer.TOPIC_NOT_EXIST;
        ns.push(Messages.NOTIFY, FakeClient.notify(1, "epoch-1", "T=2"));
        await(() -> a.counts().refreshFailures >= 1, "the reload refused");
        assertSame(t, proxy.cache().get("T"));
        assertFalse(proxy.empty(proxy.cache().get("T")));

        // DELETED and UNROUTED are never looked up; a frame of made-up topics is read past.
        int asked = ns.lookupsOf("T");
        long refreshes = a.counts().refreshes + a.counts().refreshFailures;
        ns.push(Messages.NOTIFY, FakeClient.notify(2, "epoch-1", "T=3=" + Messages.CHANGE_DELETED));
        ns.push(Messages.NOTIFY, FakeClient.notify(3, "epoch-1", "T=4=" + Messages.CHANGE_UNROUTED));
        Proto.Writer ghosts = new Proto.Writer();
        for (int i = 0; i < 20_000; i++) {
            ghosts.bytes(1, new Proto.Writer().string(1, "ghost-" + i).uint(2, 5).toByteArray());
        }
        ns.push(Messages.NOTIFY, ghosts.uint(2, 4).string(4, "epoch-1").toByteArray());
        // The ghosts are counted as the last frame is read, after the two before it were handled.
        await(() -> a.bridge.ignored.get() >= 20_000, "the four frames read");
        assertEquals("nothing owed", 0, a.queue.size());
        assertEquals(asked, ns.lookupsOf("T"));
        assertEquals(refreshes, a.counts().refreshes + a.counts().refreshFailures);
        assertEquals(0, ns.lookupsOf("ghost-1"));
        assertEquals("no key added", size, proxy.cache().size());
        assertTrue(a.bridge.heldVersions() <= keys().size());
        assertSame(t, proxy.cache().get("T"));

        // Frames far over the agent's frame bound are dropped unread: each costs a resync only.
        byte[] huge = new byte[8 << 20];
        for (int i = 0; i < 4; i++) {
            ns.push(Messages.NOTIFY, huge);
        }
        await(() -> a.inbox.oversized() >= 4, "the large frames seen");
        assertEquals(0, a.inbox.bytes());
        await(() -> a.counts().refreshFailures > 1, "the resync's reload, refused");
        assertSame(t, proxy.cache().get("T"));
        assertEquals("two threads of the agent's for the proxy", 2, threads(a.access.clientId()));
    }

    @Test
    public void aNameServerWithoutPushLeavesTheProxyAlone() throws Exception {
        ns.push = false;
        proxy.load("T");
        assertEquals("127.0.0.1:1", proxy.brokerAddr("broker-a"));
        Object t = proxy.cache().get("T");
        int asked = ns.lookupsOf("T");
        Attachment a = served();
        await(() -> a.bridge.unsupported(), "the name server's refusal seen");
        ns.push = true; // asked no more on that connection, whatever it says later
        for (int i = 0; i < 3; i++) {
            watcher.scan();
        }
        await(() -> watcher.attachments().size() >= 1, "a round trip of the scan");
        assertEquals(0, ns.subscribes.get());
        assertEquals(0, a.counts().refreshes + a.counts().refreshFailures);
        assertSame(t, proxy.cache().get("T"));
        assertEquals(asked, ns.lookupsOf("T"));
        assertEquals("127.0.0.1:1", proxy.brokerAddr("broker-a"));
    }

    private static int threads(String id) {
        int n = 0;
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            String name = t.getName();
            if (name.equals("routepush-" + id) || name.equals("routepush-refresh-" + id)) {
                n++;
            }
        }
        return n;
    }
}
