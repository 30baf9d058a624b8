package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;

import java.util.List;
import java.util.Properties;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import org.apache.rocketmq.proxy.ProxyStartup;
import org.apache.rocketmq.proxy.service.route.ClusterTopicRouteService;
import org.apache.rocketmq.proxy.service.route.LocalTopicRouteService;
import org.junit.After;
import org.junit.Before;
import org.junit.Test;

/**
 * Proxies the agent leaves alone, found the way a real proxy is (through its start-up class's
 * objects): one in local mode, and one whose route service has another shape. Each gets one line,
 * however often the agent scans, and no attachment.
 */
public class ProxyShapesTest {
    private Watcher watcher;

    @Before
    public void setUp() {
        watcher = new Watcher(Options.parse("jmx=false", new Properties()));
        watcher.addProxyLoader(getClass().getClassLoader());
    }

    @After
    public void tearDown() {
        watcher.stop();
    }

    /** The lines five scans write. */
    private List<LogRecord> scans() {
        return LogLines.capture(() -> {
            for (int i = 0; i < 5; i++) {
                watcher.scan();
            }
        });
    }

    private static int lines(List<LogRecord> records, Level level, String text) {
        int n = 0;
        for (LogRecord r : records) {
            if (r.getLevel() == level && r.getMessage().contains(text)) {
                n++;
            }
        }
        return n;
    }

    @Test
    public void aProxyInLocalModeIsLeftAloneWithOneLine() {
        LocalTopicRouteService local = new LocalTopicRouteService();
        ProxyStartup.hold(local);
        List<LogRecord> records = scans();
        assertTrue(ProxyAccess.local(local));
        assertEquals(0, watcher.attachments().size());
        assertEquals(1, lines(records, Level.INFO, "runs in local mode"));
    }

    @Test
    public void aRouteServiceOfAnotherShapeIsLeftAloneWithOneWarning() {
        ProxyStartup.hold(new ClusterTopicRouteService());
        List<LogRecord> records = scans();
        assertEquals(0, watcher.attachments().size());
        assertEquals(1, lines(records, Level.WARNING, "cannot serve the route cache of the RocketMQ proxy"));
        assertEquals(0, lines(records, Level.INFO, "attached to proxy"));
    }
}
