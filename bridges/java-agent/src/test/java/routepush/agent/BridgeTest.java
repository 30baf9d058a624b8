package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import org.junit.Before;
import org.junit.Test;

public class BridgeTest {
    private final long[] now = {0};
    private final RefreshWorker.Clock clock = new RefreshWorker.Clock() {
        @Override
        public long nowMs() {
            return now[0];
        }
    };
    private FakeClient client;
    private RefreshQueue queue;
    private Bridge bridge;

    @Before
    public void setUp() {
        client = new FakeClient();
        queue = new RefreshQueue(1000);
        bridge = bridge("");
    }

    private Bridge bridge(String args) {
        return new Bridge(client, Options.parse(args, new Properties()), queue, clock, new Random(1));
    }

    private List<String> due() {
        return queue.takeDue(now[0] + 60_000);
    }

    @Test
    public void heldTopicsAreSubscribedOnceAndRefreshedOnceAtFirst() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        bridge.tick();
        assertEquals(Collections.singletonList("SUBSCRIBE ns1:9876 [A, B]"), client.requests);
        assertEquals(Arrays.asList("A", "B"), sorted(due()));
        client.held.add("C");
        bridge.tick();
        assertEquals("SUBSCRIBE ns1:9876 [C]", client.requests.get(1));
    }

    @Test
    public void aNotificationOwesARefreshUnlessTheVersionIsHeld() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e1", "A=2", "B=1"));
        assertEquals(Collections.singletonList("A"), due());
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(2, "e1", "A=2"));
        assertEquals(Collections.<String>emptyList(), due());
    }

    @Test
    public void aSequenceGapRefetchesEveryHeldTopic() {
        client.held.addAll(Arrays.asList("A", "B", "C"));
        bridge.tick();
        due();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e1", "A=2"));
        due();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(3, "e1", "B=5"));
        assertEquals(Arrays.asList("A", "B", "C"), sorted(due()));
        assertEquals(1, bridge.resyncs.get());
    }

    @Test
    public void aNewEpochRefetchesEverythingAndAdoptsNoVersion() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e2", "A=1"));
        assertEquals(Arrays.asList("A", "B"), sorted(due()));
        // Versions of the old epoch are forgotten: version 1 of the new one is newer.
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(2, "e2", "A=1"));
        assertEquals(Collections.singletonList("A"), due());
    }

    @Test
    public void anUnreadableNotificationIsCountedNeverThrownAndRefetchesEverything() {
        client.held.add("A");
        bridge.tick();
        due();
        bridge.frame(client.connection, Messages.NOTIFY, new byte[] {0x0a, 0x7f, 0x01});
        bridge.frame(client.connection, Messages.NOTIFY, null);
        bridge.frame(client.connection, Messages.GO_AWAY, new byte[] {(byte) 0xff});
        assertEquals(2, bridge.malformed.get());
        assertEquals(Collections.singletonList("A"), due());
    }

    @Test
    public void anOldNameServerIsAskedOnceAndThenLeftToTheClientsPoll() {
        client.answer = Messages.REQUEST_CODE_NOT_SUPPORTED;
        client.held.add("A");
        for (int i = 0; i < 5; i++) {
            now[0] += 60_000;
            bridge.tick();
        }
        assertEquals(1, client.requests.size());
        assertTrue(bridge.unsupported());
    }

    @Test
    public void aNewConnectionIsSubscribedAgain() {
        client.held.add("A");
        bridge.tick();
        client.connection = new Object();
        bridge.tick();
        assertEquals(2, client.requests.size());
    }

    @Test
    public void aConnectionLostWhileTheClientAsksNothingIsSubscribedAgainWithBackoff() {
        client.held.add("A");
        bridge.tick();
        client.connection = null; // the name server went away; the client has no request to send
        client.failure = new java.io.IOException("connection refused");
        bridge.tick();
        bridge.tick();
        assertEquals("asked once, then backing off", 1, bridge.subscribeFailures.get());
        client.failure = null;
        client.connection = new Object(); // back: the agent's own request reconnected
        now[0] += 2000;
        bridge.tick();
        assertEquals("SUBSCRIBE ns1:9876 [A]", client.requests.get(client.requests.size() - 1));
        assertEquals(2, client.requests.size());
        bridge.tick();
        assertEquals(2, client.requests.size());
    }

    @Test
    public void aFailedSubscribeBacksOffAndNeverThrows() {
        client.held.add("A");
        client.failure = new java.io.IOException("connection refused");
        bridge.tick();
        bridge.tick();
        assertEquals(1, bridge.subscribeFailures.get());
        client.failure = null;
        bridge.tick();
        assertEquals(0, client.requests.size());
        now[0] += 2000;
        bridge.tick();
        assertEquals(1, client.requests.size());
    }

    @Test
    public void theVersionCheckRefreshesOnlyWhatMovedWhileNoFrameCame() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        client.versions.put("B", 7L);
        now[0] += 30_000;
        bridge.tick();
        assertEquals("SUBSCRIBE ns1:9876 [A, B]", client.requests.get(1));
        assertEquals(Collections.singletonList("B"), due());
    }

    @Test
    public void goAwayMovesTheClientToItsNextNameServerAndSubscribesThere() {
        client.held.add("A");
        bridge.tick();
        byte[] goAway = new Proto.Writer().uint(1, 5000).string(2, "ns2:9876").string(3, "stopping").toByteArray();
        bridge.frame(client.connection, Messages.GO_AWAY, goAway);
        assertEquals("ns2:9876", client.chosen);
        assertEquals("SUBSCRIBE ns2:9876 [A]", client.requests.get(client.requests.size() - 1));
        assertEquals(1, bridge.goAways.get());
    }

    @Test
    public void excludedTopicsAreNeitherSubscribedNorRefreshed() {
        bridge = bridge("exclude=%RETRY%*;B");
        client.held.addAll(Arrays.asList("A", "B", "%RETRY%g"));
        bridge.tick();
        assertEquals(Collections.singletonList("SUBSCRIBE ns1:9876 [A]"), client.requests);
        due();
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e1", "B=9", "%RETRY%g=9"));
        assertEquals(Collections.<String>emptyList(), due());
    }

    @Test
    public void aClientNotRunningIsLeftAlone() {
        client.running = false;
        client.held.add("A");
        bridge.tick();
        assertFalse(client.requests.size() > 0);
    }

    @Test
    public void deletedAndUnroutedTopicsAreNeverFetchedSoTheClientKeepsItsRoute() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        String deleted = "A=2=" + Messages.CHANGE_DELETED;
        String unrouted = "B=2=" + Messages.CHANGE_UNROUTED;
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e1", deleted, unrouted));
        assertEquals(Collections.<String>emptyList(), due());
        // The topic's return is news: a newer version than the one held at its absence.
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(2, "e1", "A=3=1", "B=2"));
        assertEquals(Collections.singletonList("A"), due());
    }

    @Test
    public void aTopicTheServerHasNoRouteForIsNotLookedUpWhenSubscribed() {
        client.held.addAll(Arrays.asList("A", "B"));
        client.absent.add("B");
        bridge.tick();
        assertEquals(Collections.singletonList("A"), due());
    }

    @Test
    public void aWarmingServerIsAskedForNoResyncUntilItsWindowEndsButNamedChangesAreNews() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        // The name server restarts: a new connection, a new epoch, 45 s of start-up window.
        client.connection = new Object();
        client.epoch = "e2";
        client.warmingUp = true;
        client.warmInMs = 45_000;
        bridge.tick();
        assertTrue(bridge.warmingUp());
        assertEquals("the new epoch's resync waits for the window", Collections.<String>emptyList(),
                queue.takeDue(now[0] + 44_999));
        // A change the warm-up server names (it heard a broker register it) is refreshed at once.
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, "e2", "A=4"));
        assertEquals(Collections.singletonList("A"), queue.takeDue(now[0]));
        // A gap is a resync: it waits for the window too.
        bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(3, "e2", "B=4"));
        assertEquals(Collections.<String>emptyList(), queue.takeDue(now[0] + 44_999));
        // A was refreshed when its change was named; the resync brings the rest at the end.
        assertEquals(Collections.singletonList("B"), queue.takeDue(now[0] + 45_000 + 2 * 1000));
    }

    @Test
    public void aBrokersGoAwayIsIgnored() {
        client.held.add("A");
        bridge.tick();
        Object brokerConnection = new Object();
        byte[] goAway = new Proto.Writer().uint(1, 5000).string(3, "broker stopping").toByteArray();
        bridge.frame(brokerConnection, Messages.GO_AWAY, goAway);
        bridge.frame(brokerConnection, Messages.NOTIFY, FakeClient.notify(1, "e1", "A=9"));
        assertEquals("ns1:9876", client.chosen);
        assertEquals(1, client.requests.size());
        assertEquals(2, bridge.foreign.get());
        assertEquals(0, bridge.goAways.get());
    }

    @Test
    public void aFloodOfGoAwaysMovesTheClientOncePerScanInterval() {
        client.held.add("A");
        bridge.tick();
        byte[] goAway = new Proto.Writer().uint(1, 5000).toByteArray();
        for (int i = 0; i < 1000; i++) {
            bridge.frame(client.connection, Messages.GO_AWAY, goAway);
        }
        assertEquals("ns2:9876", client.chosen);
        assertEquals(2, client.requests.size());
        now[0] += 1000;
        bridge.frame(client.connection, Messages.GO_AWAY, goAway);
        assertEquals("ns1:9876", client.chosen);
    }

    /**
     * A name server sending frames that name 20,000 topics the application never used, fresh
     * names in every frame: nothing is held for them and nothing is looked up.
     */
    @Test
    public void notificationsNamingTopicsNeverUsedCostNothing() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        long before = usedHeap();
        int frames = 50;
        for (int f = 1; f <= frames; f++) {
            Proto.Writer w = new Proto.Writer();
            for (int i = 0; i < 20_000; i++) {
                w.bytes(1, new Proto.Writer().string(1, "ghost-" + f + "-" + i).uint(2, f).toByteArray());
            }
            byte[] step = new Proto.Writer().string(1, "ghost-step-" + f).uint(2, f).toByteArray();
            w.bytes(5, new Proto.Writer().uint(1, Messages.BROKER_DEPARTED).bytes(8, step).toByteArray());
            bridge.frame(client.connection, Messages.NOTIFY, w.uint(2, f).string(4, "e1").toByteArray());
        }
        long grown = usedHeap() - before;
        System.out.println("heap after " + frames + " frames of 20,000 made-up topics: " + (grown >> 10) + " KiB more");
        assertEquals(frames, bridge.frames.get());
        assertEquals(frames * 20_001L, bridge.ignored.get());
        assertEquals(2, bridge.heldVersions());
        assertEquals(0, queue.size());
        assertEquals(0, bridge.resyncs.get());
        assertTrue("heap grew " + grown + " bytes", grown < 8L << 20);
    }

    @Test
    public void versionsAnsweredForTopicsNotAskedForAreNotKept() {
        client.held.add("A");
        for (int i = 0; i < 1000; i++) {
            client.unasked.add("ghost-" + i);
        }
        bridge.tick();
        assertEquals(1, bridge.heldVersions());
        assertEquals(Collections.singletonList("A"), due());
        assertEquals(1000, bridge.ignored.get());
    }

    @Test
    public void gapAfterGapCostsEachTopicOneRefreshPerWindow() {
        client.held.addAll(Arrays.asList("A", "B"));
        bridge.tick();
        due();
        for (int i = 0; i < 1000; i++) {
            bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(2 * i + 1, "e1", "A=1"));
        }
        assertEquals(Arrays.asList("A", "B"), sorted(queue.takeDue(now[0] + 2000)));
        assertEquals(0, queue.size());
    }

    private static long usedHeap() {
        Runtime rt = Runtime.getRuntime();
        for (int i = 0; i < 3; i++) {
            System.gc();
        }
        return rt.totalMemory() - rt.freeMemory();
    }

    private static List<String> sorted(List<String> in) {
        Collections.sort(in);
        return in;
    }
}
