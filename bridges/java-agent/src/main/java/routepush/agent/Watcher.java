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
import javax.management.ObjectName;

/**
 * Finds every RocketMQ client instance in the JVM and keeps one {@link Attachment} per live one.
 * The clients' own registry ({@code MQClientManager}'s factory table, in every class loader that
 * loaded it) is read every scan interval, so an instance started later is found within one
 * interval; an instance that left the table or shut down is let go.
 *
 * <p>In a RocketMQ 5.x proxy it also finds the proxy's route cache ({@link ProxyHosts}) and
 * serves it as a host of its own ({@link ProxyAccess}), in cluster mode only: in local mode the
 * proxy forwards every send to the broker it embeds, whatever its route cache says.
 */
final class Watcher implements AgentStatus.Source {
    static final String MANAGER = "org.apache.rocketmq.client.impl.MQClientManager";

    private final Options options;
    private final List<WeakReference<ClassLoader>> loaders = new ArrayList<WeakReference<ClassLoader>>();
    private final Map<Object, Attachment> attached = new IdentityHashMap<Object, Attachment>();
    private final Map<Object, Boolean> refused = new IdentityHashMap<Object, Boolean>();
    private final List<Object> explicit = new ArrayList<Object>();
    private final ConcurrentLinkedQueue<ClassLoader> newLoaders = new ConcurrentLinkedQueue<ClassLoader>();
    private final ProxyHosts proxies = new ProxyHosts();
    private final ScheduledExecutorService scheduler;
    /** The counters of instances let go, so the totals never go down. */
    private final Counts retired = new Counts();
    private final AgentStatus mbean = new AgentStatus(this);

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
        if (options.statusIntervalMs > 0) {
            scheduler.scheduleAtFixedRate(new Runnable() {
                @Override
                public void run() {
                    logStatus();
                }
            }, options.statusIntervalMs, options.statusIntervalMs, TimeUnit.MILLISECONDS);
        }
    }

    void stop() {
        scheduler.shutdownNow();
        synchronized (this) {
            for (Attachment a : attached.values()) {
                a.stop();
            }
            attached.clear();
        }
        mbean.unregister();
    }

    /** The status MBean; registered once the first client instance is served. */
    AgentStatus mbean() {
        return mbean;
    }

    /** One INFO line with the totals (the periodic status line). */
    void logStatus() {
        try {
            Log.info(AgentStatus.summary(totals()));
        } catch (Throwable t) {
            Log.warn("status", "route push status not logged", t);
        }
    }

    @Override
    public synchronized Counts totals() {
        Counts sum = new Counts();
        sum.add(retired, false);
        for (Attachment a : attached.values()) {
            sum.add(a.counts(), true);
        }
        return sum;
    }

    @Override
    public synchronized String[] clientLines() {
        List<String> out = new ArrayList<String>();
        for (Attachment a : attached.values()) {
            out.add(a.status());
        }
        return out.toArray(new String[0]);
    }

    @Override
    public String options() {
        return options.summary();
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

    /**
     * Looks for a proxy's route service in {@code loader}, which defined the proxy's
     * {@code ProxyStartup} (the proxy runs there). Never blocks, as {@link #addLoader}.
     */
    void addProxyLoader(ClassLoader loader) {
        proxies.offer(loader);
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
            for (Object service : proxies.scan()) {
                live.put(service, Boolean.TRUE);
            }
            for (Object instance : new ArrayList<Object>(attached.keySet())) {
                Attachment a = attached.get(instance);
                if (!live.containsKey(instance) || a.access.stoppedForGood()) {
                    retired.add(a.counts(), false);
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
        if (proxies.holds(instance)) {
            attachProxy(instance);
            return;
        }
        try {
            ClientAccess access = ClientAccess.of(instance);
            if (access.stoppedForGood()) {
                return; // shut down, still in the registry for a moment: nothing to serve
            }
            serve(instance, access);
        } catch (Throwable t) {
            refuse(instance);
            Log.warn("attach", "cannot serve RocketMQ client " + instance.getClass().getName() + " (client "
                    + ClientVersion.of(instance.getClass().getClassLoader()) + "); it keeps its 30 s poll", t);
        }
    }

    /**
     * Serves a proxy's route service, in cluster mode. In local mode the proxy forwards every
     * send to the broker it embeds ({@code getBrokerAddr} answers that broker, not the cache),
     * so push could change no send's broker: one line says so and the proxy is left alone.
     */
    private void attachProxy(Object service) {
        ClientVersion version = ClientVersion.of(service.getClass().getClassLoader());
        if (ProxyAccess.local(service)) {
            refuse(service);
            Log.once("proxy-local:" + System.identityHashCode(service.getClass().getClassLoader()), "the RocketMQ"
                    + " proxy (" + version.text + ") runs in local mode: it forwards every send to the broker it"
                    + " embeds, not by its route cache, so route push leaves it alone");
            return;
        }
        try {
            serve(service, ProxyAccess.of(service, options.requestTimeoutMs));
        } catch (ProxyAccess.NotStarted e) {
            // built, not started yet: the next scan tries again
        } catch (Throwable t) {
            refuse(service);
            Log.warn("attach-proxy", "cannot serve the route cache of the RocketMQ proxy " + service.getClass().getName()
                    + " (" + version.text + "); the proxy runs as before, with its own route refresh", t);
        }
    }

    private void refuse(Object instance) {
        if (refused.size() > 1024) {
            refused.clear();
        }
        refused.put(instance, Boolean.TRUE);
    }

    private void serve(Object instance, Host access) throws ReflectiveOperationException {
        Attachment a = new Attachment(access, options);
        a.start();
        attached.put(instance, a);
        if (options.jmx && mbean.name() == null) {
            // Registered with the first host served, not at premain: an application server may
            // install its own MBean server builder while it starts, which creating the platform
            // MBean server earlier would break; by now the application runs.
            ObjectName name = mbean.register();
            if (name != null) {
                Log.info("status MBean " + name + " registered (jconsole, or java -jar "
                        + "rocketmq-routepush-agent.jar " + pid() + ")");
            }
        }
    }

    /** This JVM's process id, for the operator's status command; "PID" when unknown. */
    static String pid() {
        String name = java.lang.management.ManagementFactory.getRuntimeMXBean().getName();
        int at = name.indexOf('@');
        return at > 0 ? name.substring(0, at) : "PID";
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
