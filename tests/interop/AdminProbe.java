import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * One admin call through Apache's own client: {@code ADDR VERB [ACCESS_KEY SECRET_KEY]}.
 * With keys it signs with upstream's AclClientRPCHook. Prints {@code ok=...} or {@code error=...}.
 * The call's timeout is 15 s rather than the client's 3 s: it only guards against a hang, and on a
 * busy machine an answer may come later than 3 s.
 */
public class AdminProbe {
    private static final long CALL_TIMEOUT_MS = 15_000;

    public static void main(String[] args) throws Exception {
        String addr = args[0];
        RPCHook hook = args.length > 3
            ? new AclClientRPCHook(new SessionCredentials(args[2], args[3])) : null;
        DefaultMQAdminExt admin = new DefaultMQAdminExt(hook, CALL_TIMEOUT_MS);
        admin.setNamesrvAddr(addr);
        admin.setInstanceName("probe-" + System.nanoTime());
        admin.start();
        int status = 0;
        try {
            switch (args[1]) {
                case "wipe":
                    System.out.println("ok=" + admin.wipeWritePermOfBroker(addr, "broker-a"));
                    break;
                case "kvput":
                    admin.createAndUpdateKvConfig("ORDER_TOPIC_CONFIG", "T", "broker-a:4");
                    System.out.println("ok=put");
                    break;
                case "topics":
                    System.out.println("ok=" + admin.fetchAllTopicList().getTopicList());
                    break;
                default:
                    throw new IllegalArgumentException(args[1]);
            }
        } catch (Exception e) {
            System.out.println("error=" + e);
            status = 3;
        } finally {
            admin.shutdown();
        }
        System.exit(status);
    }
}
