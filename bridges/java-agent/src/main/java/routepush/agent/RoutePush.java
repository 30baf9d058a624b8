package routepush.agent;

import java.lang.instrument.Instrumentation;
import java.lang.reflect.Method;

/**
 * Route push for the RocketMQ Java clients of this JVM.
 *
 * <p>As an agent ({@code -javaagent:rocketmq-routepush-agent.jar}) nothing else is needed. As a
 * library, one call serves a producer or consumer: {@code RoutePush.attach(producer)}, before or
 * after its {@code start()}. Every client instance of the same class loader is served from then on.
 *
 * <p>No method here throws: a failure is logged and the application goes on with the client's
 * own 30 s route poll. A mistake in the options is a warning naming it, never push turned off.
 */
public final class RoutePush {
    private static Watcher watcher;

    private RoutePush() {
    }

    /** Starts serving the clients visible to this library's and the calling thread's class loaders. */
    public static synchronized boolean install() {
        try {
            Watcher w = ensure(null, "as a library");
            if (w == null) {
                return false;
            }
            w.addLoader(RoutePush.class.getClassLoader());
            w.addLoader(Thread.currentThread().getContextClassLoader());
            w.scanSoon();
            return true;
        } catch (Throwable t) {
            Log.warn("install", "route push not installed", t);
            return false;
        }
    }

    /**
     * Serves the client instance behind {@code client}: a {@code DefaultMQProducer},
     * {@code DefaultMQPushConsumer}, {@code DefaultLitePullConsumer}, {@code DefaultMQPullConsumer}
     * or an {@code MQClientInstance}. Called before the client's {@code start()}, the instance is
     * served once it exists. Returns false (and logs why) when nothing will be served.
     */
    public static synchronized boolean attach(Object client) {
        try {
            if (client == null) {
                return false;
            }
            Watcher w = ensure(null, "as a library");
            if (w == null) {
                return false;
            }
            Object instance = instanceOf(client);
            if (instance != null) {
                w.addInstance(instance);
            } else {
                w.addLoader(client.getClass().getClassLoader());
            }
            w.scanSoon();
            return true;
        } catch (Throwable t) {
            Log.warn("attach", "route push not attached to " + client, t);
            return false;
        }
    }

    /** One line per served client instance: where it subscribed and what the agent did. */
    public static synchronized String status() {
        return watcher == null ? "" : watcher.status();
    }

    /** Stops every thread of the agent; the clients go on with their own poll. */
    public static synchronized void shutdown() {
        if (watcher != null) {
            watcher.stop();
            watcher = null;
        }
    }

    /** The agent's entry: options, then every class loader that loads the client registry. */
    static synchronized void start(String agentArgs, Instrumentation inst) {
        Watcher w = ensure(agentArgs, "as an agent");
        if (w == null) {
            return;
        }
        if (inst != null) {
            inst.addTransformer(new LoaderSpy(w));
            for (Class<?> c : inst.getAllLoadedClasses()) {
                if (Watcher.MANAGER.equals(c.getName())) {
                    w.addLoader(c.getClassLoader());
                } else if (ProxyFinder.STARTUP.equals(c.getName())) {
                    w.addProxyLoader(c.getClassLoader());
                }
            }
        }
        w.addLoader(ClassLoader.getSystemClassLoader());
    }

    static synchronized Watcher watcher() {
        return watcher;
    }

    /**
     * The running watcher, started on the first call from the options ({@code agentArgs} over
     * the system properties). That first call logs each option mistake as a WARNING and the
     * start line at INFO: the agent's version, the client versions it serves, the options that
     * differ from the defaults.
     */
    private static Watcher ensure(String agentArgs, String how) {
        if (watcher != null) {
            return watcher;
        }
        Options options = Options.parse(agentArgs, System.getProperties());
        for (String warning : options.warnings) {
            Log.LOGGER.warning("[routepush] " + warning);
        }
        if (!options.enabled) {
            Log.info("route push " + AgentVersion.text() + " off (enabled=false): no client is touched");
            return null;
        }
        watcher = new Watcher(options);
        watcher.start();
        Log.info(startLine(how, options));
        return watcher;
    }

    static String startLine(String how, Options options) {
        return "route push " + AgentVersion.text() + " started " + how + " for Apache RocketMQ Java clients "
                + AgentVersion.CLIENTS + " and proxies " + AgentVersion.PROXIES + "; options: " + options.summary() + "; status: MBean "
                + AgentStatus.NAME + (options.jmx ? " once a client is served" : " off (jmx=false)")
                + (options.statusIntervalMs > 0 ? ", a status line every " + options.statusIntervalMs + " ms" : "");
    }

    /** The {@code MQClientInstance} behind a producer or consumer, or null if not created yet. */
    static Object instanceOf(Object client) {
        if (client.getClass().getName().endsWith(".MQClientInstance")) {
            return client;
        }
        String[][] paths = {
            {"getDefaultMQProducerImpl", "getMqClientFactory"},
            {"getDefaultMQPushConsumerImpl", "getmQClientFactory"},
            {"getDefaultLitePullConsumerImpl", "getmQClientFactory"},
            {"getDefaultMQPullConsumerImpl", "getmQClientFactory"},
        };
        for (String[] path : paths) {
            Object at = client;
            for (String name : path) {
                at = call(at, name);
                if (at == null) {
                    break;
                }
            }
            if (at != null) {
                return at;
            }
        }
        return null;
    }

    private static Object call(Object target, String name) {
        try {
            Method m = target.getClass().getMethod(name);
            m.setAccessible(true);
            return m.invoke(target);
        } catch (Throwable t) {
            return null;
        }
    }
}
