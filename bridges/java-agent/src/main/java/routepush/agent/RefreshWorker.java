package routepush.agent;

import java.util.concurrent.atomic.AtomicLong;

/**
 * The one thread per client instance that refreshes routes: it takes due topics from a
 * {@link RefreshQueue} and hands each to the client's own refresh, one at a time. The client's
 * refresh blocks (a name-server round trip), which is why it never runs on Netty's I/O thread or
 * the application's. Whatever a refresh throws is logged, counted and contained.
 */
final class RefreshWorker implements Runnable {
    /** Refreshes one topic's route; may block and may throw. */
    interface Refresher {
        void refresh(String topic) throws Exception;
    }

    /** Milliseconds on a monotonic clock. */
    interface Clock {
        long nowMs();
    }

    static final Clock SYSTEM = new Clock() {
        @Override
        public long nowMs() {
            return System.nanoTime() / 1_000_000L;
        }
    };

    private final RefreshQueue queue;
    private final Refresher refresher;
    private final Clock clock;
    private final String name;
    private final AtomicLong refreshed = new AtomicLong();
    private final AtomicLong failed = new AtomicLong();
    private volatile boolean running = true;
    private volatile Thread thread;

    RefreshWorker(String name, RefreshQueue queue, Refresher refresher, Clock clock) {
        this.name = name;
        this.queue = queue;
        this.refresher = refresher;
        this.clock = clock;
    }

    Thread start() {
        Thread t = new Thread(this, name);
        t.setDaemon(true);
        thread = t;
        t.start();
        return t;
    }

    void stop() {
        running = false;
        Thread t = thread;
        if (t != null) {
            t.interrupt();
        }
    }

    long refreshed() {
        return refreshed.get();
    }

    long failed() {
        return failed.get();
    }

    @Override
    public void run() {
        while (running) {
            try {
                queue.await(clock.nowMs(), 1000);
                for (String topic : queue.takeDue(clock.nowMs())) {
                    if (!running) {
                        return;
                    }
                    refreshOne(topic);
                }
            } catch (InterruptedException e) {
                return;
            } catch (Throwable t) {
                Log.warn("worker:" + name, "refresh loop error, continuing", t);
            }
        }
    }

    private void refreshOne(String topic) {
        try {
            refresher.refresh(topic);
            refreshed.incrementAndGet();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            running = false;
        } catch (Throwable t) {
            failed.incrementAndGet();
            Log.warn("refresh:" + name, "refreshing the route of " + Log.peer(topic) + " failed", t);
        }
    }
}
