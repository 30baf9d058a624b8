package routepush.agent;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * {@link ClientPort} over a live {@code MQClientInstance}, by reflection in the instance's own
 * class loader: the agent links against no RocketMQ class, so one jar serves 4.9.x and 5.x
 * clients, whatever loader (application, fat jar, container) holds them. Every member it uses is
 * resolved once, when the instance is attached; one that is missing makes {@link #of} fail and
 * the instance is left alone.
 */
final class ClientAccess implements ClientPort {
    private static final String REMOTING = "org.apache.rocketmq.remoting.";

    /** Receives the extension's oneway frames from the client's Netty pipeline. */
    interface FrameHandler {
        void frame(Object connection, int code, byte[] body);
    }

    private final Object instance;
    private final Object remoting;
    final ClientVersion version;
    private final Method clientId;
    private final Method routeTable;
    private final Method refresh;
    private final Method rebalance;
    private final Field serviceState;
    private final Field consumerTable;
    private final Field chosen;
    private final Field addrList;
    private final Field channels;
    private final Method createRequest;
    private final Method setBody;
    private final Method getCode;
    private final Method getBody;
    private final Method getRemark;
    private final Method invokeSync;
    private final Method registerProcessor;
    private final Class<?> processorType;
    private final Class<?> commandType;

    private ClientAccess(Object instance) throws ReflectiveOperationException {
        this.instance = instance;
        Class<?> type = instance.getClass();
        ClassLoader loader = type.getClassLoader();
        version = ClientVersion.of(loader);
        clientId = type.getMethod("getClientId");
        routeTable = type.getMethod("getTopicRouteTable");
        refresh = type.getMethod("updateTopicRouteInfoFromNameServer", String.class);
        rebalance = type.getMethod("rebalanceImmediately");
        serviceState = field(type, "serviceState");
        consumerTable = field(type, "consumerTable");
        Object api = type.getMethod("getMQClientAPIImpl").invoke(instance);
        remoting = api.getClass().getMethod("getRemotingClient").invoke(api);
        Class<?> client = remoting.getClass();
        chosen = field(client, "namesrvAddrChoosed");
        addrList = field(client, "namesrvAddrList");
        channels = field(client, "channelTables");
        commandType = Class.forName(REMOTING + "protocol.RemotingCommand", false, loader);
        Class<?> headerType = Class.forName(REMOTING + "CommandCustomHeader", false, loader);
        createRequest = commandType.getMethod("createRequestCommand", int.class, headerType);
        setBody = commandType.getMethod("setBody", byte[].class);
        getCode = commandType.getMethod("getCode");
        getBody = commandType.getMethod("getBody");
        getRemark = commandType.getMethod("getRemark");
        invokeSync = client.getMethod("invokeSync", String.class, commandType, long.class);
        processorType = Class.forName(REMOTING + "netty.NettyRequestProcessor", false, loader);
        registerProcessor = client.getMethod("registerProcessor", int.class, processorType, ExecutorService.class);
    }

    /** Access to {@code instance}; throws when a member the agent needs is missing. */
    static ClientAccess of(Object instance) throws ReflectiveOperationException {
        return new ClientAccess(instance);
    }

    Object instance() {
        return instance;
    }

    @Override
    public String clientId() {
        try {
            return String.valueOf(clientId.invoke(instance));
        } catch (ReflectiveOperationException e) {
            return "?";
        }
    }

    @Override
    public boolean running() {
        try {
            Object state = serviceState.get(instance);
            return state != null && "RUNNING".equals(((Enum<?>) state).name());
        } catch (ReflectiveOperationException | ClassCastException e) {
            return false;
        }
    }

    /** Whether the instance was shut down (or failed to start): it will not run again. */
    boolean stoppedForGood() {
        try {
            Object state = serviceState.get(instance);
            String name = state == null ? "" : ((Enum<?>) state).name();
            return name.equals("SHUTDOWN_ALREADY") || name.equals("START_FAILED");
        } catch (ReflectiveOperationException | ClassCastException e) {
            return true;
        }
    }

    @Override
    public Set<String> heldTopics() {
        try {
            Map<?, ?> table = (Map<?, ?>) routeTable.invoke(instance);
            Set<String> out = new HashSet<String>();
            for (Object key : table.keySet()) {
                out.add(String.valueOf(key));
            }
            return out;
        } catch (ReflectiveOperationException e) {
            return Collections.emptySet();
        }
    }

    @Override
    public String nameServer() {
        try {
            Object addr = ((AtomicReference<?>) chosen.get(remoting)).get();
            return addr instanceof String ? (String) addr : null;
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public List<String> nameServers() {
        try {
            Object list = ((AtomicReference<?>) addrList.get(remoting)).get();
            return list == null ? Collections.<String>emptyList() : (List<String>) list;
        } catch (ReflectiveOperationException e) {
            return Collections.emptyList();
        }
    }

    @Override
    public Object connection(String addr) {
        try {
            Object wrapper = ((Map<?, ?>) channels.get(remoting)).get(addr);
            if (wrapper == null) {
                return null;
            }
            Method future = wrapper.getClass().getMethod("getChannelFuture");
            future.setAccessible(true);
            Object f = future.invoke(wrapper);
            if (f == null) {
                return null;
            }
            Method channel = f.getClass().getMethod("channel");
            channel.setAccessible(true);
            return channel.invoke(f);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    @Override
    public Reply invoke(String addr, int code, byte[] body, long timeoutMs) throws Exception {
        Object request = createRequest.invoke(null, code, null);
        setBody.invoke(request, (Object) body);
        Object response;
        try {
            response = invokeSync.invoke(remoting, addr, request, timeoutMs);
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof Exception ? (Exception) cause : e;
        }
        if (response == null) {
            throw new IllegalStateException("no response");
        }
        return new Reply((Integer) getCode.invoke(response), (byte[]) getBody.invoke(response),
                (String) getRemark.invoke(response));
    }

    @Override
    public boolean refresh(String topic) throws Exception {
        try {
            return Boolean.TRUE.equals(refresh.invoke(instance, topic));
        } catch (InvocationTargetException e) {
            Throwable cause = e.getCause();
            throw cause instanceof Exception ? (Exception) cause : e;
        }
    }

    @Override
    public void rebalanceNow() {
        try {
            rebalance.invoke(instance);
        } catch (ReflectiveOperationException e) {
            Log.warn("rebalance", "asking the client to rebalance failed", e);
        }
    }

    @Override
    public boolean hasConsumers() {
        try {
            Map<?, ?> table = (Map<?, ?>) consumerTable.get(instance);
            return table != null && !table.isEmpty();
        } catch (ReflectiveOperationException e) {
            return false;
        }
    }

    @Override
    @SuppressWarnings("unchecked")
    public boolean switchNameServer(String addr) {
        try {
            ((AtomicReference<Object>) chosen.get(remoting)).set(addr);
            return true;
        } catch (ReflectiveOperationException | ClassCastException e) {
            return false;
        }
    }

    /**
     * Makes the client hand the extension's frames ({@code codes}) to {@code handler} on the
     * thread that read them (the client's Netty thread), so the agent sees each body's size
     * before anything queues it: the handler must be quick and must not block. The processor
     * answers nothing: both frames are oneway. Whatever the handler throws stays in the agent.
     */
    void registerFrames(final FrameHandler handler, int... codes)
            throws ReflectiveOperationException {
        InvocationHandler h = new InvocationHandler() {
            @Override
            public Object invoke(Object proxy, Method method, Object[] args) {
                String name = method.getName();
                if (name.equals("processRequest") && args != null && args.length == 2) {
                    try {
                        Object ctx = args[0];
                        Object connection = ctx == null ? null : call(ctx, "channel");
                        int code = (Integer) getCode.invoke(args[1]);
                        byte[] body = (byte[]) getBody.invoke(args[1]);
                        handler.frame(connection, code, body);
                    } catch (Throwable t) {
                        Log.warn("frame", "a route-push frame could not be handled", t);
                    }
                    return null;
                }
                if (name.equals("rejectRequest")) {
                    return Boolean.FALSE;
                }
                if (name.equals("equals")) {
                    return proxy == args[0];
                }
                if (name.equals("hashCode")) {
                    return System.identityHashCode(proxy);
                }
                if (name.equals("toString")) {
                    return "routepush-agent-processor";
                }
                return defaultValue(method.getReturnType());
            }
        };
        Object processor = Proxy.newProxyInstance(processorType.getClassLoader(), new Class<?>[] {processorType}, h);
        ExecutorService executor = new CallerRuns();
        for (int code : codes) {
            registerProcessor.invoke(remoting, code, processor, executor);
        }
    }

    /** Runs each task on the thread that submits it: the client's, for a frame it just read. */
    static final class CallerRuns extends AbstractExecutorService {
        @Override
        public void execute(Runnable command) {
            command.run();
        }

        @Override
        public void shutdown() {
        }

        @Override
        public List<Runnable> shutdownNow() {
            return Collections.emptyList();
        }

        @Override
        public boolean isShutdown() {
            return false;
        }

        @Override
        public boolean isTerminated() {
            return false;
        }

        @Override
        public boolean awaitTermination(long timeout, TimeUnit unit) {
            return false;
        }
    }

    private static Object call(Object target, String name) throws ReflectiveOperationException {
        Method m = target.getClass().getMethod(name);
        m.setAccessible(true);
        return m.invoke(target);
    }

    private static Object defaultValue(Class<?> type) {
        if (type == boolean.class) {
            return Boolean.FALSE;
        }
        if (type.isPrimitive() && type != void.class) {
            return 0;
        }
        return null;
    }

    private static Field field(Class<?> type, String name) throws NoSuchFieldException {
        for (Class<?> c = type; c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f;
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        throw new NoSuchFieldException(type.getName() + "." + name);
    }
}
