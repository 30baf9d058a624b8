package routepush.agent;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * The agent's log: {@code java.util.logging} (part of the JDK, so no library of the
 * application's is touched), logger {@code routepush.agent}.
 *
 * <p>Two rules keep a name server from writing the application's log. Every line a peer can
 * cause goes through {@link #paced}: at most one per cause per minute, the next one saying how
 * many were left out. Every string that came from a peer (a remark, a reason, an epoch, an
 * exception's message) goes through {@link #peer}: control characters escaped and the length
 * capped, so no peer string can start a line or make one huge; thrown exceptions are logged as
 * {@link #scrubbed} copies for the same reason.
 */
final class Log {
    static final Logger LOGGER = Logger.getLogger("routepush.agent");
    /** The pace of every line a peer can cause: one per cause per minute. */
    static final long PACE_MS = 60_000;
    /** Characters of one peer string shown in a line; the rest is summarised by its length. */
    static final int PEER_CHARS = 200;
    /** Causes remembered for pacing; past it the oldest memory is dropped (the causes are the
     * agent's own names, per client instance, never a peer's string). */
    private static final int MAX_KEYS = 1024;
    /** Exception causes followed when scrubbing a throwable. */
    private static final int MAX_CAUSES = 8;

    private static final class Pace {
        final long at;
        final AtomicLong suppressed = new AtomicLong();

        Pace(long at) {
            this.at = at;
        }
    }

    private static final ConcurrentHashMap<String, Pace> LAST = new ConcurrentHashMap<String, Pace>();
    private static final ConcurrentHashMap<String, Boolean> ONCE = new ConcurrentHashMap<String, Boolean>();
    /** Lines left out by pacing since the start, for tests and status. */
    static final AtomicLong SUPPRESSED = new AtomicLong();

    private Log() {
    }

    /** A line only the agent's own life causes (attach, detach): never a peer's doing. */
    static void info(String message) {
        LOGGER.log(Level.INFO, "[routepush] " + message);
    }

    static void fine(String message) {
        if (LOGGER.isLoggable(Level.FINE)) {
            LOGGER.log(Level.FINE, "[routepush] " + message);
        }
    }

    /** A warning at most once a minute per {@code key}. */
    static void warn(String key, String message, Throwable error) {
        paced(Level.WARNING, key, message, error);
    }

    /**
     * {@code message} at {@code level}, at most once per {@link #PACE_MS} per {@code key}; the
     * line after a paced-out stretch says how many were left out. Returns whether it was logged.
     */
    static boolean paced(Level level, String key, String message, Throwable error) {
        if (!LOGGER.isLoggable(level)) {
            return false;
        }
        long now = System.nanoTime() / 1_000_000L;
        Pace last = LAST.get(key);
        if (last != null && now - last.at < PACE_MS) {
            last.suppressed.incrementAndGet();
            SUPPRESSED.incrementAndGet();
            return false;
        }
        Pace fresh = new Pace(now);
        boolean won = last == null ? LAST.putIfAbsent(key, fresh) == null : LAST.replace(key, last, fresh);
        if (!won) {
            SUPPRESSED.incrementAndGet();
            return false; // another thread logged this cause just now
        }
        if (last == null && LAST.size() > MAX_KEYS) {
            LAST.clear();
            LAST.put(key, fresh);
        }
        long left = last == null ? 0 : last.suppressed.get();
        String text = "[routepush] " + message + (left > 0 ? " (" + left + " more like it in the last minute)" : "");
        LOGGER.log(level, text, error == null ? null : scrubbed(error));
        return true;
    }

    /** Once per {@code key} for the life of the process (past {@link #MAX_KEYS} keys, paced). */
    static void once(String key, String message) {
        if (ONCE.size() < MAX_KEYS) {
            if (ONCE.putIfAbsent(key, Boolean.TRUE) == null) {
                info(message);
            }
        } else {
            paced(Level.INFO, "once:" + key, message, null);
        }
    }

    /**
     * A peer's string as it may appear in a line: backslash, control and line-separator
     * characters as escapes ({@code \n}, {@code \u0085}), at most {@link #PEER_CHARS} characters
     * of it, the rest summarised by its length.
     */
    static String peer(String s) {
        if (s == null) {
            return "null";
        }
        int n = Math.min(s.length(), PEER_CHARS);
        StringBuilder out = new StringBuilder(n + 16);
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '\\') {
                out.append("\\\\");
            } else if (c == '\n') {
                out.append("\\n");
            } else if (c == '\r') {
                out.append("\\r");
            } else if (c == '\t') {
                out.append("\\t");
            } else if (c < 0x20 || (c >= 0x7f && c < 0xa0) || c == '\u2028' || c == '\u2029'
                    || Character.isSurrogate(c)) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        if (s.length() > n) {
            out.append("...(").append(s.length()).append(" chars)");
        }
        return out.toString();
    }

    /**
     * A copy of {@code error} whose messages (its own and its causes') are {@link #peer}-escaped,
     * with the same stack traces: a client exception may carry a name server's remark.
     */
    static Throwable scrubbed(Throwable error) {
        return scrub(error, 0);
    }

    private static Throwable scrub(Throwable error, int depth) {
        Throwable cause = error.getCause();
        Scrubbed out = new Scrubbed(error.getClass().getName(), peer(error.getMessage()),
                cause == null || cause == error || depth >= MAX_CAUSES ? null : scrub(cause, depth + 1));
        out.setStackTrace(error.getStackTrace());
        return out;
    }

    /** An exception as logged: the original's class name and escaped message. */
    static final class Scrubbed extends Exception {
        private static final long serialVersionUID = 1L;
        private final String type;

        Scrubbed(String type, String message, Throwable cause) {
            super(message, cause);
            this.type = type;
        }

        @Override
        public String toString() {
            return type + ": " + getMessage();
        }
    }
}
