import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Reads a topic from its beginning with Apache's own consumer: {@code NAMESRV TOPIC COUNT
 * TIMEOUT_MS}. Every queue of the topic is assigned (no group rebalance), read from offset 0
 * until COUNT messages arrived or the time is up. Prints {@code ok=N} and one
 * {@code msg=KEYS|BODY} line per message, or {@code error=...}. A call to the name server or a
 * broker that fails is tried again until the time is up.
 */
public class ConsumeProbe {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        int expected = Integer.parseInt(args[2]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[3]);
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer("probe_" + System.nanoTime());
        consumer.setNamesrvAddr(args[0]);
        consumer.setInstanceName("probe-" + System.nanoTime());
        consumer.setPollTimeoutMillis(500);
        int status = 0;
        try {
            consumer.start();
            Collection<MessageQueue> queues = retried(() -> consumer.fetchMessageQueues(topic), deadline);
            consumer.assign(new ArrayList<>(queues));
            for (MessageQueue queue : queues) {
                retried(() -> {
                    consumer.seekToBegin(queue);
                    return null;
                }, deadline);
            }
            TreeMap<String, String> seen = new TreeMap<>();
            while (seen.size() < expected && System.currentTimeMillis() < deadline) {
                List<MessageExt> batch = consumer.poll();
                for (MessageExt m : batch) {
                    seen.put(m.getMsgId(), m.getKeys() + "|" + new String(m.getBody(), "UTF-8"));
                }
            }
            System.out.println("ok=" + seen.size() + " queues=" + queues.size());
            for (String line : seen.values()) {
                System.out.println("msg=" + line);
            }
        } catch (Exception e) {
            System.out.println("error=" + e);
            status = 3;
        } finally {
            consumer.shutdown();
        }
        System.exit(status);
    }

    interface Call<T> {
        T call() throws Exception;
    }

    /**
     * {@code call}, tried again until {@code deadline} when it fails: the client's own RPC timeout
     * (3 s) is a hang guard, and on a busy machine a broker may answer later than that.
     */
    static <T> T retried(Call<T> call, long deadline) throws Exception {
        while (true) {
            try {
                return call.call();
            } catch (Exception e) {
                if (System.currentTimeMillis() >= deadline) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }
}
