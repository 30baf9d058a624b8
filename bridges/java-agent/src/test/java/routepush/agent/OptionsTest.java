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

    @Test
    public void anUnknownKeyIsAWarningNamingItAndPushStaysOn() {
        Properties props = new Properties();
        props.setProperty("routepush.chekIntervalMs", "5000");
        Options o = Options.parse("scanIntervalMS=5,exclude=A", props);
        assertTrue(o.enabled);
        assertEquals(1000, o.scanIntervalMs);
        assertEquals(Arrays.asList("A"), o.exclude);
        assertEquals(o.warnings.toString(), 2, o.warnings.size());
        String sys = o.warnings.get(0);
        assertTrue(sys, sys.startsWith("unknown route push option 'chekIntervalMs' (system property "
                + "-Droutepush.chekIntervalMs) ignored (did you mean checkIntervalMs?); known options: enabled, "
                + "namesrv, exclude,"));
        String arg = o.warnings.get(1);
        assertTrue(arg, arg.startsWith("unknown route push option 'scanIntervalMS' (agent argument) ignored "
                + "(did you mean scanIntervalMs?); known options: "));
        assertTrue(arg, arg.contains("statusIntervalMs"));
    }

    @Test
    public void aValueOutOfRangeKeepsTheDefaultAndSaysSo() {
        Options o = Options.parse("scanIntervalMs=0,checkIntervalMs=15000", new Properties());
        assertEquals(1000, o.scanIntervalMs);
        assertEquals(15_000, o.checkIntervalMs);
        assertEquals(Arrays.asList("route push option scanIntervalMs=0 (agent argument) is malformed: expected "
                + "a whole number in [10, 60000]; using the default 1000"), o.warnings);
        assertEquals("checkIntervalMs=15000", o.summary());
    }

    @Test
    public void aMalformedValueKeepsTheDefaultAndSaysSo() {
        Properties props = new Properties();
        props.setProperty("routepush.maxPendingBytes", "16MiB");
        Options o = Options.parse("enabled=maybe,goAwaySwitch=no,statusIntervalMs=5", props);
        assertTrue("a malformed flag keeps push on", o.enabled);
        assertTrue(o.goAwaySwitch);
        assertEquals(16L << 20, o.maxPendingBytes);
        assertEquals(0, o.statusIntervalMs);
        assertEquals(o.warnings.toString(), Arrays.asList(
                "route push option enabled=maybe (agent argument) is malformed: expected true or false; "
                        + "using the default true",
                "route push option maxPendingBytes=16MiB (system property -Droutepush.maxPendingBytes) is "
                        + "malformed: expected a whole number in [65536, 1073741824]; using the default 16777216",
                "route push option goAwaySwitch=no (agent argument) is malformed: expected true or false; "
                        + "using the default true",
                "route push option statusIntervalMs=5 (agent argument) is malformed: expected 0 (off) or a "
                        + "whole number in [10000, 86400000]; using the default 0"), o.warnings);
        assertEquals("defaults", o.summary());
    }

    @Test
    public void anArgumentThatIsNotKeyValueIsNamed() {
        // What a shell leaves of an unquoted exclude=%RETRY%*;Audit,... is one such fragment.
        Options o = Options.parse("exclude=%RETRY%*,Audit,checkIntervalMs=15000", new Properties());
        assertEquals(Arrays.asList("%RETRY%*"), o.exclude);
        assertEquals(15_000, o.checkIntervalMs);
        assertEquals(1, o.warnings.size());
        assertTrue(o.warnings.get(0), o.warnings.get(0).startsWith("route push agent argument 'Audit' ignored: "
                + "expected key=value, the pairs separated by ','"));
    }

    @Test
    public void aNameServerThatIsNotHostPortIsLeftOut() {
        Options o = Options.parse("namesrv=10.0.0.1:9876;10.0.0.2;ns3:x", new Properties());
        assertEquals(Arrays.asList("10.0.0.1:9876"), o.namesrv);
        assertEquals(2, o.warnings.size());
        assertTrue(o.warnings.get(0), o.warnings.get(0).contains("'10.0.0.2' left out: expected host:port"));
    }

    @Test
    public void aFrameLargerThanTheRoomIsCappedAtIt() {
        Options o = Options.parse("maxPendingBytes=1048576,maxFrameBytes=2097152", new Properties());
        assertEquals(1 << 20, o.maxFrameBytes);
        assertEquals(1, o.warnings.size());
        assertTrue(o.warnings.get(0), o.warnings.get(0).contains("using maxFrameBytes=1048576"));
    }

    @Test
    public void aWarningIsOneLine() {
        Options o = Options.parse("x\nSEVERE: forged=1", new Properties());
        assertFalse(o.warnings.get(0), o.warnings.get(0).contains("\n"));
        assertTrue(o.warnings.get(0), o.warnings.get(0).contains("'x\\nSEVERE: forged'"));
    }

    @Test
    public void theSummaryNamesWhatDiffersFromTheDefaults() {
        Options o = Options.parse("exclude=%RETRY%*;Audit,checkIntervalMs=15000,statusIntervalMs=300000",
                new Properties());
        assertTrue(o.warnings.isEmpty());
        assertEquals("exclude=%RETRY%*;Audit, checkIntervalMs=15000, statusIntervalMs=300000", o.summary());
        assertEquals(300_000, o.statusIntervalMs);
        assertTrue(o.jmx);
    }

    @Test
    public void offMeansOff() {
        assertFalse(Options.parse("enabled=false", new Properties()).enabled);
    }
}
