import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.producer.TopicPublishInfo;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * An ordinary RocketMQ application for the interop tests: it knows nothing of route push (the
 * agent, when given, is a -javaagent). {@code producer|consumer NAMESRV TOPIC GROUP POLL_MS}.
 *
 * <p>Prints {@code started MS}, then {@code route MS BROKERS} whenever the set of broker names in
 * the client's own cached view of TOPIC changes (the producer's publish info; the consumer's
 * subscribe info), {@code assigned MS BROKERS} when the consumer's assigned queues change, and
 * {@code sent MS BROKER} or {@code fail MS WHY} for the producer's sends (one each 200 ms).
 * Stops at EOF of stdin.
 */
public class AgentProbe {
    public static void main(String[] args) throws Exception {
        String role = args[0];
        String namesrv = args[1];
        final String topic = args[2];
        String group = args[3];
        int pollMs = Integer.parseInt(args[4]);
        DefaultMQProducer p = null;
        DefaultMQPushConsumer c = null;
        // A start that times out on a busy machine is tried again with a fresh client.
        for (int attempt = 1; ; attempt++) {
            try {
                if (role.equals("producer")) {
                    p = new DefaultMQProducer(group);
                    p.setNamesrvAddr(namesrv);
                    p.setPollNameServerInterval(pollMs);
                    // Routes are under test, not latency: a JVM still warming up on a busy
                    // machine must not fail a send at the client's 3 s default.
                    p.setSendMsgTimeout(15000);
                    p.setInstanceName("probe-" + System.nanoTime());
                    p.start();
                } else {
                    c = new DefaultMQPushConsumer(group);
                    c.setNamesrvAddr(namesrv);
                    c.setPollNameServerInterval(pollMs);
                    c.setInstanceName("probe-" + System.nanoTime());
                    c.subscribe(topic, "*");
                    c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) ->
                        ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
                    c.start();
                }
                break;
            } catch (Exception e) {
                System.err.println("start attempt " + attempt + " failed: " + e);
                if (p != null) {
                    p.shutdown();
                }
                if (c != null) {
                    c.shutdown();
                }
                p = null;
                c = null;
                if (attempt == 3) {
                    throw e;
                }
            }
        }
        final DefaultMQProducer producer = p;
        final DefaultMQPushConsumer consumer = c;
        say("started " + System.currentTimeMillis());
        Thread watcher = new Thread(() -> {
            String route = "";
            String assigned = "";
            long nextSend = 0;
            while (true) {
                long now = System.currentTimeMillis();
                String r;
                if (producer != null) {
                    TopicPublishInfo info = producer.getDefaultMQProducerImpl().getTopicPublishInfoTable().get(topic);
                    r = names(info == null ? null : info.getMessageQueueList());
                    if (now >= nextSend) {
                        nextSend = now + 200;
                        try {
                            SendResult result = producer.send(new Message(topic, new byte[16]));
                            say("sent " + System.currentTimeMillis() + " " + result.getMessageQueue().getBrokerName());
                        } catch (Exception e) {
                            say("fail " + System.currentTimeMillis() + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
                        }
                    }
                } else {
                    ConcurrentMap<String, Set<MessageQueue>> table =
                        consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getTopicSubscribeInfoTable();
                    r = names(table.get(topic));
                    List<MessageQueue> mine = new ArrayList<>();
                    for (MessageQueue mq : consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                            .getProcessQueueTable().keySet()) {
                        if (mq.getTopic().equals(topic)) {
                            mine.add(mq);
                        }
                    }
                    String a = names(mine);
                    if (!a.equals(assigned)) {
                        assigned = a;
                        say("assigned " + now + " " + a);
                    }
                }
                if (!r.equals(route)) {
                    route = r;
                    say("route " + now + " " + r);
                }
                try {
                    Thread.sleep(20);
                } catch (InterruptedException e) {
                    return;
                }
            }
        });
        watcher.setDaemon(true);
        watcher.start();
        while (System.in.read() != -1) {
            // runs until the test closes stdin
        }
        if (producer != null) {
            producer.shutdown();
        } else {
            consumer.shutdown();
        }
        System.exit(0);
    }

    private static String names(Collection<MessageQueue> queues) {
        if (queues == null || queues.isEmpty()) {
            return "-";
        }
        TreeSet<String> names = new TreeSet<>();
        for (MessageQueue mq : queues) {
            names.add(mq.getBrokerName());
        }
        return String.join(",", names);
    }

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
