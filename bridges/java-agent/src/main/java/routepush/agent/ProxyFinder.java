package routepush.agent;

import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collection;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

/**
 * Finds a RocketMQ 5.x proxy's {@code TopicRouteService} instances without changing a class: a
 * walk of the proxy's own object graph from the static fields of its {@code ProxyStartup} (in
 * 5.1 to 5.3: its start-and-shutdown list, the messaging processor, its service manager, the
 * route service), through objects of the proxy's packages and the collections and arrays that
 * hold them only. No path is hard-coded, so a member renamed between versions costs nothing
 * while the route service stays reachable; the walk is bounded in depth, in objects and in the
 * elements read from one collection, whatever the proxy holds.
 */
final class ProxyFinder {
    static final String STARTUP = "org.apache.rocketmq.proxy.ProxyStartup";
    private static final String PROXY_PACKAGE = "org.apache.rocketmq.proxy.";
    private static final String ROCKETMQ_PACKAGE = "org.apache.rocketmq.";
    /** Steps from a static field of {@code ProxyStartup}: the route service is 4 away in 5.1-5.3. */
    static final int MAX_DEPTH = 8;
    /** Objects visited in one walk. */
    static final int MAX_OBJECTS = 4096;
    /** Elements read from one collection, map or array. */
    static final int MAX_ELEMENTS = 256;

    private ProxyFinder() {
    }

    /**
     * The route services reachable from {@code loader}'s {@code ProxyStartup}; empty when the
     * loader has none. Reads the static fields, so it initialises {@code ProxyStartup}: call it
     * only for a loader that defined that class (the proxy is running there).
     */
    static List<Object> find(ClassLoader loader) throws ReflectiveOperationException {
        Class<?> startup;
        Class<?> routeType;
        try {
            startup = Class.forName(STARTUP, false, loader);
            routeType = Class.forName(ProxyAccess.ROUTE_SERVICE, false, loader);
        } catch (ClassNotFoundException e) {
            return new ArrayList<Object>();
        }
        List<Object> roots = new ArrayList<Object>();
        for (Field f : startup.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && !f.getType().isPrimitive()) {
                f.setAccessible(true);
                roots.add(f.get(null));
            }
        }
        return walk(roots, routeType);
    }

    /** The instances of {@code target} reachable from {@code roots} within the bounds. */
    static List<Object> walk(List<Object> roots, Class<?> target) {
        List<Object> found = new ArrayList<Object>();
        Map<Object, Boolean> seen = new IdentityHashMap<Object, Boolean>();
        ArrayDeque<Object[]> next = new ArrayDeque<Object[]>();
        for (Object root : roots) {
            next.add(new Object[] {root, 0});
        }
        while (!next.isEmpty() && seen.size() < MAX_OBJECTS) {
            Object[] step = next.poll();
            Object o = step[0];
            int depth = (Integer) step[1];
            if (o == null || seen.put(o, Boolean.TRUE) != null) {
                continue;
            }
            if (target.isInstance(o)) {
                found.add(o);
                continue;
            }
            if (depth >= MAX_DEPTH) {
                continue;
            }
            for (Object child : children(o)) {
                if (followed(child)) {
                    next.add(new Object[] {child, depth + 1});
                }
            }
        }
        return found;
    }

    /** Whether the walk goes into {@code o}: the proxy's own objects and plain containers. */
    private static boolean followed(Object o) {
        if (o == null) {
            return false;
        }
        String name = o.getClass().getName();
        return name.startsWith(PROXY_PACKAGE) || o.getClass().isArray() && !o.getClass().getComponentType().isPrimitive()
                || (o instanceof Collection || o instanceof Map) && name.startsWith("java.util.");
    }

    private static List<Object> children(Object o) {
        List<Object> out = new ArrayList<Object>();
        try {
            if (o.getClass().isArray()) {
                int n = Math.min(Array.getLength(o), MAX_ELEMENTS);
                for (int i = 0; i < n; i++) {
                    out.add(Array.get(o, i));
                }
            } else if (o instanceof Collection || o instanceof Map) {
                Collection<?> items = o instanceof Map ? ((Map<?, ?>) o).values() : (Collection<?>) o;
                Iterator<?> it = items.iterator();
                for (int i = 0; i < MAX_ELEMENTS && it.hasNext(); i++) {
                    out.add(it.next());
                }
            } else {
                for (Class<?> c = o.getClass(); c != null && c.getName().startsWith(ROCKETMQ_PACKAGE);
                        c = c.getSuperclass()) {
                    for (Field f : c.getDeclaredFields()) {
                        if (!Modifier.isStatic(f.getModifiers()) && !f.getType().isPrimitive()) {
                            f.setAccessible(true);
                            out.add(f.get(o));
                        }
                    }
                }
            }
        } catch (ReflectiveOperationException | RuntimeException e) {
            // a container changing under the walk, or a member out of reach: what was read counts
        }
        return out;
    }
}
