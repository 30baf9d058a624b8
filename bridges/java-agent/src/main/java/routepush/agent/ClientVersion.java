package routepush.agent;

/**
 * The RocketMQ client version of a class loader, read from {@code MQVersion}: its
 * {@code getVersionDesc(CURRENT_VERSION)} reads {@code V4_9_7} or {@code V5_3_3} (with an
 * optional {@code _SNAPSHOT} or other suffix).
 */
final class ClientVersion {
    static final ClientVersion UNKNOWN = new ClientVersion(0, 0, 0, "unknown");

    final int major;
    final int minor;
    final int patch;
    final String text;

    ClientVersion(int major, int minor, int patch, String text) {
        this.major = major;
        this.minor = minor;
        this.patch = patch;
        this.text = text;
    }

    /** Parses {@code V4_9_7}-style names; anything else is {@link #UNKNOWN}. */
    static ClientVersion parse(String desc) {
        if (desc == null || !desc.startsWith("V")) {
            return UNKNOWN;
        }
        String[] parts = desc.substring(1).split("_");
        if (parts.length < 3) {
            return UNKNOWN;
        }
        try {
            return new ClientVersion(
                    Integer.parseInt(parts[0]), Integer.parseInt(parts[1]), Integer.parseInt(parts[2]), desc);
        } catch (NumberFormatException e) {
            return UNKNOWN;
        }
    }

    /** The version of the client classes {@code loader} sees. */
    static ClientVersion of(ClassLoader loader) {
        try {
            Class<?> mqVersion = Class.forName("org.apache.rocketmq.common.MQVersion", true, loader);
            int current = mqVersion.getField("CURRENT_VERSION").getInt(null);
            Object desc = mqVersion.getMethod("getVersionDesc", int.class).invoke(null, current);
            return parse(String.valueOf(desc));
        } catch (Throwable t) {
            return UNKNOWN;
        }
    }

    /** Whether the agent knows how to reach into this client (4.9.x and 5.x). */
    boolean supported() {
        return (major == 4 && minor >= 9) || major == 5;
    }

    @Override
    public String toString() {
        return major + "." + minor + "." + patch;
    }
}
