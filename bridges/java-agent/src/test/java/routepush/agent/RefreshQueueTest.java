package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.Test;

public class RefreshQueueTest {
    @Test
    public void aBurstForOneTopicCostsOneRefresh() {
        RefreshQueue q = new RefreshQueue(100);
        assertTrue(q.offer("T", 10));
        for (int i = 0; i < 50; i++) {
            assertFalse(q.offer("T", 10 + i));
        }
        assertEquals(Arrays.asList("T"), q.takeDue(100));
        assertEquals(50, q.coalesced());
        assertEquals(0, q.size());
    }

    @Test
    public void anEarlierOfferMovesTheTopicForward() {
        RefreshQueue q = new RefreshQueue(100);
        q.offer("T", 500);
        q.offer("T", 20);
        assertEquals(20, q.nextDue());
        assertEquals(Arrays.asList("T"), q.takeDue(20));
    }

    @Test
    public void aTopicOfferedWhileItsRefreshRunsIsRefreshedAgain() {
        RefreshQueue q = new RefreshQueue(100);
        q.offer("T", 0);
        assertEquals(Arrays.asList("T"), q.takeDue(0));
        // the refresh of T is now running; a notification arrives
        assertTrue(q.offer("T", 1));
        assertEquals(Arrays.asList("T"), q.takeDue(1));
    }

    @Test
    public void nothingIsTakenBeforeItIsDue() {
        RefreshQueue q = new RefreshQueue(100);
        q.offer("A", 100);
        q.offer("B", 50);
        assertEquals(new ArrayList<String>(), q.takeDue(49));
        assertEquals(Arrays.asList("B", "A"), q.takeDue(100));
    }

    @Test
    public void aSpreadStaysInsideItsWindowAndOwesEachTopicOnce() {
        RefreshQueue q = new RefreshQueue(1000);
        List<String> topics = new ArrayList<String>();
        for (int i = 0; i < 100; i++) {
            topics.add("T" + i);
        }
        q.offerSpread(topics, 1000, 500, new Random(7));
        assertEquals(100, q.size());
        assertTrue(q.nextDue() >= 1000);
        assertEquals(new ArrayList<String>(), q.takeDue(999));
        // n / window = 0.2 per millisecond: the first 10 ms hold about two, never all.
        int early = q.takeDue(1010).size();
        assertTrue("early " + early, early <= 4);
        assertEquals(100, early + q.takeDue(1500).size());
        assertEquals(0, q.size());
    }

    @Test
    public void pastItsBoundAnOfferIsRefusedAndCounted() {
        RefreshQueue q = new RefreshQueue(2);
        q.offer("A", 0);
        q.offer("B", 0);
        assertFalse(q.offer("C", 0));
        assertEquals(1, q.refused());
        assertEquals(2, q.size());
    }
}
