package routepush.agent;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

/**
 * The agent's settings: agent arguments ({@code -javaagent:agent.jar=key=value,key=value}) win
 * over system properties ({@code -Droutepush.key=value}), which win over the defaults. Lists
 * (name servers, topics) are separated by {@code ;}, as RocketMQ's own name-server lists are; a
 * topic name can never hold one.
 */
public final class Options {
    public static final String PREFIX = "routepush.";

    /** Off: the agent does nothing at all (no thread, no hook). */
    public final boolean enabled;
    /** Name servers to subscribe at instead of the one each client talks to; empty: the client's. */
    public final List<String> namesrv;
    /** Topics never subscribed: exact names, or prefixes ending in {@code *}. */
    public final List<String> exclude;
    /** How often client instances, their held topics and their name-server connection are read. */
    public final long scanIntervalMs;
    /** How often the held topics are subscribed again and their versions compared. */
    public final long checkIntervalMs;
    /** The agent's own floor for spreading the refetches a broker arrival causes. */
    public final long arrivalWindowMs;
    /** The window over which a sequence gap or a new epoch refetches every held topic. */
    public final long resyncWindowMs;
    /** Timeout of one SUBSCRIBE request. */
    public final long requestTimeoutMs;
    /** Notifications waiting for the agent's thread; past it one is dropped (the next frame's
     * sequence gap then refetches everything held). */
    public final int maxPendingNotifications;
    /** Bytes of notification bodies waiting for the agent's thread; past it a frame is dropped,
     * as past {@link #maxPendingNotifications}. */
    public final long maxPendingBytes;
    /** The largest notification body the agent reads; a longer one is dropped unread and every
     * held topic is refetched instead. */
    public final int maxFrameBytes;
    /** Topics per SUBSCRIBE request. */
    public final int subscribeBatch;
    /** On GO_AWAY, move the client to another of its name servers at once. */
    public final boolean goAwaySwitch;

    private Options(Map<String, String> v) {
        enabled = bool(v, "enabled", true);
        namesrv = list(v.get("namesrv"));
        exclude = list(v.get("exclude"));
        scanIntervalMs = number(v, "scanIntervalMs", 1000, 10, 60_000);
        checkIntervalMs = number(v, "checkIntervalMs", 30_000, 1000, 3_600_000);
        arrivalWindowMs = number(v, "arrivalWindowMs", 500, 0, 600_000);
        resyncWindowMs = number(v, "resyncWindowMs", 1000, 0, 600_000);
        requestTimeoutMs = number(v, "requestTimeoutMs", 3000, 100, 60_000);
        maxPendingNotifications = (int) number(v, "maxPendingNotifications", 1024, 1, 1 << 20);
        maxPendingBytes = number(v, "maxPendingBytes", 16L << 20, 64L << 10, 1L << 30);
        maxFrameBytes = (int) number(v, "maxFrameBytes", 4L << 20, 4L << 10, 16L << 20);
        if (maxFrameBytes > maxPendingBytes) {
            throw new IllegalArgumentException("maxFrameBytes (" + maxFrameBytes
                    + ") must not exceed maxPendingBytes (" + maxPendingBytes + ")");
        }
        subscribeBatch = (int) number(v, "subscribeBatch", 1000, 1, 100_000);
        goAwaySwitch = bool(v, "goAwaySwitch", true);
    }

    /** The known keys, for messages about a key the agent does not know. */
    public static final List<String> KEYS = Collections.unmodifiableList(java.util.Arrays.asList(
            "enabled", "namesrv", "exclude", "scanIntervalMs", "checkIntervalMs",
            "arrivalWindowMs", "resyncWindowMs", "requestTimeoutMs", "maxPendingNotifications",
            "maxPendingBytes", "maxFrameBytes", "subscribeBatch", "goAwaySwitch"));

    public static Options defaults() {
        return new Options(new HashMap<String, String>());
    }

    /**
     * Options from {@code agentArgs} over {@code props}. A malformed value or an unknown key is
     * an {@link IllegalArgumentException} naming it: the agent then stays off, the application
     * runs untouched.
     */
    public static Options parse(String agentArgs, Properties props) {
        Map<String, String> values = new HashMap<String, String>();
        for (String key : props.stringPropertyNames()) {
            if (key.startsWith(PREFIX)) {
                values.put(known(key.substring(PREFIX.length())), props.getProperty(key).trim());
            }
        }
        if (agentArgs != null) {
            for (String part : agentArgs.split(",")) {
                if (part.trim().isEmpty()) {
                    continue;
                }
                int eq = part.indexOf('=');
                if (eq <= 0) {
                    throw new IllegalArgumentException("agent argument without key=value: " + part);
                }
                values.put(known(part.substring(0, eq).trim()), part.substring(eq + 1).trim());
            }
        }
        return new Options(values);
    }

    /** Whether {@code topic} is left out by {@link #exclude}. */
    public boolean excluded(String topic) {
        for (String rule : exclude) {
            if (rule.endsWith("*")
                    ? topic.startsWith(rule.substring(0, rule.length() - 1))
                    : topic.equals(rule)) {
                return true;
            }
        }
        return false;
    }

    private static String known(String key) {
        if (!KEYS.contains(key)) {
            throw new IllegalArgumentException("unknown option " + key + " (known: " + KEYS + ")");
        }
        return key;
    }

    private static List<String> list(String text) {
        List<String> out = new ArrayList<String>();
        if (text != null) {
            for (String item : text.split(";")) {
                if (!item.trim().isEmpty()) {
                    out.add(item.trim());
                }
            }
        }
        return Collections.unmodifiableList(out);
    }

    private static boolean bool(Map<String, String> v, String key, boolean dflt) {
        String s = v.get(key);
        if (s == null || s.isEmpty()) {
            return dflt;
        }
        String t = s.toLowerCase(Locale.ROOT);
        if (t.equals("true") || t.equals("on") || t.equals("1")) {
            return true;
        }
        if (t.equals("false") || t.equals("off") || t.equals("0")) {
            return false;
        }
        throw new IllegalArgumentException(key + " must be true or false, not " + s);
    }

    private static long number(Map<String, String> v, String key, long dflt, long min, long max) {
        String s = v.get(key);
        if (s == null || s.isEmpty()) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(s);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " must be a number, not " + s);
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(key + " must be in [" + min + ", " + max + "], not " + s);
        }
        return n;
    }
}
