package routepush.agent;

import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The agent's log: {@code java.util.logging} (part of the JDK, so no library of the
 * application's is touched), logger {@code routepush.agent}. Repeated warnings are paced per key.
 */
final class Log {
    static final Logger LOGGER = Logger.getLogger("routepush.agent");
    private static final long PACE_MS = 60_000;
    private static final int MAX_KEYS = 1024;
    private static final ConcurrentHashMap<String, Long> LAST = new ConcurrentHashMap<String, Long>();

    private Log() {
    }

    static void info(String message) {
        LOGGER.log(Level.INFO, "[routepush] " + message);
    }

    static void fine(String message) {
        LOGGER.log(Level.FINE, "[routepush] " + message);
    }

    /** A warning at most once a minute per {@code key}. */
    static void warn(String key, String message, Throwable error) {
        long now = System.currentTimeMillis();
        Long last = LAST.get(key);
        if (last != null && now - last < PACE_MS) {
            return;
        }
        if (LAST.size() >= MAX_KEYS) {
            LAST.clear();
        }
        LAST.put(key, now);
        LOGGER.log(Level.WARNING, "[routepush] " + message, error);
    }

    /** Once per {@code key} for the life of the process (bounded: past the bound, paced). */
    static void once(String key, String message) {
        if (LAST.size() < MAX_KEYS && LAST.putIfAbsent("once:" + key, 0L) == null) {
            info(message);
        }
    }
}
