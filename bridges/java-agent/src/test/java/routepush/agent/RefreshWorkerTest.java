package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotSame;
import static org.junit.Assert.assertTrue;

import java.util.Collections;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.Test;

public class RefreshWorkerTest {
    @Test
    public void refreshesRunOnTheWorkersThreadNotTheCallers() throws Exception {
        RefreshQueue q = new RefreshQueue(100);
        final List<Thread> threads = new CopyOnWriteArrayList<Thread>();
        final CountDownLatch done = new CountDownLatch(1);
        RefreshWorker w = new RefreshWorker("test-refresh", q, new RefreshWorker.Refresher() {
            @Override
            public void refresh(String topic) {
                threads.add(Thread.currentThread());
                done.countDown();
            }
        }, RefreshWorker.SYSTEM);
        Thread t = w.start();
        try {
            q.offer("T", RefreshWorker.SYSTEM.nowMs());
            assertTrue(done.await(10, TimeUnit.SECONDS));
            assertEquals(Collections.singletonList(t), threads);
            assertNotSame(Thread.currentThread(), threads.get(0));
            assertTrue(t.isDaemon());
        } finally {
            w.stop();
        }
    }

    @Test
    public void whateverARefreshThrowsStaysInTheWorkerWhichGoesOn() throws Exception {
        RefreshQueue q = new RefreshQueue(100);
        final CountDownLatch third = new CountDownLatch(1);
        RefreshWorker w = new RefreshWorker("test-refresh", q, new RefreshWorker.Refresher() {
            @Override
            public void refresh(String topic) throws Exception {
                if (topic.equals("checked")) {
                    throw new Exception("boom");
                }
                if (topic.equals("unchecked")) {
                    throw new IllegalStateException("boom");
                }
                if (topic.equals("error")) {
                    throw new NoClassDefFoundError("boom");
                }
                third.countDown();
            }
        }, RefreshWorker.SYSTEM);
        w.start();
        try {
            long now = RefreshWorker.SYSTEM.nowMs();
            q.offer("checked", now);
            q.offer("unchecked", now + 1);
            q.offer("error", now + 2);
            q.offer("fine", now + 3);
            assertTrue(third.await(10, TimeUnit.SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (w.refreshed() < 1 && System.nanoTime() < deadline) {
                Thread.yield();
            }
            assertEquals(3, w.failed());
            assertEquals(1, w.refreshed());
        } finally {
            w.stop();
        }
    }

    @Test
    public void aSlowRefreshCoalescesTheNotificationsThatArriveMeanwhile() throws Exception {
        final RefreshQueue q = new RefreshQueue(100);
        final CountDownLatch inside = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final List<String> refreshed = new CopyOnWriteArrayList<String>();
        RefreshWorker w = new RefreshWorker("test-refresh", q, new RefreshWorker.Refresher() {
            @Override
            public void refresh(String topic) throws Exception {
                refreshed.add(topic);
                inside.countDown();
                release.await();
            }
        }, RefreshWorker.SYSTEM);
        w.start();
        try {
            q.offer("T", RefreshWorker.SYSTEM.nowMs());
            assertTrue(inside.await(10, TimeUnit.SECONDS));
            for (int i = 0; i < 100; i++) {
                q.offer("T", RefreshWorker.SYSTEM.nowMs());
            }
            release.countDown();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (refreshed.size() < 2 && System.nanoTime() < deadline) {
                Thread.yield();
            }
            // Once more for the 100 notifications, never 100 times, and nothing is left owed.
            q.offer("sentinel", RefreshWorker.SYSTEM.nowMs());
            while (!refreshed.contains("sentinel") && System.nanoTime() < deadline) {
                Thread.yield();
            }
            assertEquals(java.util.Arrays.asList("T", "T", "sentinel"), refreshed);
        } finally {
            w.stop();
        }
    }
}
