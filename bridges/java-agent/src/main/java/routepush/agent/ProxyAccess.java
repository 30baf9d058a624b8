package routepush.agent;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentMap;

/**
 * {@link Host} over a RocketMQ 5.x proxy's route cache: the {@code topicCache} of its
 * {@code TopicRouteService} (a Caffeine {@code LoadingCache} from topic, or broker name, to
 * {@code MessageQueueView}), through which the proxy picks the broker of every send it forwards
 * ({@code getBrokerAddr} reads the broker name's entry). The held topics are the cache's keys;
 * the subscriptions live on the first route-lookup client of the service's own
 * {@code MQClientAPIFactory}, so they go to the proxy's own name servers.
 *
 * <p>A refresh looks the route up on that client, builds the value as the proxy's loader does,
 * and replaces the entry only when it is still cached and the new route is a usable one: an
 * answer with no route (TOPIC_NOT_EXIST, or no queues or brokers) never replaces a cached route,
 * and an entry the proxy evicted is not brought back (its next use loads it). The proxy's own
 * refresh after write stays as it is, the safety net for whatever push misses.
 */
final class ProxyAccess implements Host {
    static final String ROUTE_SERVICE = "org.apache.rocketmq.proxy.service.route.TopicRouteService";
    static final String LOCAL_ROUTE_SERVICE = "org.apache.rocketmq.proxy.service.route.LocalTopicRouteService";
    private static final String CACHE = "com.github.benmanes.caffeine.cache.Cache";
    private static final String VIEW = "org.apache.rocketmq.proxy.service.route.MessageQueueView";
    private static final String ROUTE = "org.apache.rocketmq.remoting.protocol.route.TopicRouteData";

    /** The route service is built but its lookup clients are not started yet: try at a later scan. */
    static final class NotStarted extends Exception {
        private static final long serialVersionUID = 1L;

        NotStarted() {
            super("the proxy's route-lookup clients are not started yet");
        }
    }

    private final Object service;
    private final ConcurrentMap<Object, Object> cache;
    private final Remoting remoting;
    private final Object api;
    private final Method lookup;
    private final Method queueDatas;
    private final Method brokerDatas;
    /** {@code TopicRouteService.buildMessageQueueView} (5.1.4 on), or null. */
    private final Method build;
    /** {@code MessageQueueView(String, TopicRouteData)} (5.1.0 to 5.1.3), when {@link #build} is null. */
    private final Constructor<?> view;
    private final Method emptyView;
    private final long timeoutMs;
    final ClientVersion version;
    private final String id;

    @SuppressWarnings("unchecked")
    private ProxyAccess(Object service, long timeoutMs) throws Exception {
        this.service = service;
        this.timeoutMs = timeoutMs;
        Class<?> type = service.getClass();
        ClassLoader loader = type.getClassLoader();
        version = ClientVersion.of(loader);
        if (version.major != 5) {
            throw new NoSuchMethodException("a proxy of RocketMQ " + version.text + ", not 5.x");
        }
        Object topicCache = Remoting.field(type, "topicCache").get(service);
        Method asMap = Class.forName(CACHE, false, loader).getMethod("asMap");
        cache = (ConcurrentMap<Object, Object>) asMap.invoke(topicCache);
        Object factory = Remoting.field(type, "mqClientAPIFactory").get(service);
        Object[] clients = (Object[]) Remoting.field(factory.getClass(), "clients").get(factory);
        if (clients == null || clients.length == 0 || clients[0] == null) {
            throw new NotStarted();
        }
        api = clients[0];
        remoting = Remoting.ofApi(api, loader);
        lookup = api.getClass().getMethod("getTopicRouteInfoFromNameServer", String.class, long.class);
        Class<?> routeType = Class.forName(ROUTE, false, loader);
        queueDatas = routeType.getMethod("getQueueDatas");
        brokerDatas = routeType.getMethod("getBrokerDatas");
        Class<?> viewType = Class.forName(VIEW, false, loader);
        emptyView = viewType.getMethod("isEmptyCachedQueue");
        build = method(type, "buildMessageQueueView", String.class, routeType);
        view = build == null ? viewType.getConstructor(String.class, routeType) : null;
        id = type.getSimpleName() + "@" + Watcher.pid();
    }

    /**
     * Access to the route cache of {@code service} (a {@code TopicRouteService}); throws
     * {@link NotStarted} before the proxy started it, and another exception when a member the
     * agent needs is missing (another proxy version: the proxy is then left alone).
     */
    static ProxyAccess of(Object service, long timeoutMs) throws Exception {
        return new ProxyAccess(service, timeoutMs);
    }

    /** Whether {@code service} is a local-mode route service (the proxy embeds its broker). */
    static boolean local(Object service) {
        for (Class<?> c = service.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getName().equals(LOCAL_ROUTE_SERVICE)) {
                return true;
            }
        }
        return false;
    }

    Object service() {
        return service;
    }

    @Override
    public Remoting remoting() {
        return remoting;
    }

    @Override
    public String kind() {
        return "proxy";
    }

    @Override
    public String label() {
        return id + " (RocketMQ proxy " + version.text + ")";
    }

    @Override
    public String ownRefresh() {
        return "the proxy's own route refresh";
    }

    @Override
    public String clientId() {
        return id;
    }

    @Override
    public boolean running() {
        return true;
    }

    @Override
    public boolean stoppedForGood() {
        return false;
    }

    /** The cache's keys: the topics the proxy serves and the broker names it resolves. */
    @Override
    public Set<String> heldTopics() {
        Set<String> out = new HashSet<String>();
        for (Object key : cache.keySet()) {
            out.add(String.valueOf(key));
        }
        return out;
    }

    /** The name server of the lookup client's next request; before its first, the first given. */
    @Override
    public String nameServer() {
        String chosen = remoting.nameServer();
        if (chosen != null) {
            return chosen;
        }
        List<String> all = remoting.nameServers();
        return all.isEmpty() ? null : all.get(0);
    }

    /**
     * Reloads the entry of {@code topic}: true when it was replaced. Throws (and the entry stays)
     * when the lookup fails or finds no usable route.
     */
    @Override
    public boolean refresh(String topic) throws Exception {
        if (!cache.containsKey(topic)) {
            return false; // evicted: the proxy loads it again on its next use
        }
        Object route;
        try {
            route = lookup.invoke(api, topic, timeoutMs);
        } catch (InvocationTargetException e) {
            throw Remoting.unwrap(e);
        }
        if (!usable(route)) {
            throw new IllegalStateException("the name server's route of " + topic
                    + " has no queues or no brokers; the proxy's cached route is kept");
        }
        Object fresh;
        try {
            fresh = build != null ? build.invoke(service, topic, route) : view.newInstance(topic, route);
        } catch (InvocationTargetException e) {
            throw Remoting.unwrap(e);
        }
        if (fresh == null || Boolean.TRUE.equals(emptyView.invoke(fresh))) {
            throw new IllegalStateException("the proxy built no route for " + topic + "; its cached route is kept");
        }
        return cache.replace(topic, fresh) != null;
    }

    private boolean usable(Object route) throws ReflectiveOperationException {
        if (route == null) {
            return false;
        }
        Object queues = queueDatas.invoke(route);
        Object brokers = brokerDatas.invoke(route);
        return queues instanceof Collection && !((Collection<?>) queues).isEmpty()
                && brokers instanceof Collection && !((Collection<?>) brokers).isEmpty();
    }

    @Override
    public void rebalanceNow() {
    }

    @Override
    public boolean hasConsumers() {
        return false;
    }

    /** The method {@code name} declared by {@code type} or a superclass, made accessible; null if none. */
    private static Method method(Class<?> type, String name, Class<?>... params) {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                Method m = c.getDeclaredMethod(name, params);
                m.setAccessible(true);
                return m;
            } catch (NoSuchMethodException e) {
                // look in the superclass
            }
        }
        return null;
    }
}
