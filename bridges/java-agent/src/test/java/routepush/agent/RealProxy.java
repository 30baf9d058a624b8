package routepush.agent;

import java.io.File;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.Map;

/**
 * A real RocketMQ 5.x proxy in cluster mode, in a class loader of its own, built the way its
 * {@code ProxyStartup.main} builds it (its configuration, {@code createMessagingProcessor()}, its
 * start-and-shutdown list started) but with no gRPC or remoting server: its route service, its
 * route cache and its lookup clients are the real ones, against the name server given.
 */
final class RealProxy implements AutoCloseable {
    private static final String PROXY = "org.apache.rocketmq.proxy.";
    private static final String CONFIG_PATH = "com.rocketmq.proxy.configPath";
    private static final String NAMESRV_PROPERTY = "rocketmq.namesrv.addr";

    final URLClassLoader loader;
    private final Object lifecycle;
    private final Object routeService;
    private final Object topicCache;
    private final File config;
    private final String savedNamesrv;

    RealProxy(File lib, String namesrv) throws Exception {
        loader = RealJars.loader(lib);
        config = File.createTempFile("rmq-proxy", ".json");
        Files.write(config.toPath(), ("{\"namesrvAddr\":\"" + namesrv + "\",\"proxyMode\":\"cluster\","
                + "\"rocketMQClusterName\":\"c\"}").getBytes(StandardCharsets.UTF_8));
        savedNamesrv = System.getProperty(NAMESRV_PROPERTY);
        System.setProperty(CONFIG_PATH, config.getPath());
        ClassLoader before = Thread.currentThread().getContextClassLoader();
        Thread.currentThread().setContextClassLoader(loader);
        try {
            Class<?> manager = loader.loadClass(PROXY + "config.ConfigurationManager");
            manager.getMethod("initEnv").invoke(null);
            manager.getMethod("intConfig").invoke(null);
            Class<?> startup = loader.loadClass(ProxyFinder.STARTUP);
            Method create = startup.getDeclaredMethod("createMessagingProcessor");
            create.setAccessible(true);
            Object processor = create.invoke(null);
            lifecycle = field(startup, "PROXY_START_AND_SHUTDOWN").get(null);
            lifecycle.getClass().getMethod("start").invoke(lifecycle);
            Object services = field(processor.getClass(), "serviceManager").get(processor);
            routeService = field(services.getClass(), "topicRouteService").get(services);
            topicCache = field(routeService.getClass(), "topicCache").get(routeService);
        } finally {
            Thread.currentThread().setContextClassLoader(before);
            System.clearProperty(CONFIG_PATH);
        }
    }

    Object routeService() {
        return routeService;
    }

    /** The route cache as a map: topic or broker name to {@code MessageQueueView}. */
    Map<?, ?> cache() throws Exception {
        return (Map<?, ?>) cacheMethod("asMap").invoke(topicCache);
    }

    /** What a send or a route query does: the entry of {@code key}, loaded when absent. */
    Object load(String key) throws Exception {
        return loader.loadClass("com.github.benmanes.caffeine.cache.LoadingCache").getMethod("get", Object.class)
                .invoke(topicCache, key);
    }

    void invalidate(String key) throws Exception {
        cacheMethod("invalidate", Object.class).invoke(topicCache, key);
    }

    /**
     * The master address the proxy forwards a send for {@code brokerName} to:
     * {@code getBrokerAddr(ctx, brokerName)}, or {@code getBrokerAddr(brokerName)} before 5.1.2.
     */
    String brokerAddr(String brokerName) throws Exception {
        Class<?> ctxType = loader.loadClass(PROXY + "common.ProxyContext");
        try {
            Method m = routeService.getClass().getMethod("getBrokerAddr", ctxType, String.class);
            return (String) m.invoke(routeService, ctxType.getMethod("create").invoke(null), brokerName);
        } catch (NoSuchMethodException e) {
            return (String) routeService.getClass().getMethod("getBrokerAddr", String.class)
                    .invoke(routeService, brokerName);
        }
    }

    /** Whether the entry of {@code key} is the proxy's "no route" value. */
    boolean empty(Object view) throws Exception {
        return (Boolean) view.getClass().getMethod("isEmptyCachedQueue").invoke(view);
    }

    private Method cacheMethod(String name, Class<?>... params) throws Exception {
        return loader.loadClass("com.github.benmanes.caffeine.cache.Cache").getMethod(name, params);
    }

    private static Field field(Class<?> type, String name) throws NoSuchFieldException {
        return Remoting.field(type, name);
    }

    @Override
    public void close() throws Exception {
        try {
            lifecycle.getClass().getMethod("shutdown").invoke(lifecycle);
        } finally {
            if (savedNamesrv == null) {
                System.clearProperty(NAMESRV_PROPERTY);
            } else {
                System.setProperty(NAMESRV_PROPERTY, savedNamesrv);
            }
            loader.close();
            config.delete();
        }
    }
}
