package routepush.agent;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.TreeSet;

/**
 * The agent's settings: agent arguments ({@code -javaagent:agent.jar=key=value,key=value}) win
 * over system properties ({@code -Droutepush.key=value}), which win over the defaults. Lists
 * (name servers, topics) are separated by {@code ;}, as RocketMQ's own name-server lists are; a
 * topic name can never hold one.
 *
 * <p>A mistake in the options never turns push off: an unknown key, an argument that is not
 * {@code key=value} or a malformed value is left out, its default kept, and a {@link #warnings
 * warning} names it and what was expected. The application always starts, and push stays on
 * unless {@code enabled=false} says otherwise.
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
    /** How often one INFO status line is logged; 0: never (the application's log is its own). */
    public final long statusIntervalMs;
    /** Whether the status MBean ({@code routepush:type=Agent}) is registered. */
    public final boolean jmx;

    /** One line per option left out or corrected, naming it and what was expected. */
    public final List<String> warnings;

    private final Map<String, String> source;
    private final Map<String, String> values;
    private final List<String> notes;
    private final Map<String, String> accepted = new LinkedHashMap<String, String>();

    private Options(Map<String, String> v, Map<String, String> source, List<String> notes) {
        this.values = v;
        this.source = source;
        this.notes = notes;
        enabled = bool("enabled", true);
        namesrv = addresses("namesrv");
        exclude = list("exclude");
        scanIntervalMs = number("scanIntervalMs", 1000, 10, 60_000);
        checkIntervalMs = number("checkIntervalMs", 30_000, 1000, 3_600_000);
        arrivalWindowMs = number("arrivalWindowMs", 500, 0, 600_000);
        resyncWindowMs = number("resyncWindowMs", 1000, 0, 600_000);
        requestTimeoutMs = number("requestTimeoutMs", 3000, 100, 60_000);
        maxPendingNotifications = (int) number("maxPendingNotifications", 1024, 1, 1 << 20);
        maxPendingBytes = number("maxPendingBytes", 16L << 20, 64L << 10, 1L << 30);
        long frame = number("maxFrameBytes", 4L << 20, 4L << 10, 16L << 20);
        if (frame > maxPendingBytes) {
            // A frame larger than all the room there is could never be kept: cap it at the room.
            notes.add("route push option maxFrameBytes=" + frame + " exceeds maxPendingBytes="
                    + maxPendingBytes + " (a frame must fit in the room for waiting frames); using "
                    + "maxFrameBytes=" + maxPendingBytes);
            frame = maxPendingBytes;
            accepted.put("maxFrameBytes", String.valueOf(frame));
        }
        maxFrameBytes = (int) frame;
        subscribeBatch = (int) number("subscribeBatch", 1000, 1, 100_000);
        goAwaySwitch = bool("goAwaySwitch", true);
        statusIntervalMs = period("statusIntervalMs", 0, 10_000, 86_400_000);
        jmx = bool("jmx", true);
        warnings = Collections.unmodifiableList(new ArrayList<String>(notes));
    }

    /** The known keys, for messages about a key the agent does not know. */
    public static final List<String> KEYS = Collections.unmodifiableList(java.util.Arrays.asList(
            "enabled", "namesrv", "exclude", "scanIntervalMs", "checkIntervalMs",
            "arrivalWindowMs", "resyncWindowMs", "requestTimeoutMs", "maxPendingNotifications",
            "maxPendingBytes", "maxFrameBytes", "subscribeBatch", "goAwaySwitch",
            "statusIntervalMs", "jmx"));

    public static Options defaults() {
        return new Options(new HashMap<String, String>(), new HashMap<String, String>(),
                new ArrayList<String>());
    }

    /**
     * Options from {@code agentArgs} over {@code props}. Never throws for what an operator
     * typed: whatever is unknown or malformed is left out and named in {@link #warnings}.
     */
    public static Options parse(String agentArgs, Properties props) {
        Map<String, String> values = new HashMap<String, String>();
        Map<String, String> source = new HashMap<String, String>();
        List<String> notes = new ArrayList<String>();
        for (String key : new TreeSet<String>(props.stringPropertyNames())) {
            if (key.startsWith(PREFIX)) {
                String name = key.substring(PREFIX.length());
                String where = "system property -D" + key;
                if (known(name, where, notes)) {
                    values.put(name, props.getProperty(key).trim());
                    source.put(name, where);
                }
            }
        }
        if (agentArgs != null) {
            for (String part : agentArgs.split(",")) {
                if (part.trim().isEmpty()) {
                    continue;
                }
                int eq = part.indexOf('=');
                if (eq <= 0) {
                    notes.add("route push agent argument '" + Log.peer(part.trim()) + "' ignored: expected "
                            + "key=value, the pairs separated by ',' (e.g. exclude=A;B*,checkIntervalMs=15000)");
                    continue;
                }
                String name = part.substring(0, eq).trim();
                if (known(name, "agent argument", notes)) {
                    values.put(name, part.substring(eq + 1).trim());
                    source.put(name, "agent argument");
                }
            }
        }
        return new Options(values, source, notes);
    }

    /**
     * The options that differ from the defaults, as {@code key=value} separated by {@code ", "},
     * or {@code "defaults"}.
     */
    public String summary() {
        if (accepted.isEmpty()) {
            return "defaults";
        }
        StringBuilder out = new StringBuilder();
        for (String key : KEYS) {
            String value = accepted.get(key);
            if (value != null) {
                out.append(out.length() == 0 ? "" : ", ").append(key).append('=').append(value);
            }
        }
        return out.toString();
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

    private static boolean known(String key, String where, List<String> notes) {
        if (KEYS.contains(key)) {
            return true;
        }
        // The nearest known key, when a slip of case or two letters away, as a hint.
        String hint = "";
        int best = 3;
        for (String k : KEYS) {
            int d = distance(k.toLowerCase(Locale.ROOT), key.toLowerCase(Locale.ROOT));
            if (d < best) {
                best = d;
                hint = " (did you mean " + k + "?)";
            }
        }
        notes.add("unknown route push option '" + Log.peer(key) + "' (" + where + ") ignored" + hint
                + "; known options: " + String.join(", ", KEYS));
        return false;
    }

    /** The edit distance of {@code a} and {@code b}, capped at a key's length for long input. */
    static int distance(String a, String b) {
        if (b.length() > 64) {
            return b.length();
        }
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int sub = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(sub, Math.min(prev[j] + 1, cur[j - 1] + 1));
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }

    /** Records a value taken, for {@link #summary}. */
    private void took(String key) {
        accepted.put(key, values.get(key));
    }

    private void malformed(String key, String expected, Object dflt) {
        notes.add("route push option " + key + "=" + Log.peer(values.get(key)) + " (" + source.get(key)
                + ") is malformed: expected " + expected + "; using the default " + dflt);
    }

    private List<String> list(String key) {
        List<String> out = new ArrayList<String>();
        String text = values.get(key);
        if (text != null) {
            for (String item : text.split(";")) {
                if (!item.trim().isEmpty()) {
                    out.add(item.trim());
                }
            }
        }
        if (!out.isEmpty()) {
            took(key);
        }
        return Collections.unmodifiableList(out);
    }

    /** A list of {@code host:port}; an entry that is not one is left out and named. */
    private List<String> addresses(String key) {
        List<String> out = new ArrayList<String>();
        for (String item : list(key)) {
            int colon = item.lastIndexOf(':');
            boolean ok = colon > 0;
            if (ok) {
                try {
                    int port = Integer.parseInt(item.substring(colon + 1));
                    ok = port > 0 && port < 65536;
                } catch (NumberFormatException e) {
                    ok = false;
                }
            }
            if (ok) {
                out.add(item);
            } else {
                notes.add("route push option " + key + " (" + source.get(key) + "): '" + Log.peer(item)
                        + "' left out: expected host:port, the name servers separated by ';'");
            }
        }
        if (out.isEmpty()) {
            accepted.remove(key);
        }
        return Collections.unmodifiableList(out);
    }

    private boolean bool(String key, boolean dflt) {
        String s = values.get(key);
        if (s == null || s.isEmpty()) {
            return dflt;
        }
        String t = s.toLowerCase(Locale.ROOT);
        if (t.equals("true") || t.equals("on") || t.equals("1")) {
            took(key);
            return true;
        }
        if (t.equals("false") || t.equals("off") || t.equals("0")) {
            took(key);
            return false;
        }
        malformed(key, "true or false", dflt);
        return dflt;
    }

    private long number(String key, long dflt, long min, long max) {
        String s = values.get(key);
        if (s == null || s.isEmpty()) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(s);
        } catch (NumberFormatException e) {
            malformed(key, "a whole number in [" + min + ", " + max + "]", dflt);
            return dflt;
        }
        if (n < min || n > max) {
            malformed(key, "a whole number in [" + min + ", " + max + "]", dflt);
            return dflt;
        }
        took(key);
        return n;
    }

    /** A period: 0 (off) or a number in [min, max]. */
    private long period(String key, long dflt, long min, long max) {
        String s = values.get(key);
        if ("0".equals(s)) {
            took(key);
            return 0;
        }
        if (s == null || s.isEmpty()) {
            return dflt;
        }
        long n;
        try {
            n = Long.parseLong(s);
        } catch (NumberFormatException e) {
            n = -1;
        }
        if (n < min || n > max) {
            malformed(key, "0 (off) or a whole number in [" + min + ", " + max + "]", dflt);
            return dflt;
        }
        took(key);
        return n;
    }
}
