import java.time.Duration;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;

/**
 * The official gRPC Java client (rocketmq-client-java) sending through a 5.x proxy:
 * {@code ENDPOINT TOPIC INTERVAL_MS}. Starts one send to TOPIC every INTERVAL_MS on a worker pool
 * (a slow or failing send does not hold the next), with the client's defaults otherwise.
 *
 * <p>Prints {@code started START_MS} once the producer runs, then one line per send:
 * {@code OK SEQ START_MS END_MS TOPIC MESSAGE_ID QUEUE_ID OFFSET} or
 * {@code FAIL SEQ START_MS END_MS TOPIC EXCEPTION: WHY}. Each line read from stdin names a topic
 * for one more send, made beside the stream and printed the same way; it stops at EOF of stdin.
 */
public class GrpcProbe {
    private static final AtomicLong SEQ = new AtomicLong();
    private static final byte[] BODY = new byte[128];

    public static void main(String[] args) throws Exception {
        String topic = args[1];
        long interval = Long.parseLong(args[2]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(args[0])
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(3))
            .build();
        long started = System.currentTimeMillis();
        Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .build();
        print("started " + started);
        ExecutorService pool = Executors.newFixedThreadPool(64);
        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor();
        ticker.scheduleAtFixedRate(
            () -> pool.submit(() -> send(provider, producer, topic)), 0, interval, TimeUnit.MILLISECONDS);
        java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String extra = line.trim();
            if (!extra.isEmpty()) {
                pool.submit(() -> send(provider, producer, extra));
            }
        }
        ticker.shutdownNow();
        pool.shutdown();
        pool.awaitTermination(10, TimeUnit.SECONDS);
        producer.close();
        System.out.flush();
        System.exit(0);
    }

    private static void send(ClientServiceProvider provider, Producer producer, String topic) {
        long n = SEQ.incrementAndGet();
        long t0 = System.currentTimeMillis();
        String line;
        try {
            SendReceipt receipt = producer.send(
                provider.newMessageBuilder().setTopic(topic).setBody(BODY).build());
            String where = "";
            if (receipt instanceof SendReceiptImpl) {
                SendReceiptImpl impl = (SendReceiptImpl) receipt;
                where = " " + impl.getMessageQueue().getQueueId() + " " + impl.getOffset();
            }
            line = "OK " + n + " " + t0 + " " + System.currentTimeMillis() + " " + topic + " "
                + receipt.getMessageId() + where;
        } catch (Throwable e) {
            String why = String.valueOf(e.getMessage()).replace('\n', ' ');
            line = "FAIL " + n + " " + t0 + " " + System.currentTimeMillis() + " " + topic + " "
                + e.getClass().getSimpleName() + ": " + why.substring(0, Math.min(200, why.length()));
        }
        print(line);
    }

    private static void print(String line) {
        synchronized (System.out) {
            System.out.println(line);
            System.out.flush();
        }
    }
}
