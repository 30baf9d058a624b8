package routepush.agent;

import java.io.InputStream;
import java.util.Properties;

/**
 * The agent's own version, from the Maven project (filtered into {@code agent.properties} by the
 * build), and the client versions it serves.
 */
final class AgentVersion {
    /** The RocketMQ Java client lines the agent reaches into; {@link ClientVersion#supported()}
     * is the same rule. */
    static final String CLIENTS = "4.9.x and 5.x";
    /** The RocketMQ proxy lines whose route cache the agent reaches into (cluster mode). */
    static final String PROXIES = "5.1 to 5.3";

    private static final String TEXT = read();

    private AgentVersion() {
    }

    /** The agent's version, e.g. {@code 0.1.0}; {@code unknown} when built outside Maven. */
    static String text() {
        return TEXT;
    }

    private static String read() {
        try (InputStream in = AgentVersion.class.getResourceAsStream("agent.properties")) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                String v = p.getProperty("version", "").trim();
                if (!v.isEmpty() && !v.startsWith("${")) {
                    return v;
                }
            }
        } catch (Exception e) {
            // fall through to the manifest
        }
        Package pkg = AgentVersion.class.getPackage();
        String v = pkg == null ? null : pkg.getImplementationVersion();
        return v == null ? "unknown" : v;
    }
}
