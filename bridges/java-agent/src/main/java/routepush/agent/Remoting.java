package routepush.agent;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.AbstractExecutorService;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

/**
 * One RocketMQ {@code NettyRemotingClient} reached by reflection in its own class loader: the
 * name servers it was given and the one it uses, its connections, a request over them, and the
 * extension's oneway frames handed to the agent. Both kinds of host share it: a client instance's
 * remoting client and a proxy's route-lookup client are the same class. Every member is resolved
 * once, in the constructor; one that is missing makes it throw and the host is left alone.
 */
final class Remoting {
    private static final String REMOTING = "org.apache.rocketmq.remoting.";

    /** Receives the extension's oneway frames from the client's Netty pipeline. */
    interface FrameHandler {
        void frame(Object connection, int code, byte[] body);
    }

    private final Object remoting;
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

    /** {@code remoting}: a {@code NettyRemotingClient} (or a subclass) of {@code loader}. */
    Remoting(Object remoting, ClassLoader loader) throws ReflectiveOperationException {
        if (remoting == null) {
            throw new NoSuchFieldException("no remoting client");
        }
        this.remoting = remoting;
        Class<?> client = remoting.getClass();
        chosen = field(client, "namesrvAddrChoosed");
        addrList = field(client, "namesrvAddrList");
        channels = field(client, "channelTables");
        Class<?> commandType = Class.forName(REMOTING + "protocol.RemotingCommand", false, loader);
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

    /** The remoting client of an {@code MQClientAPIImpl} (or its {@code MQClientAPIExt}). */
    static Remoting ofApi(Object api, ClassLoader loader) throws ReflectiveOperationException {
        return new Remoting(api.getClass().getMethod("getRemotingClient").invoke(api), loader);
    }

    /** The name server of the next request, or null before the first. */
    String nameServer() {
        try {
            Object addr = ((AtomicReference<?>) chosen.get(remoting)).get();
            return addr instanceof String ? (String) addr : null;
        } catch (ReflectiveOperationException e) {
            return null;
        }
    }

    @SuppressWarnings("unchecked")
    List<String> nameServers() {
        try {
            Object list = ((AtomicReference<?>) addrList.get(remoting)).get();
            return list == null ? Collections.<String>emptyList() : (List<String>) list;
        } catch (ReflectiveOperationException e) {
            return Collections.emptyList();
        }
    }

    /** The open connection (a Netty channel, compared by identity) to {@code addr}, or null. */
    Object connection(String addr) {
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

    ClientPort.Reply invoke(String addr, int code, byte[] body, long timeoutMs) throws Exception {
        Object request = createRequest.invoke(null, code, null);
        setBody.invoke(request, (Object) body);
        Object response;
        try {
            response = invokeSync.invoke(remoting, addr, request, timeoutMs);
        } catch (InvocationTargetException e) {
            throw unwrap(e);
        }
        if (response == null) {
            throw new IllegalStateException("no response");
        }
        return new ClientPort.Reply((Integer) getCode.invoke(response), (byte[]) getBody.invoke(response),
                (String) getRemark.invoke(response));
    }

    @SuppressWarnings("unchecked")
    boolean switchNameServer(String addr) {
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
    void registerFrames(final FrameHandler handler, int... codes) throws ReflectiveOperationException {
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

    /** The exception a reflective call threw, as the caller would have seen it. */
    static Exception unwrap(InvocationTargetException e) {
        Throwable cause = e.getCause();
        return cause instanceof Exception ? (Exception) cause : e;
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

    /** The field {@code name} of {@code type} or a superclass, made accessible. */
    static Field field(Class<?> type, String name) throws NoSuchFieldException {
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
