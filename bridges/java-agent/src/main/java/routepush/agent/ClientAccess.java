package routepush.agent;

import java.lang.reflect.Field;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Collections;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * {@link Host} over a live {@code MQClientInstance}, by reflection in the instance's own class
 * loader: the agent links against no RocketMQ class, so one jar serves 4.9.x and 5.x clients,
 * whatever loader (application, fat jar, container) holds them. Every member it uses is resolved
 * once, when the instance is attached; one that is missing makes {@link #of} fail and the
 * instance is left alone.
 */
final class ClientAccess implements Host {
    private final Object instance;
    private final Remoting remoting;
    final ClientVersion version;
    private final Method clientId;
    private final Method routeTable;
    private final Method refresh;
    private final Method rebalance;
    private final Field serviceState;
    private final Field consumerTable;

    private ClientAccess(Object instance) throws ReflectiveOperationException {
        this.instance = instance;
        Class<?> type = instance.getClass();
        ClassLoader loader = type.getClassLoader();
        version = ClientVersion.of(loader);
        clientId = type.getMethod("getClientId");
        routeTable = type.getMethod("getTopicRouteTable");
        refresh = type.getMethod("updateTopicRouteInfoFromNameServer", String.class);
        rebalance = type.getMethod("rebalanceImmediately");
        serviceState = Remoting.field(type, "serviceState");
        consumerTable = Remoting.field(type, "consumerTable");
        remoting = Remoting.ofApi(type.getMethod("getMQClientAPIImpl").invoke(instance), loader);
    }

    /** Access to {@code instance}; throws when a member the agent needs is missing. */
    static ClientAccess of(Object instance) throws ReflectiveOperationException {
        return new ClientAccess(instance);
    }

    Object instance() {
        return instance;
    }

    @Override
    public Remoting remoting() {
        return remoting;
    }

    @Override
    public String kind() {
        return "client";
    }

    @Override
    public String label() {
        return clientId() + " (RocketMQ client " + version.text + ")";
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

    @Override
    public boolean stoppedForGood() {
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
    public boolean refresh(String topic) throws Exception {
        try {
            return Boolean.TRUE.equals(refresh.invoke(instance, topic));
        } catch (InvocationTargetException e) {
            throw Remoting.unwrap(e);
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

}
