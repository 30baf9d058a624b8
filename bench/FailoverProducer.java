import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Apache's own producer, with its defaults (30 s name-server poll, 3 s send timeout, 2 retries),
 * starting one synchronous send every INTERVAL_MS on a worker pool, so a slow or failing send
 * does not hold the next: {@code NAMESRV TOPIC INTERVAL_MS}.
 *
 * <p>Prints {@code started START_MS} once the client runs (its route poll is scheduled from
 * then), then one line per send: {@code OK|FAIL SEQ START_MS END_MS DETAIL}. Stops at EOF of
 * stdin.
 */
public class FailoverProducer {
    public static void main(String[] args) throws Exception {
        String topic = args[1];
        long interval = Long.parseLong(args[2]);
        DefaultMQProducer producer = new DefaultMQProducer("failover_bench_java");
        producer.setNamesrvAddr(args[0]);
        producer.setInstanceName("failover-" + System.nanoTime());
        long started = System.currentTimeMillis();
        producer.start();
        System.out.println("started " + started);
        System.out.flush();
        ExecutorService pool = Executors.newFixedThreadPool(64);
        ScheduledExecutorService ticker = Executors.newSingleThreadScheduledExecutor();
        AtomicLong seq = new AtomicLong();
        byte[] body = new byte[128];
        ticker.scheduleAtFixedRate(() -> pool.submit(() -> {
            long n = seq.incrementAndGet();
            long t0 = System.currentTimeMillis();
            String line;
            try {
                SendResult result = producer.send(new Message(topic, body));
                line = "OK " + n + " " + t0 + " " + System.currentTimeMillis() + " "
                    + result.getMessageQueue().getBrokerName();
            } catch (Exception e) {
                String why = String.valueOf(e.getMessage()).replace('\n', ' ');
                line = "FAIL " + n + " " + t0 + " " + System.currentTimeMillis() + " "
                    + e.getClass().getSimpleName() + ": " + why.substring(0, Math.min(160, why.length()));
            }
            synchronized (System.out) {
                System.out.println(line);
            }
        }), 0, interval, TimeUnit.MILLISECONDS);
        Thread flusher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
                synchronized (System.out) {
                    System.out.flush();
                }
            }
        });
        flusher.setDaemon(true);
        flusher.start();
        while (System.in.read() != -1) {
            // runs until the bench closes stdin
        }
        ticker.shutdownNow();
        pool.shutdown();
        pool.awaitTermination(5, TimeUnit.SECONDS);
        System.out.flush();
        producer.shutdown();
        System.exit(0);
    }
}
