package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.util.Arrays;
import java.util.Properties;
import org.junit.Test;

public class OptionsTest {
    @Test
    public void agentArgumentsWinOverSystemProperties() {
        Properties props = new Properties();
        props.setProperty("routepush.checkIntervalMs", "5000");
        props.setProperty("routepush.exclude", "X");
        props.setProperty("unrelated.key", "1");
        Options o = Options.parse("exclude=A;B*,namesrv=10.0.0.1:9876;10.0.0.2:9876", props);
        assertEquals(5000, o.checkIntervalMs);
        assertEquals(Arrays.asList("A", "B*"), o.exclude);
        assertEquals(Arrays.asList("10.0.0.1:9876", "10.0.0.2:9876"), o.namesrv);
        assertTrue(o.excluded("A"));
        assertTrue(o.excluded("Bxyz"));
        assertFalse(o.excluded("X"));
        assertFalse(o.excluded("AA"));
    }

    @Test
    public void defaultsNeedNothing() {
        Options o = Options.parse(null, new Properties());
        assertTrue(o.enabled);
        assertTrue(o.namesrv.isEmpty());
        assertEquals(1000, o.scanIntervalMs);
        assertEquals(30_000, o.checkIntervalMs);
    }

    @Test(expected = IllegalArgumentException.class)
    public void anUnknownKeyIsRefusedByName() {
        Options.parse("scanIntervalMS=5", new Properties());
    }

    @Test(expected = IllegalArgumentException.class)
    public void aValueOutOfRangeIsRefused() {
        Options.parse("scanIntervalMs=0", new Properties());
    }

    @Test(expected = IllegalArgumentException.class)
    public void aMalformedFlagIsRefused() {
        Options.parse("enabled=maybe", new Properties());
    }

    @Test
    public void offMeansOff() {
        assertFalse(Options.parse("enabled=false", new Properties()).enabled);
    }
}
