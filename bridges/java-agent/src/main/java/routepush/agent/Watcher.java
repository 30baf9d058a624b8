package routepush.agent;

import java.lang.ref.WeakReference;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;

/**
 * Finds every RocketMQ client instance in the JVM and keeps one {@link Attachment} per live one.
 * The clients' own registry ({@code MQClientManager}'s factory table, in every class loader that
 * loaded it) is read every scan interval, so an instance started later is found within one
 * interval; an instance that left the table or shut down is let go.
 */
final class Watcher {
    static final String MANAGER = "org.apache.rocketmq.client.impl.MQClientManager";

    private final Options options;
    private final List<WeakReference<ClassLoader>> loaders = new ArrayList<WeakReference<ClassLoader>>();
    private final Map<Object, Attachment> attached = new IdentityHashMap<Object, Attachment>();
    private final Map<Object, Boolean> refused = new IdentityHashMap<Object, Boolean>();
    private final List<Object> explicit = new ArrayList<Object>();
    private final ConcurrentLinkedQueue<ClassLoader> newLoaders = new ConcurrentLinkedQueue<ClassLoader>();
    private final ScheduledExecutorService scheduler;

    Watcher(Options options) {
        this.options = options;
        this.scheduler = Executors.newSingleThreadScheduledExecutor(new ThreadFactory() {
            @Override
            public Thread newThread(Runnable r) {
                Thread t = new Thread(r, "routepush-scan");
                t.setDaemon(true);
                return t;
            }
        });
    }

    void start() {
        scheduler.scheduleWithFixedDelay(new Runnable() {
            @Override
            public void run() {
                scan();
            }
        }, 0, options.scanIntervalMs, TimeUnit.MILLISECONDS);
    }

    void stop() {
        scheduler.shutdownNow();
        synchronized (this) {
            for (Attachment a : attached.values()) {
                a.stop();
            }
            attached.clear();
        }
    }

    /**
     * Watches the client registry {@code loader} sees (a loader that has none is ignored). Never
     * blocks: it may be called from a thread that is loading a class.
     */
    void addLoader(ClassLoader loader) {
        if (loader != null && newLoaders.size() < 1024) {
            newLoaders.add(loader);
        }
    }

    private void takeLoaders() {
        for (ClassLoader loader = newLoaders.poll(); loader != null; loader = newLoaders.poll()) {
            keepLoader(loader);
        }
    }

    private void keepLoader(ClassLoader loader) {
        for (WeakReference<ClassLoader> ref : loaders) {
            if (ref.get() == loader) {
                return;
            }
        }
        loaders.add(new WeakReference<ClassLoader>(loader));
    }

    /** Serves {@code instance} (an {@code MQClientInstance}) even outside any registry. */
    synchronized void addInstance(Object instance) {
        for (Object o : explicit) {
            if (o == instance) {
                return;
            }
        }
        explicit.add(instance);
        addLoader(instance.getClass().getClassLoader());
    }

    /** Asks for a scan now, off the caller's thread. */
    void scanSoon() {
        try {
            scheduler.execute(new Runnable() {
                @Override
                public void run() {
                    scan();
                }
            });
        } catch (RuntimeException e) {
            // stopped
        }
    }

    synchronized String status() {
        StringBuilder out = new StringBuilder();
        for (Attachment a : attached.values()) {
            out.append(a.status()).append('\n');
        }
        return out.toString();
    }

    synchronized List<Attachment> attachments() {
        return new ArrayList<Attachment>(attached.values());
    }

    synchronized void scan() {
        try {
            takeLoaders();
            Map<Object, Boolean> live = new IdentityHashMap<Object, Boolean>();
            for (WeakReference<ClassLoader> ref : new ArrayList<WeakReference<ClassLoader>>(loaders)) {
                ClassLoader loader = ref.get();
                if (loader == null) {
                    loaders.remove(ref);
                    continue;
                }
                for (Object instance : registry(loader)) {
                    live.put(instance, Boolean.TRUE);
                }
            }
            for (Object instance : explicit) {
                live.put(instance, Boolean.TRUE);
            }
            for (Object instance : new ArrayList<Object>(attached.keySet())) {
                Attachment a = attached.get(instance);
                if (!live.containsKey(instance) || a.access.stoppedForGood()) {
                    a.stop();
                    attached.remove(instance);
                    explicit.remove(instance);
                }
            }
            for (Object instance : live.keySet()) {
                if (!attached.containsKey(instance) && !refused.containsKey(instance)) {
                    attach(instance);
                }
            }
            for (Attachment a : attached.values()) {
                a.tick();
            }
        } catch (Throwable t) {
            Log.warn("scan", "scanning RocketMQ clients failed", t);
        }
    }

    private void attach(Object instance) {
        try {
            ClientAccess access = ClientAccess.of(instance);
            if (access.stoppedForGood()) {
                return; // shut down, still in the registry for a moment: nothing to serve
            }
            Attachment a = new Attachment(access, options);
            a.start();
            attached.put(instance, a);
        } catch (Throwable t) {
            if (refused.size() > 1024) {
                refused.clear();
            }
            refused.put(instance, Boolean.TRUE);
            Log.warn("attach", "cannot serve RocketMQ client " + instance.getClass().getName() + " (client "
                    + ClientVersion.of(instance.getClass().getClassLoader()) + "); it keeps its 30 s poll", t);
        }
    }

    /** The instances in {@code MQClientManager}'s factory table as {@code loader} sees it. */
    private static Iterable<Object> registry(ClassLoader loader) {
        List<Object> out = new ArrayList<Object>();
        try {
            Class<?> manager = Class.forName(MANAGER, false, loader);
            Object singleton = manager.getMethod("getInstance").invoke(null);
            Field table = manager.getDeclaredField("factoryTable");
            table.setAccessible(true);
            Map<?, ?> map = (Map<?, ?>) table.get(singleton);
            if (map != null) {
                out.addAll(map.values());
            }
        } catch (ClassNotFoundException e) {
            // this loader sees no RocketMQ client (yet)
        } catch (Throwable t) {
            Log.warn("registry", "cannot read the RocketMQ client registry", t);
        }
        return out;
    }
}
