package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.io.ByteArrayOutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Random;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.SimpleFormatter;
import java.util.logging.StreamHandler;
import org.junit.Test;

/**
 * A name server writing into the application's log: forged lines in GO_AWAY reasons, remarks,
 * epochs and malformed frames, by the thousand. Every line it causes is paced (one per cause
 * per minute) and no string of its starts a line.
 */
public class LogTest {
    private static final String FORGED = "x\nSEVERE: FORGED\r\u0085\u2028\u001b]0;title\u0007";

    @Test
    public void aNameServerCannotForgeOrFloodLogLines() throws Exception {
        final List<LogRecord> records = new ArrayList<LogRecord>();
        ByteArrayOutputStream text = new ByteArrayOutputStream();
        final StreamHandler formatted = new StreamHandler(text, new SimpleFormatter());
        Handler capture = new Handler() {
            @Override
            public void publish(LogRecord r) {
                records.add(r);
                formatted.publish(r);
            }

            @Override
            public void flush() {
            }

            @Override
            public void close() {
            }
        };
        Log.LOGGER.addHandler(capture);
        try {
            long[] now = {0};
            FakeClient client = new FakeClient();
            client.id = "attacked@" + System.nanoTime();
            client.held.add("A");
            RefreshQueue queue = new RefreshQueue(100);
            Bridge bridge = new Bridge(client, Options.parse("", new Properties()), queue, () -> now[0], new Random(1));
            bridge.tick();
            byte[] goAway = new Proto.Writer().uint(1, 5000).string(3, FORGED).toByteArray();
            for (int i = 0; i < 10_000; i++) {
                bridge.frame(client.connection, Messages.GO_AWAY, goAway);
                bridge.frame(client.connection, Messages.NOTIFY, new byte[] {0x0a, 0x7f});
                bridge.frame(client.connection, Messages.NOTIFY, FakeClient.notify(1, FORGED + i, "A=1"));
                bridge.lost(1);
            }
            client.answer = 1;
            client.remark = FORGED;
            client.connection = new Object();
            for (int i = 0; i < 1000; i++) {
                now[0] += 60_000;
                bridge.tick();
            }
            Log.warn("refresh:" + client.id, "refreshing failed", new IllegalStateException(FORGED,
                    new RuntimeException(FORGED)));
        } finally {
            Log.LOGGER.removeHandler(capture);
        }
        formatted.flush();
        String out = text.toString("UTF-8");
        // goaway, malformed, epoch, lost, moved, subscribe, refresh: one line each at most.
        assertTrue(records.size() + " lines:\n" + out, records.size() <= 8);
        assertTrue(out, out.contains("SEVERE: FORGED"));
        for (String line : out.split("\n", -1)) {
            assertFalse(line, line.startsWith("SEVERE"));
            assertFalse(line, line.contains("\u001b") || line.contains("\r") || line.contains("\u0085")
                    || line.contains("\u2028"));
        }
        for (LogRecord r : records) {
            assertFalse(r.getMessage(), r.getMessage().contains("\n"));
        }
        assertEquals("escaped, not dropped", true, out.contains("x\\nSEVERE: FORGED\\r\\u0085\\u2028\\u001b]0;title\\u0007"));
    }

    @Test
    public void aPeerStringIsCappedAndEscaped() {
        StringBuilder huge = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            huge.append('\n');
        }
        String shown = Log.peer(huge.toString());
        assertTrue(shown.length() < 3 * Log.PEER_CHARS);
        assertTrue(shown.endsWith("...(100000 chars)"));
        assertEquals("a\\\\nb", Log.peer("a\\nb"));
    }
}
