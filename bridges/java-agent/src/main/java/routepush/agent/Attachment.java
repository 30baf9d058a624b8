package routepush.agent;

import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionHandler;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The agent's presence in one client instance: its control thread (ticks and frames, in order,
 * bounded), its refresh thread, and the {@link Bridge} between them. Two daemon threads per
 * instance, both the agent's own.
 */
final class Attachment {
    final ClientAccess access;
    final Bridge bridge;
    final RefreshQueue queue;
    final AtomicLong dropped = new AtomicLong();
    private final ThreadPoolExecutor control;
    private final RefreshWorker worker;
    private final String id;

    Attachment(ClientAccess access, Options options) {
        this.access = access;
        this.id = access.clientId();
        this.queue = new RefreshQueue(1 << 20);
        this.bridge = new Bridge(access, options, queue, RefreshWorker.SYSTEM, new Random());
        RejectedExecutionHandler drop = new RejectedExecutionHandler() {
            @Override
            public void rejectedExecution(Runnable r, ThreadPoolExecutor executor) {
                // A frame dropped here shows as a sequence gap in the next one, which refetches
                // every held topic; a tick dropped is done by the next.
                dropped.incrementAndGet();
            }
        };
        this.control = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<Runnable>(options.maxPendingNotifications), daemon("routepush-" + id), drop);
        this.worker = new RefreshWorker("routepush-refresh-" + id, queue, new RefreshWorker.Refresher() {
            @Override
            public void refresh(String topic) throws Exception {
                if (access.refresh(topic) && access.hasConsumers()) {
                    access.rebalanceNow();
                }
            }
        }, RefreshWorker.SYSTEM);
    }

    void start() throws ReflectiveOperationException {
        access.registerFrames(new ClientAccess.FrameHandler() {
            @Override
            public void frame(Object connection, int code, byte[] body) {
                bridge.frame(connection, code, body);
            }
        }, control, Messages.NOTIFY, Messages.GO_AWAY);
        worker.start();
        Log.info("attached to client " + id + " (RocketMQ client " + access.version.text + ")");
    }

    /** Queues one tick on the control thread (dropped, and counted, if the thread is behind). */
    void tick() {
        control.execute(new Runnable() {
            @Override
            public void run() {
                try {
                    bridge.tick();
                } catch (Throwable t) {
                    Log.warn("tick:" + id, "route-push step failed for client " + id, t);
                }
            }
        });
    }

    void stop() {
        worker.stop();
        control.shutdownNow();
        Log.info("detached from client " + id);
    }

    String status() {
        return id + ": at " + bridge.subscribedAt() + (bridge.unsupported() ? " (no push there)" : "")
                + ", " + bridge.subscribedTopics().size() + " topics subscribed, " + bridge.frames.get()
                + " frames, " + worker.refreshed() + " refreshes (" + worker.failed() + " failed, "
                + queue.coalesced() + " coalesced), " + bridge.resyncs.get() + " resyncs, "
                + bridge.malformed.get() + " malformed, " + dropped.get() + " dropped";
    }

    private static ThreadFactory daemon(final String name) {
        return new ThreadFactory() {
            @Override
            public Thread newThread(Runnable r) {
                Thread t = new Thread(r, name);
                t.setDaemon(true);
                return t;
            }
        };
    }
}
