package routepush.agent;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;

import org.junit.Test;

public class ClientVersionTest {
    @Test
    public void upstreamVersionNamesParse() {
        ClientVersion v = ClientVersion.parse("V4_9_7");
        assertEquals(4, v.major);
        assertEquals(9, v.minor);
        assertEquals(7, v.patch);
        assertTrue(v.supported());
        assertEquals("5.3.3", ClientVersion.parse("V5_3_3").toString());
        assertTrue(ClientVersion.parse("V5_0_0_SNAPSHOT").supported());
    }

    @Test
    public void olderOrUnreadableVersionsAreNotClaimed() {
        assertFalse(ClientVersion.parse("V4_8_0").supported());
        assertSame(ClientVersion.UNKNOWN, ClientVersion.parse("HIGHER_VERSION"));
        assertSame(ClientVersion.UNKNOWN, ClientVersion.parse(null));
        assertSame(ClientVersion.UNKNOWN, ClientVersion.parse("Vx_y_z"));
    }

    @Test
    public void aLoaderWithoutTheClientIsUnknown() {
        assertSame(ClientVersion.UNKNOWN, ClientVersion.of(new java.net.URLClassLoader(new java.net.URL[0], null)));
    }
}
