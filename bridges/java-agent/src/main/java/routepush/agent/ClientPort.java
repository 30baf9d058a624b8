package routepush.agent;

import java.util.List;
import java.util.Set;

/**
 * What the agent needs of one RocketMQ client instance ({@code MQClientInstance}): the narrow
 * door between the push logic ({@link Bridge}) and the client it serves.
 */
interface ClientPort {
    /** A name-server reply. */
    final class Reply {
        final int code;
        final byte[] body;
        final String remark;

        Reply(int code, byte[] body, String remark) {
            this.code = code;
            this.body = body;
            this.remark = remark;
        }
    }

    String clientId();

    /** Whether the instance is started and not shut down. */
    boolean running();

    /** The topics the instance holds routes for. */
    Set<String> heldTopics();

    /** The name server the instance talks to now, or null before its first request. */
    String nameServer();

    /** The name servers the instance was given. */
    List<String> nameServers();

    /** The instance's open connection to {@code addr} (compared by identity), or null. */
    Object connection(String addr);

    /** A request on the instance's own connection to {@code addr}. */
    Reply invoke(String addr, int code, byte[] body, long timeoutMs) throws Exception;

    /** The client's own route refresh of {@code topic}; true when its route changed. */
    boolean refresh(String topic) throws Exception;

    /** Lets consumers rebalance now instead of at their next period. */
    void rebalanceNow();

    /** Whether the instance has consumers (a rebalance is then worth asking for). */
    boolean hasConsumers();

    /** Makes {@code addr} the name server of the instance's next request; false if not possible. */
    boolean switchNameServer(String addr);

    /** What keeps the routes when push does not, for the agent's lines. */
    default String ownRefresh() {
        return "the client's own 30 s poll";
    }
}
