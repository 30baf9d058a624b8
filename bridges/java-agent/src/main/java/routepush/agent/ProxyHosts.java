package routepush.agent;

import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * The 5.x proxies of this JVM the agent looks for, and the route services it found in them: each
 * loader that defined the proxy's {@code ProxyStartup} is searched ({@link ProxyFinder}) at each
 * scan until its route service is found, or for {@link #MAX_LOOKS} scans, after which one line
 * says so and the proxy runs as before. Bounded: at most {@link #MAX_LOADERS} loaders waiting
 * and {@link #MAX_SERVICES} services held. Loaders are offered from any thread; the rest runs
 * on the scan thread.
 */
final class ProxyHosts {
    /** Scans that look for a proxy's route service: the proxy builds it within its first seconds. */
    static final int MAX_LOOKS = 300;
    static final int MAX_LOADERS = 64;
    static final int MAX_SERVICES = 16;

    /** A loader running a proxy, and how many scans have looked for its route service. */
    private static final class Searched {
        final WeakReference<ClassLoader> loader;
        int looks;

        Searched(ClassLoader loader) {
            this.loader = new WeakReference<ClassLoader>(loader);
        }
    }

    private final ConcurrentLinkedQueue<ClassLoader> offered = new ConcurrentLinkedQueue<ClassLoader>();
    private final List<Searched> searched = new ArrayList<Searched>();
    private final List<Object> services = new ArrayList<Object>();

    /** A loader that defined the proxy's start-up class. Never blocks. */
    void offer(ClassLoader loader) {
        if (loader != null && offered.size() < MAX_LOADERS) {
            offered.add(loader);
        }
    }

    /** Searches the proxies not found yet; returns every route service found so far. */
    List<Object> scan() {
        for (ClassLoader loader = offered.poll(); loader != null; loader = offered.poll()) {
            boolean known = false;
            for (Searched s : searched) {
                known |= s.loader.get() == loader;
            }
            if (!known && searched.size() < MAX_LOADERS) {
                searched.add(new Searched(loader));
            }
        }
        for (Searched s : new ArrayList<Searched>(searched)) {
            ClassLoader loader = s.loader.get();
            if (loader == null) {
                searched.remove(s);
                continue;
            }
            List<Object> found;
            try {
                found = ProxyFinder.find(loader);
            } catch (Throwable t) {
                found = new ArrayList<Object>();
                Log.warn("proxy-find", "cannot read the RocketMQ proxy's start-up objects", t);
            }
            for (Object service : found) {
                if (!holds(service) && services.size() < MAX_SERVICES) {
                    services.add(service);
                }
            }
            if (!found.isEmpty()) {
                searched.remove(s);
            } else if (++s.looks >= MAX_LOOKS) {
                searched.remove(s);
                Log.info("a RocketMQ proxy (" + ClientVersion.of(loader).text + ") runs here but its route service ("
                        + ProxyAccess.ROUTE_SERVICE + ") was not found among its objects; the proxy runs as before,"
                        + " with its own route refresh");
            }
        }
        return new ArrayList<Object>(services);
    }

    /** Whether {@code o} is a route service found here (by identity). */
    boolean holds(Object o) {
        for (Object s : services) {
            if (s == o) {
                return true;
            }
        }
        return false;
    }
}
