package org.apache.rocketmq.proxy;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A stand-in for the proxy's start-up class, shaped as the real one holds its parts (a static
 * start-and-shutdown list of the proxy's objects), for tests of proxies the agent must leave
 * alone. It lives only on the test class path; the real proxy's classes are loaded apart.
 */
public final class ProxyStartup {
    private static final Parts PROXY_START_AND_SHUTDOWN = new Parts();

    /** Like the real proxy's start-and-shutdown list. */
    static final class Parts {
        final List<Object> startAndShutdownList = new CopyOnWriteArrayList<Object>();
    }

    private ProxyStartup() {
    }

    /** Makes {@code part} the only part the proxy holds. */
    public static void hold(Object part) {
        PROXY_START_AND_SHUTDOWN.startAndShutdownList.clear();
        PROXY_START_AND_SHUTDOWN.startAndShutdownList.add(part);
    }
}
