package routepush.agent;

import java.util.Random;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.RejectedExecutionHandler;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The agent's presence in one {@link Host} (a client instance, or a proxy's route cache): its
 * control thread (ticks and frames, in order), its refresh thread, the {@link Bridge} between
 * them, and the {@link FrameInbox} that carries frames from the host's Netty thread to the
 * control thread, bounded in bytes. Two daemon threads per host, both the agent's own.
 */
final class Attachment {
    /** Tasks waiting for the control thread: ticks and drain requests, never frames. */
    static final int CONTROL_QUEUE = 16;
    final Host access;
    final Bridge bridge;
    final RefreshQueue queue;
    final FrameInbox inbox;
    /** Ticks and drains the control thread could not take (it was behind): the next tick does
     * their work. */
    final AtomicLong dropped = new AtomicLong();
    private final ThreadPoolExecutor control;
    private final Runnable drain;
    private final RefreshWorker worker;
    private final String id;

    Attachment(Host access, Options options) {
        this.access = access;
        this.id = access.clientId();
        this.queue = new RefreshQueue(1 << 20);
        this.bridge = new Bridge(access, options, queue, RefreshWorker.SYSTEM, new Random());
        this.inbox = new FrameInbox(options.maxPendingNotifications, options.maxPendingBytes, options.maxFrameBytes);
        RejectedExecutionHandler drop = new RejectedExecutionHandler() {
            @Override
            public void rejectedExecution(Runnable r, ThreadPoolExecutor executor) {
                // The next tick drains the inbox and ticks: nothing is lost but time.
                dropped.incrementAndGet();
            }
        };
        // Holds ticks and drain requests only (frames wait in the inbox), so a few suffice.
        this.control = new ThreadPoolExecutor(1, 1, 0, TimeUnit.MILLISECONDS,
                new ArrayBlockingQueue<Runnable>(CONTROL_QUEUE), daemon("routepush-" + id), drop);
        this.drain = new Runnable() {
            @Override
            public void run() {
                drainInbox();
            }
        };
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
        access.registerFrames(new Remoting.FrameHandler() {
            @Override
            public void frame(Object connection, int code, byte[] body) {
                received(connection, code, body);
            }
        }, Messages.NOTIFY, Messages.GO_AWAY);
        worker.start();
        Log.info("attached to " + access.kind() + " " + access.label());
    }

    /**
     * A frame from the client's Netty thread: kept in the inbox (or counted as lost) and the
     * control thread asked to drain it. Cheap and non-blocking, as the Netty thread needs.
     */
    void received(Object connection, int code, byte[] body) {
        if (inbox.offer(connection, code, body)) {
            control.execute(drain);
        }
    }

    private void drainInbox() {
        try {
            for (FrameInbox.Frame f = inbox.poll(); f != null; f = inbox.poll()) {
                bridge.frame(f.connection, f.code, f.body);
            }
            bridge.lost(inbox.takeLost());
        } catch (Throwable t) {
            Log.warn("drain:" + id, "route-push frame handling failed for " + access.kind() + " " + id, t);
        }
    }

    /** Queues one tick on the control thread (dropped, and counted, if the thread is behind). */
    void tick() {
        control.execute(new Runnable() {
            @Override
            public void run() {
                drainInbox();
                try {
                    bridge.tick();
                } catch (Throwable t) {
                    Log.warn("tick:" + id, "route-push step failed for " + access.kind() + " " + id, t);
                }
            }
        });
    }

    void stop() {
        worker.stop();
        control.shutdownNow();
        Log.info("detached from " + access.kind() + " " + id);
    }

    /** What the agent did for this instance. */
    Counts counts() {
        return Counts.of(bridge, worker, queue, inbox);
    }

    String status() {
        return access.kind() + " " + access.label() + ": at " + bridge.subscribedAt() + (bridge.unsupported() ? " (no push there)" : "")
                + ", " + bridge.subscribedCount() + " topics subscribed, " + bridge.frames.get()
                + " frames, " + worker.refreshed() + " refreshes (" + worker.failed() + " failed, "
                + queue.coalesced() + " coalesced), " + bridge.resyncs.get() + " resyncs, "
                + bridge.malformed.get() + " malformed, " + inbox.dropped() + " frames dropped, "
                + inbox.oversized() + " oversized, " + bridge.foreign.get() + " foreign"
                + (bridge.warmingUp() ? ", server warming up" : "");
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
