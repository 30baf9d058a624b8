import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Apache's producer against a name server in its start-up window: {@code NAMESRV KNOWN UNHEARD
 * COUNT}. Sends COUNT messages to KNOWN (a topic a broker registered), printing {@code sent
 * BROKER} or {@code fail WHY} for each, then one to UNHEARD (a topic no broker serves), printing
 * {@code unheard fail WHY} or {@code unheard sent BROKER}, and finally {@code done}. Uses only
 * API common to the 4.9.x and 5.x clients, so it runs on either.
 */
public class WarmProbe {
    public static void main(String[] args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("warm_probe_" + System.nanoTime());
        producer.setNamesrvAddr(args[0]);
        producer.setInstanceName("warm-" + System.nanoTime());
        producer.setSendMsgTimeout(10_000);
        producer.start();
        try {
            int count = Integer.parseInt(args[3]);
            for (int i = 0; i < count; i++) {
                System.out.println(send(producer, args[1]));
            }
            System.out.println("unheard " + send(producer, args[2]));
        } finally {
            producer.shutdown();
        }
        System.out.println("done");
    }

    private static String send(DefaultMQProducer producer, String topic) {
        try {
            SendResult result = producer.send(new Message(topic, new byte[16]));
            return "sent " + result.getMessageQueue().getBrokerName();
        } catch (Exception e) {
            return "fail " + String.valueOf(e.getMessage()).replace('\n', ' ');
        }
    }
}
